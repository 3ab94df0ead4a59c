"""The command line the results-reading benchmarks share (``best_k.py``, ``estimate.py``): results files or folders
and ``--hardware`` filters, in any order. Only the standard library, so a benchmark run against an older checkout
(its ``draftbench`` on ``PYTHONPATH``) still parses its arguments."""

from __future__ import annotations

import argparse
from pathlib import Path


def parse_results_args(argv: list[str], doc: str | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hardware", action="append", default=[], metavar="NAME", help="keep only files of this hardware "
                   "(repeatable)")
    p.add_argument("paths", nargs="+", metavar="FILE_OR_FOLDER", help="results files, or folders searched for *.json")
    args = p.parse_intermixed_args(argv)         # paths and --hardware in any order, as before
    missing = [path for path in args.paths if not Path(path).exists()]
    if missing:
        p.error(f"no such file or folder: {', '.join(missing)}")
    return args
