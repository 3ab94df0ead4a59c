#!/usr/bin/env python3
"""Loading, analysing, exporting and rendering must grow in proportion to the rows (issue 28).

    python benchmarks/scale.py [--rows 50000] [--steps 4] [--skip-render] [--profile STAGE]

Builds synthetic results files shaped like a large parameter sweep: targets with a baseline, a
control, each draft alone, and speculative rows for several drafts × k values, a ceiling pair for
some, each row with two requests (texts compared for equivalence, per-position counts). Sizes
go from ROWS / 2**(STEPS-1) up to ROWS, doubling. For each it times, in this process:

* load    — ``load_results`` (bounded read, duplicate-key check, type and bound check, rows built);
* analyse — ``analyze`` (speed-ups, equivalence, theory, per-draft predictions, verdicts);
* export  — ``sweep.py --results F --export csv`` as a user runs it (a fresh process; includes load
  and analyse);
* render  — ``render_report`` (the HTML page; includes analyse).

and prints wall and CPU seconds, and CPU seconds per row as a ratio to the smallest file: linear
work keeps the ratio near 1, a quadratic step shows as about 2, 4, 8 as the rows double. Wall
seconds depend on the machine and on what else runs on it (say both when quoting them); CPU
seconds and the ratios carry over better. POSIX only (``resource``).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from draftbench.analysis.verdict import analyze
from draftbench.results.file import RequestRecord, ResultsFile, Row, load_results, save_results

REPO = Path(__file__).resolve().parents[1]
DRAFTS = ("0.5B", "1.5B", "3B", "ngram")
KS = (2, 4, 6, 8, 12, 16)
PROMPTS = ("code-1", "prose-1")
TEXT = "def add(a, b):\n    return a + b\n"


def requests(base_tps: float, accepted: float, seed: int) -> tuple[RequestRecord, ...]:
    out = []
    for i, pid in enumerate(PROMPTS):
        tps = base_tps * (1 + ((seed * 7 + i * 3) % 11 - 5) / 100)
        drafted = 120
        out.append(RequestRecord(prompt_id=pid, category=pid.split("-")[0], run=0, ttft_s=0.05 + i / 100,
                                 total_s=round(128 / tps, 4), decode_tps=round(tps, 3), server_decode_tps=round(tps, 3),
                                 prompt_tokens=40, completion_tokens=128, draft_n=drafted,
                                 draft_n_accepted=int(drafted * accepted), verify_steps=40,
                                 accepted_per_pos=[int(drafted * accepted / 3)] * 3, finish_reason="length",
                                 text=TEXT if (seed + i) % 20 else TEXT[::-1]))
    return tuple(out)


def synthetic(n_rows: int) -> ResultsFile:
    """``n_rows`` rows (not yet analysed): per target a baseline, |DRAFTS|·|KS| speculative rows, 2 ceiling rows and a control."""
    rows: list[Row] = []
    t = 0
    while len(rows) < n_rows:
        target = f"T{t}"
        base = 20.0 + t % 13
        rows.append(Row(target=target, role="baseline", mean_tps=base, mean_total_time=6.0, load_time_s=3.0,
                        requests=requests(base, 0.0, t), server={"backend": "llamacpp", "command": ["llama-server"],
                                                                 "version": "b1", "port": 8080}))
        for d, draft in enumerate(DRAFTS):
            if t == 0:      # a draft alone is measured once, for every target's cost ratio
                rows.append(Row(target=draft, role="draft_alone", mean_tps=base * 4,
                                requests=requests(base * 4, 0.0, d)))
            for k in KS:
                tps = base * (0.8 + 0.1 * d + 0.02 * k)
                rows.append(Row(target=target, draft=draft, role="speculative", draft_max=k, mean_tps=tps,
                                acceptance_rate=0.6, speculation_active=True, draft_n=360, draft_n_accepted=216,
                                verify_steps=120, mean_accepted_len=2.8, accepted_per_pos=[72] * k,
                                requests=requests(tps, 0.6, t * 31 + d * 7 + k),
                                candidate={"label": draft, "method": [], "draft": draft, "params": {}}))
        for level, synth in (("measured", 2.8), ("full", 9.0)):
            rows.append(Row(target=target, draft=DRAFTS[0], role="ceiling", draft_max=8, mean_tps=base * 1.5,
                            synthetic={"level": level, "synth_len": synth, "k": 8},
                            requests=requests(base * 1.5, 0.9, t)))
        rows.append(Row(target=target, role="control", mean_tps=base, requests=requests(base, 0.0, t + 1)))
        t += 1
    return ResultsFile(name="scale", hardware="synthetic", backend="llamacpp", model_family="f",
                       settings={"runs": 1, "temperature": 0, "noise_floor": 0.02}, results=tuple(rows[:n_rows]))


def timed(action) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process and its children) for ``action()``."""
    def cpu() -> float:
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    wall, used = time.perf_counter(), cpu()
    action()
    return time.perf_counter() - wall, cpu() - used


def export_cli(path: Path) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "sweep.py"), "--results", str(path), "--export", "csv",
                           "--output", os.devnull], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"export failed: {proc.stderr}")


def render(results: ResultsFile) -> None:
    from draftbench.report.page import render_report
    render_report(results, cdn=True)


def measure(path: Path, stages: tuple[str, ...]) -> dict[str, tuple[float, float]]:
    loaded: list[ResultsFile] = []
    out = {"load": timed(lambda: loaded.append(load_results(path)))}
    out["analyse"] = timed(lambda: analyze(loaded[0]))
    out["export"] = timed(lambda: export_cli(path))
    if "render" in stages:
        out["render"] = timed(lambda: render(loaded[0]))
    return out


def profile(path: Path, stage: str) -> None:
    loaded = load_results(path)
    work = {"load": lambda: load_results(path), "analyse": lambda: analyze(loaded),
            "render": lambda: render(loaded)}[stage]
    profiler = cProfile.Profile()
    profiler.runcall(work)
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=50_000)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--skip-render", action="store_true", help="the report is the slowest stage; leave it out")
    p.add_argument("--profile", choices=("load", "analyse", "render"), help="print a profile of one stage at the "
                   "largest size instead")
    args = p.parse_args(argv)
    sizes = [max(1, args.rows >> (args.steps - 1 - i)) for i in range(args.steps)]
    stages = ("load", "analyse", "export") + (() if args.skip_render else ("render",))
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print("per stage: wall seconds, CPU seconds, and CPU per 1,000 rows as a ratio to the smallest file "
          "(~1 = linear)")
    print(f"{'rows':>7} {'MB':>6}  " + "  ".join(f"{s:>22}" for s in stages))
    base: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = Path(tmp) / f"r{n}.json"
            save_results(analyze(synthetic(n)), path)      # as a sweep saves it: speed-ups, theory, verdicts
            if args.profile and n == sizes[-1]:
                profile(path, args.profile)
                return 0
            seconds = measure(path, stages)
            cells = []
            for stage in stages:
                wall, cpu = seconds[stage]
                base.setdefault(stage, cpu / n)
                cells.append(f"{wall:6.1f}s {cpu:6.1f}s {cpu / n / base[stage]:5.2f}x")
            print(f"{n:>7} {path.stat().st_size / 1e6:6.0f}  " + "  ".join(f"{c:>22}" for c in cells), flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
