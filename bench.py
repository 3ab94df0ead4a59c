#!/usr/bin/env python3
"""Thin entry point: `python bench.py --help`. The logic lives in draftbench/cli/bench_cli.py."""

from draftbench.cli.bench_cli import entry

if __name__ == "__main__":
    entry()
