#!/usr/bin/env python3
"""Check that loading a results file is linear in its size: parse + type-check + build the rows.

    python benchmarks/results_load.py [REQUESTS_PER_ROW]

Builds synthetic results files of 1x, 4x and 16x the rows (each row with REQUESTS_PER_ROW
requests, default 200), loads each a few times and prints seconds per MB and the ratio to the
smallest file. Linear loading keeps the ratio near 1; a quadratic step would show as about 4 and
16. Ratios, not absolute timings: they carry over between machines.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from draftbench.results.file import RequestRecord, ResultsFile, Row, load_results, save_results


def synthetic(rows: int, requests: int) -> ResultsFile:
    records = tuple(RequestRecord(prompt_id=f"p{i}", category="code", run=i % 3, ttft_s=0.1, total_s=1.0,
                                  decode_tps=30.0 + i % 7, completion_tokens=128, draft_n=64, draft_n_accepted=40,
                                  text="x" * 400) for i in range(requests))
    return ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="f", settings={"runs": 3},
                       results=tuple(Row(target=f"T{i}", requests=records, tps={"n": requests, "mean": 31.0})
                                     for i in range(rows)))


def seconds_per_mb(path: Path, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        load_results(path)
        best = min(best, time.perf_counter() - start)
    return best / (path.stat().st_size / 1e6)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("requests", nargs="?", type=int, default=200, metavar="REQUESTS_PER_ROW",
                   help="requests in each synthetic row (default 200)")
    requests = p.parse_args(argv).requests
    if requests < 1:
        p.error(f"REQUESTS_PER_ROW must be at least 1, not {requests}")
    with tempfile.TemporaryDirectory() as tmp:
        base = None
        for factor in (1, 4, 16):
            path = Path(tmp) / f"r{factor}.json"
            save_results(synthetic(2 * factor, requests), path)
            per_mb = seconds_per_mb(path)
            base = base or per_mb
            size_mb = path.stat().st_size / 1e6
            print(f"{factor:>3}x rows: {size_mb:8.1f} MB  {per_mb * 1000:7.1f} ms/MB  ratio to 1x {per_mb / base:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
