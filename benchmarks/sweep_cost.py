#!/usr/bin/env python3
"""What a sweep costs beyond its measurements: the time per recorded step as the results file grows, and the
analysis's share of the sweep's CPU (issue 44).

    python benchmarks/sweep_cost.py [--rows 1000] [--candidates 9] [--stages 2] [--per-stage 3] [--profile [--top 25]]

A whole sweep on the simulated machine of ``benchmarks/simulation`` (its servers answer at once, on a simulated
clock): ``rows / (candidates + 1)`` targets, each with its baseline and ``candidates`` drafts measured in two
stages of three prompts (``--stages``, ``--per-stage``: the tool's default plan is 6 of 6), through the command
line's own session (``sweep.Sweep``: every row saved in the results file's journal as it is recorded, the file
rewritten when the journal has grown past it, and at the end) — so nothing but draftbench's own work takes CPU.
It prints

* the CPU seconds per recorded step (a candidate's server beside the stage's baseline server: two rows recorded)
  over the first and the last tenth of the steps, and their ratio — about 1 when a step costs the same however
  large the file has grown (it was about 15 at 100 rows when every row re-analysed and rewrote the file) — with
  and without the file's rewrites, which are amortised (each rewrite follows a journal as large as the file);
* the CPU spent in the analysis (every call from the sweep into ``draftbench.analysis``: the decision at each
  look, each step's row fields, the rows the console shows, the final analysis) as a share of the sweep's, by
  entry point (goal: at most 5%), and how much of it is the forecast of what would settle each target left
  unresolved (``analysis/settle.py``, in the final analysis).

CPU seconds are this process's (``time.process_time``): the machine's other work does not count, though a busy
machine still stretches them a little. Quote the ratio, and the machine and date with any figure.
"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import itertools
import json
import pstats
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from draftbench.sweep import Sweep
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.console import Reporter
from draftbench.sweep.plan import plan
from draftbench.sweep.session import RunOptions
from simulation.grids import prompts
from simulation.world import Cand, Grid, Machine, SimBackend, World, draw_truth


class Clocks:
    """CPU seconds in what the sweep calls, by name; nested calls counted once, in the outermost."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self._depth, self._start = 0, 0.0

    def wrap(self, name: str, fn):
        def timed(*args, **kwargs):
            if self._depth == 0:
                self._start = time.process_time()
            self._depth += 1
            try:
                return fn(*args, **kwargs)
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self.seconds[name] += time.process_time() - self._start
        return timed

    def install(self) -> None:
        """Every function of ``draftbench.analysis`` a sweep module imports, ``Decider.decide``, and the results
        file's rewrites (``save_results`` as the store calls it)."""
        import draftbench.analysis.decision as decision
        import draftbench.sweep.store as store
        for name, module in list(sys.modules.items()):
            if name.startswith("draftbench.sweep."):
                for attr, value in list(vars(module).items()):
                    if inspect.isfunction(value) and value.__module__.startswith("draftbench.analysis"):
                        setattr(module, attr, self.wrap(attr, value))
        decision.Decider.decide = self.wrap("decide", decision.Decider.decide)
        store.save_results = self.wrap("rewrite", store.save_results)


class Timed(Reporter):
    """The CPU clock (and the rewrites' CPU so far) at the end of every step."""

    def __init__(self, clocks: Clocks):
        self.clocks = clocks
        self.marks: list[tuple[float, float]] = []

    def request_done(self, done, total):
        if done == total:
            self.marks.append((time.process_time(), self.clocks.seconds["rewrite"]))


def build(folder: Path, targets: int, candidates: int, stages: int = 2, per_stage: int = 3):
    listed = prompts(max(6, stages * per_stage))
    (folder / "prompts.jsonl").write_text("".join(json.dumps({"id": p.id, "category": p.category, "prompt": p.text})
                                                  + "\n" for p in listed))
    grid = Grid("cost", tuple(Cand(f"d{i}", 1.0 + 0.05 * i) for i in range(candidates)), prompt_sd=0.05)
    data = {"name": "cost", "hardware": "sim", "backend": "llamacpp",
            "targets": [{"label": f"t{i}", "path": f"/sim/t{i}.gguf"} for i in range(targets)],
            "drafts": [{"label": c.name, "path": f"/sim/{c.name}.gguf"} for c in grid.candidates],
            "settings": {"max_tokens": 32, "port": 0, "search": "exhaustive", "design": "interleaved", "stages": stages,
                         "prompts_per_stage": per_stage, "prompts": str(folder / "prompts.jsonl"), "warmup": 0}}
    config = validate_config(data, source=str(folder / "cost.json"), base_dir=str(folder))
    names = {(c.candidate.draft.path if c.candidate.draft else None, c.candidate.method): c.candidate.label
             for c in plan(config) if c.candidate}
    rng = random.Random(1)
    truth = draw_truth(grid, len(listed), rng, [p.category for p in listed])
    world = World(grid, Machine(), truth, listed, seed=config.settings.seed, runs=2, warmup=0, expected_s=3600.0,
                  rng=rng)
    return config, SimBackend(world, names)


