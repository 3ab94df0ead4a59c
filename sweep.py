#!/usr/bin/env python3
"""Thin entry point: `python sweep.py --help`. The logic lives in draftbench/cli/sweep_cli.py."""

from draftbench.cli.sweep_cli import entry

if __name__ == "__main__":
    entry()
