#!/usr/bin/env python3
"""The tool's own overhead: wall time − Σ model load − Σ request time, as a fraction of wall.

    python benchmarks/overhead.py            # a small real sweep of the forged models, then the 500-row check
    python benchmarks/overhead.py --rows-only

Part 1 runs a small sweep (forged SmolLM2 family, real llama-server) with a reporter that
timestamps every event, and says where the rest of the wall time goes: before the server starts
(model checks, port choice and release), start-up beyond the model load (probes, readiness
polling), requests' client side and warm-up, stopping the server, analysing and saving after each
row, and writing the report. Target: overhead ≤ 5% of wall.

Part 2 times saving and analysing a synthetic results file of 100, 250 and 500 rows with
per-request data, to show that what a sweep does after each combination grows linearly with the
number of rows (a 500-row sweep must not slow down as it fills).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from draftbench.analysis.verdict import analyze
from draftbench.common.errors import DraftbenchError
from draftbench.results.file import RequestRecord, ResultsFile, Row, load_results, save_results
from draftbench.results.kinds import Role
from draftbench.sweep.console import Reporter


class Stopwatch(Reporter):
    """Every sweep event with its time."""

    def __init__(self):
        self.events: list[tuple[str, float]] = []

    def _mark(self, name):
        self.events.append((name, time.perf_counter()))

    def combination_started(self, index, total, title): self._mark("combination_started")
    def server_starting(self): self._mark("server_starting")
    def server_ready(self, load_time_s): self._mark("server_ready")
    def benchmarking(self): self._mark("benchmarking")
    def request_done(self, done, total): self._mark("request_done")
    def measured(self, tps, acceptance, speculative): self._mark("measured")
    def server_stopped(self): self._mark("server_stopped")
    def row_recorded(self, row): self._mark("row_recorded")


def spans(events, start: str, end: str) -> float:
    """Σ time from each ``start`` event to the next ``end`` event."""
    total, opened = 0.0, None
    for name, t in events:
        if name == start and opened is None:
            opened = t
        elif name == end and opened is not None:
            total += t - opened
            opened = None
    return total


def live_sweep(folder: Path) -> int:
    from draftbench.sweep import Sweep
    from draftbench.sweep.config_file import load_config

    from forge import ensure_family
    models = {k: str(v) for k, v in ensure_family(which="test", quiet=True).items()}
    config_path = folder / "overhead.json"
    config_path.write_text(json.dumps({
        "name": "overhead", "hardware": "this-machine", "backend": "llamacpp",
        "targets": [{"label": "241M Q4_1", "path": models["target-2x"]}],
        "drafts": [{"label": "135M Q4_1", "path": models["base"]}, {"label": "57M trunc8", "path": models["draft-trunc"]}],
        "settings": {"runs": 2, "max_tokens": 64, "gpu_layers": 0, "ctx_size": 1024, "port": 0,
                     "prompts": ["code", "json", "list"]}}))
    watch = Stopwatch()
    results_path = folder / "overhead-results.json"
    start = time.perf_counter()
    code = Sweep(load_config(config_path), results_path, folder / "overhead.html", reporter=watch).run()
    wall = time.perf_counter() - start
    results = load_results(results_path)
    loads = sum(r.load_time_s or 0.0 for r in results.results)
    requests = sum(q.total_s or 0.0 for r in results.results for q in r.requests)
    first_requests = [r.requests[0].total_s or 0.0 for r in results.results if r.requests]
    benchmarking = spans(watch.events, "benchmarking", "request_done")   # warm-up + the first request
    warmup = max(0.0, benchmarking - sum(first_requests))
    overhead = wall - loads - requests - warmup
    where = {
        "before the server starts (model checks, port choice/release)": spans(watch.events, "combination_started",
                                                                              "server_starting"),
        "start-up beyond the model load (probes, readiness polling)": spans(watch.events, "server_starting",
                                                                            "server_ready") - loads,
        "between requests (client side, counters)": spans(watch.events, "benchmarking", "measured") - requests - warmup,
        "after the last request (speculation checks, row)": spans(watch.events, "measured", "server_stopped"),
        "analysing and saving after each row": spans(watch.events, "server_stopped", "row_recorded"),
        "after the last row (final analysis, report)": wall - (watch.events[-1][1] - start) if watch.events else 0.0,
    }
    print(f"Sweep of {len(results.results)} combinations, exit code {code}: wall {wall:.1f} s")
    print(f"  model loads {loads:.1f} s, requests {requests:.1f} s, warm-up requests {warmup:.1f} s")
    print(f"  overhead {overhead:.1f} s = {overhead / wall:.1%} of wall (target ≤ 5%)")
    for what, seconds in where.items():
        print(f"    {what:62s} {seconds:7.2f} s  {seconds / wall:6.1%}")
    return code


def synthetic(n_rows: int, n_requests: int = 18) -> ResultsFile:
    rows = []
    for i in range(n_rows):
        target = f"T{i // 50}"
        role = Role.BASELINE if i % 50 == 0 else Role.SPECULATIVE
        records = tuple(RequestRecord(prompt_id=f"p{j % 6}", category="code", run=j // 6, ttft_s=0.1, total_s=2.0,
                                      decode_tps=50.0 * (1 + (i % 50) / 100) * (1 + 0.01 * (j % 3)),
                                      completion_tokens=100, text="x" * 400) for j in range(n_requests))
        rows.append(Row(target=target, draft=None if role is Role.BASELINE else f"d{i}", role=role, mean_tps=50.0,
                        requests=records, draft_max=None if role is Role.BASELINE else 4))
    return ResultsFile(name="synthetic", hardware="h", backend="llamacpp", model_family="", settings={"runs": 3},
                       results=tuple(rows))


def rows_check(folder: Path) -> None:
    print("After each combination: re-analyse and save the whole file (then load it back once)")
    per_row = []
    for n in (100, 250, 500):
        results = synthetic(n)
        path = folder / f"synthetic-{n}.json"
        t0 = time.perf_counter()
        analysed = analyze(results)
        t1 = time.perf_counter()
        save_results(analysed, path)
        t2 = time.perf_counter()
        load_results(path)
        t3 = time.perf_counter()
        per_row.append((t2 - t0) / n)
        print(f"  {n:4d} rows ({path.stat().st_size / 1e6:5.1f} MB): analyse {t1 - t0:6.3f} s, save {t2 - t1:6.3f} s, "
              f"load {t3 - t2:6.3f} s; per row {1000 * (t2 - t0) / n:.2f} ms")
    print(f"  per-row cost at 500 rows vs 100 rows: {per_row[-1] / per_row[0]:.2f}x (1x = linear)")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows-only", action="store_true", help="only the synthetic 500-row check (no llama-server)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if not args.rows_only:
            live_sweep(folder)
        rows_check(folder)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except DraftbenchError as exc:     # no llama-server, no models: its cause and fix in a line or two, not a traceback
        sys.exit(f"Error: {exc}")