def tenths(marks: list[tuple[float, float]], start: float, without_rewrites: bool) -> tuple[float, float]:
    """Mean CPU per step over the first and the last tenth of the steps."""
    points = [(start, 0.0), *marks]
    steps = [(b[0] - a[0]) - ((b[1] - a[1]) if without_rewrites else 0.0) for a, b in itertools.pairwise(points)]
    tenth = max(1, len(steps) // 10)
    return sum(steps[:tenth]) / tenth, sum(steps[-tenth:]) / tenth


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--candidates", type=int, default=9)
    p.add_argument("--stages", type=int, default=2, help="planned stages per target (default 2; the tool's is 6)")
    p.add_argument("--per-stage", type=int, default=3, help="prompts per stage (default 3; the tool's is 6)")
    p.add_argument("--profile", action="store_true", help="print the functions with the most time (wall clock: a CPU "
                   "clock would cost a system call per function call)")
    p.add_argument("--top", type=int, default=25, help="how many functions --profile prints (default 25)")
    args = p.parse_args(argv)
    if min(args.rows, args.candidates, args.stages, args.per_stage, args.top) < 1:
        p.error("--rows, --candidates, --stages, --per-stage and --top must each be at least 1")
    targets = max(1, args.rows // (args.candidates + 1))
    folder = Path(tempfile.mkdtemp(prefix="draftbench-cost-"))
    config, backend = build(folder, targets, args.candidates, args.stages, args.per_stage)
    clocks = Clocks()
    clocks.install()
    forecasts = Clocks()          # inside the analysis: what the verdicts left unresolved cost to forecast
    import draftbench.analysis.decision as decision
    decision.forecast = forecasts.wrap("forecast", decision.forecast)
    reporter = Timed(clocks)
    profile = cProfile.Profile() if args.profile else None
    start = time.process_time()
    if profile is not None:
        profile.enable()
    Sweep(config, folder / "r.json", None, reporter=reporter, backend=backend,
          options=RunOptions(clock=backend.world.clock)).run()
    if profile is not None:
        profile.disable()
    total = time.process_time() - start
    rows = targets * (args.candidates + 1)
    size = (folder / "r.json").stat().st_size
    print(f"{rows} rows ({targets} targets x {args.candidates + 1}), {len(reporter.marks)} steps, results file "
          f"{size / 1e6:.1f} MB; CPU {total:.1f} s" + (" (profiled)" if profile is not None else ""))
    for label, without in (("with the file's rewrites", False), ("without them", True)):
        first, last = tenths(reporter.marks, start, without)
        print(f"CPU per step, {label}: first tenth {first * 1000:.2f} ms, last tenth {last * 1000:.2f} ms — "
              f"ratio {last / first:.2f}")
    rewrite = clocks.seconds.pop("rewrite", 0.0)
    analysis = sum(clocks.seconds.values())
    print(f"analysis: {analysis:.2f} s = {analysis / total:.1%} of the sweep's CPU ("
          + ", ".join(f"{name} {s:.2f} s" for name, s in sorted(clocks.seconds.items(), key=lambda kv: -kv[1]))
          + f"); the file's rewrites: {rewrite:.2f} s = {rewrite / total:.1%}")
    forecast = forecasts.seconds["forecast"]
    print(f"of the analysis, the forecasts of what would settle the targets left unresolved (analysis/settle.py "
          f"forecast, at the final analysis): {forecast:.2f} s = {forecast / total:.1%} of the sweep's CPU; the rest "
          f"of the analysis {analysis - forecast:.2f} s = {(analysis - forecast) / total:.1%}")
    if profile is not None:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
