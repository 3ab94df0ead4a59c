#!/usr/bin/env python3
"""Thin entry point: `python server.py --help`. The logic lives in draftbench/cli/server_cli.py."""

from draftbench.cli.server_cli import entry

if __name__ == "__main__":
    entry()
