#!/usr/bin/env python3
"""How far best-k-from-one-run is off: every k sweep in the results files given, predicted vs measured.

    python benchmarks/best_k.py [--hardware NAME] FILE_OR_FOLDER [...]

For every target and draft measured at several k (a ``draft_max`` list), the prediction made from
the largest k's per-position counts and timings (analysis/draft/best_k.py) is put beside each other
k measured, and the error is (predicted − measured) / measured. Printed: the distribution of those
errors over every k of every sweep (median and 90th percentile of the absolute error, the largest,
and the share within ±10%), then each sweep's own line. Files are re-analysed with this checkout's
code, so an older file is judged by today's model. ``--hardware`` (repeatable) keeps only files of that
hardware; a file seen twice (a copy) counts once; files from the tests' in-process fake server are skipped.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from results_args import parse_results_args  # benchmarks/, the script's own folder

if not any(p and Path(p, "draftbench").is_dir() for p in sys.path[1:]):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from draftbench.analysis.draft.best_k import leading_rows
from draftbench.analysis.verdict import analyze
from draftbench.common.errors import DraftbenchError
from draftbench.results.file import load_results


def sweeps(args: list[str], hardware: list[str]) -> list[tuple[str, dict]]:
    """(name, prediction) for every leading row that was compared with at least one measured k."""
    paths: list[Path] = []
    for arg in args:
        p = Path(arg)
        paths += sorted(p.rglob("*.json")) if p.is_dir() else [p]
    out, seen = [], set()
    for path in paths:
        try:
            results = analyze(load_results(path))
        except (DraftbenchError, ValueError):
            continue
        commands = [str(((r.server or {}).get("command") or [""])[0]) for r in results.results]
        if (hardware and results.hardware not in hardware) or any(c.endswith("fake-server") for c in commands) \
                or (results.name, results.timestamp) in seen:
            continue
        seen.add((results.name, results.timestamp))
        for row in leading_rows(results.results):
            prediction = row.k_prediction or {}
            if prediction.get("compared"):
                out.append((f"{path.name}: {row.target} + {row.draft}", prediction))
    return out


def main(argv: list[str]) -> int:
    args = parse_results_args(argv, __doc__)
    hardware, paths = args.hardware, args.paths
    found = sweeps(paths, hardware)
    errors = [p["error_pct"] for _, pred in found for p in pred["per_k"] if p.get("error_pct") is not None]
    if not errors:
        print("no k sweep with per-position counts in these files", file=sys.stderr)
        return 1
    absolute = sorted(abs(e) for e in errors)
    p90 = statistics.quantiles(absolute, n=10)[-1] if len(absolute) >= 10 else absolute[-1]
    within = sum(1 for e in absolute if e <= 10) / len(absolute)
    print(f"{len(found)} k sweeps, {len(errors)} predicted k compared with their measurement")
    print(f"  |error|: median {statistics.median(absolute):.1f}%, p90 {p90:.1f}%, max {absolute[-1]:.1f}%; "
          f"within ±10%: {within:.0%}; mean signed error {statistics.fmean(errors):+.1f}%")
    for name, pred in found:
        per_k = ", ".join(f"k={p['k']} {p['error_pct']:+.1f}%" for p in pred["per_k"] if p.get("error_pct") is not None)
        print(f"  {name} (from k={pred['from_k']}, drafts {pred.get('drafts', 'full')}, step overhead "
              f"{(pred.get('cost_per_step_s') or 0) * 1000:.2f} ms): {per_k}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
