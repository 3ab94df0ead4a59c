#!/usr/bin/env python3
"""How far the duration estimates (--dry-run, the console's ETA) are from the time rows really took.

    python benchmarks/estimate.py [--hardware NAME] FILE_OR_FOLDER [...]

Every measured row of every results file given (folders are searched for *.json) is estimated the
way the sweep would have estimated it just before running it: from the other results files of the
same hardware (as --dry-run reads them) and the rows of its own file measured before it (as the ETA
learns). The estimate is compared with the row's wall time (start of its server to its last
request). Printed per kind of row (baseline, candidate, concurrency level, ceiling) and per source
of the estimate: how many rows, the median of estimate ÷ actual, its 10th-90th percentiles, and the
share within a factor of 1.5 either way. ``--hardware`` (repeatable) keeps only files of that hardware
(the test suite also writes synthetic files, whose rows took no real time).

Only the estimator's public API is used (Estimator, estimate_of), so the same script measures an
older checkout's estimator too: PYTHONPATH=/path/to/other/checkout python benchmarks/estimate.py …
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from results_args import parse_results_args  # benchmarks/, the script's own folder

if not any(p and Path(p, "draftbench").is_dir() for p in sys.path[1:]):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from draftbench.common.errors import DraftbenchError
from draftbench.results.file import ResultsFile, Row, load_results
from draftbench.results.kinds import Role
from draftbench.sweep.config_file import SweepConfig
from draftbench.sweep.estimate import Estimator, estimate_of


def files(args: list[str]) -> list[tuple[Path, ResultsFile]]:
    paths: list[Path] = []
    for arg in args:
        p = Path(arg)
        paths += sorted(p.rglob("*.json")) if p.is_dir() else [p]
    out = []
    for path in paths:
        try:
            results = load_results(path)
        except DraftbenchError:
            continue
        if not results.is_upstream and any(r.wall_time for r in results.results):
            out.append((path, results))
    return out


def n_prompts(results: ResultsFile) -> int:
    return max(1, len({r.prompt_id for row in results.results for r in row.requests}))


def combination(row: Row):
    """What estimate_of reads of a planned combination, from the row it became."""
    candidate = SimpleNamespace(label=row.draft) if row.draft is not None else None
    return SimpleNamespace(role=Role(row.role), target=SimpleNamespace(label=row.target, path=row.target_path),
                           candidate=candidate, draft_max=row.draft_max, concurrency=row.concurrency,
                           synthetic=row.synthetic, draft=None)


def kind(row: Row) -> str:
    if row.concurrency != 1:
        return f"{row.role} at {row.concurrency} streams"
    return row.role


def measure(corpus: list[tuple[Path, ResultsFile]]) -> list[tuple[str, str, float]]:
    """(kind, source, estimate ÷ actual) for every row with a wall time that could be estimated."""
    out = []
    for path, results in corpus:
        others = tuple(r for p, r in corpus if p != path and r.hardware == results.hardware)
        config = SweepConfig(name=results.name, hardware=results.hardware, backend=results.backend,
                             model_family="", targets=(), drafts=(), settings=results.read_settings())
        estimator = Estimator(config, n_prompts(results), others)
        runs = config.settings.runs
        for i, row in enumerate(results.results):
            estimator.add(replace(results, results=results.results[:i]))
            complete = len([r for r in row.requests if r.error is None]) >= n_prompts(results) * runs
            if not row.ok or not row.wall_time or not complete:     # raced or failed rows measured less
                continue
            estimate = estimate_of(estimator, combination(row))
            if estimate.source != "unknown" and estimate.seconds > 0:
                out.append((kind(row), estimate.source, estimate.seconds / row.wall_time))
    return out


def describe(ratios: list[float]) -> str:
    ratios = sorted(ratios)
    if len(ratios) >= 10:
        deciles = statistics.quantiles(ratios, n=10)
        spread = f"p10 {deciles[0]:.2f}  p90 {deciles[-1]:.2f}"
    else:
        spread = f"min {ratios[0]:.2f}  max {ratios[-1]:.2f}"
    within = sum(1 for r in ratios if 1 / 1.5 <= r <= 1.5) / len(ratios)
    return f"n {len(ratios):4d}  median {statistics.median(ratios):5.2f}  {spread}  within 1.5x {within:4.0%}"


def main(argv: list[str]) -> int:
    args = parse_results_args(argv, __doc__)
    hardware, paths = args.hardware, args.paths
    corpus = [(p, r) for p, r in files(paths) if not hardware or r.hardware in hardware]
    found = measure(corpus)
    if not found:
        print("no measured rows with a wall time in these files", file=sys.stderr)
        return 1
    print(f"{len(corpus)} results files, {len(found)} rows; estimate ÷ actual wall time (1.00 = exact)")
    groups: dict[str, list[float]] = {"all rows": [r for _, _, r in found]}
    for k, source, ratio in found:
        groups.setdefault(f"kind: {k}", []).append(ratio)
        groups.setdefault(f"source: {source}", []).append(ratio)
    for name, ratios in groups.items():
        print(f"  {name:32s} {describe(ratios)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
