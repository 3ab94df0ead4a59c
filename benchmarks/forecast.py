#!/usr/bin/env python3
"""Does the forecast come true? Simulated sweeps that end "unresolved — about N more prompts × S more server
pairs would settle it" are continued by exactly S (``--more S``, through the command line's own sweep) and
counted: how often they then settle (a recommendation, or "nothing gains"), per grid, noise model and
strategy, with the three guarantees on the same sweeps (``simulation/forecast.py``). Per cell it prints:

  sweeps          simulated sweeps (each a fresh truth and machine)
  decided         ended with a recommendation or "nothing gains" before any continuation
  forecasts       ended unresolved (or in a shortlist) naming S more stages; "more than": named none
  half            (in --json) of those naming no S, how many named H ("--more H settles it about half the
                  time") and, continued by exactly H, then decided (half_named, half_settled)
  settled         of those continued by exactly S, how many then decided (the forecast's promise: ≥ 80%)
  beyond          (in --json, with --beyond N) of those naming neither S nor H ("more than …"), the first N of a
                  cell continued by the cap and how many then decided (beyond_named, beyond_settled: < half)
  false, covered, within: the guarantees over every sweep as it finally ended
  blocker         at the last look of the unresolved: the leader's floor, or the margin to a contender;
                  "named floor": the forecast was about the floor while the margin blocked
  curse           the unresolved leader's estimate over its truth (selection inflates it)

    python benchmarks/forecast.py --quick                                   # it runs
    python benchmarks/forecast.py --trials 50 --model harsh --model audit3 --model audit5 --json FILE
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from draftbench.common.reading import CONFIG_LIMIT, UnreadableFile, read_limited
from simulation import audit_world
from simulation.forecast import Trial, forecast_trial
from simulation.grids import HARSH, grids_for, prompts
from simulation.score import summary
from simulation.sweeps import Setup, WorldFactory, machine_world
from simulation.world import draw_truth

GRIDS = ("best10", "clear", "tie", "null")
STRATEGIES = ("exhaustive", "race")
MODELS = {"harsh": "benchmarks/simulation's harsh machine (world.py)",
          "audit3": "issue 43's audit model, 3% sessions (audit_world.py)",
          "audit5": "issue 43's audit model, 5% sessions (audit_world.py)"}


def world_for(model: str, setup: Setup) -> WorldFactory:
    if model == "harsh":
        return machine_world(HARSH.machine, setup)
    return {"audit3": audit_world.session3, "audit5": audit_world.session5}[model]


def run_cell(grid_name: str, model: str, strategy: str, trials: int, seed: int, n_prompts: int, cap: int,
             folder: Path, stages: int = 6, beyond: int = 0) -> list[Trial]:
    grid = grids_for(HARSH)[grid_name][1][0]
    listed = prompts(n_prompts)
    categories = [p.category for p in listed]
    rng = random.Random(f"{seed}:{grid_name}:{model}:{strategy}")
    setup = Setup.of(grid, listed, max_tokens=128, noise_floor=0.02,
                     search="adaptive" if strategy == "race" else "exhaustive", stages=stages, per_stage=6,
                     folder=Path(tempfile.mkdtemp(dir=folder)))
    out = []
    for _ in range(trials):
        truth = draw_truth(grid, len(listed), rng, categories)
        backend = world_for(model, setup)(grid, truth, setup.names, listed, random.Random(rng.getrandbits(64)))
        checked = sum(t.beyond_settled is not None for t in out)
        out.append(forecast_trial(setup, backend, truth, 0.02, cap=cap, folder=folder, beyond=checked < beyond))
    return out


def figures(trials: list[Trial]) -> dict:
    """A cell's counts (see the module's docstring)."""
    named = [t for t in trials if t.forecast is not None]
    continued = [t for t in trials if t.continued]
    unresolved = [t for t in trials if t.first.decision == "unresolved"]
    blocked = [t for t in unresolved if t.blocker]
    curse = [t.leader_estimate / t.leader_truth for t in unresolved if t.leader_estimate and t.leader_truth]
    by_look: dict[int, list] = {}
    for t in trials:
        for look in t.looks:
            by_look.setdefault(look.number, []).append(look)
    final = summary([t.final for t in trials])
    measured = {n: [x.df for x in looks if not x.truncated] for n, looks in by_look.items()}
    return {"sweeps": len(trials), "decided": sum(t.first.decision in ("recommend", "nothing gains") for t in trials),
            "shortlist": sum(t.first.decision == "shortlist" for t in trials), "unresolved": len(unresolved),
            "forecasts": len(named), "more_than": sum(t.more_than for t in trials),
            "over_cap": sum(t.over_cap for t in trials), "continued": len(continued),
            "half_named": sum(t.half_settled is not None for t in trials),
            "half_settled": sum(bool(t.half_settled) for t in trials),
            "beyond_named": sum(t.beyond_settled is not None for t in trials),
            "beyond_settled": sum(bool(t.beyond_settled) for t in trials),
            "settled": sum(bool(t.settled) for t in continued),
            "settled_unresolved": sum(bool(t.settled) for t in continued if t.first.decision == "unresolved"),
            "continued_unresolved": sum(t.first.decision == "unresolved" for t in continued),
            "forecast_stages_median": statistics.median([t.forecast for t in named]) if named else None,
            "recommends": final["recommends"], "false": final["false"], "recommendations": final["recommendations"],
            "covered": final["covered"], "within": final["within"], "covered_by_look": final["covered_by_look"],
            "blocker_floor": sum(t.blocker == "floor" for t in blocked),
            "blocker_margin": sum(t.blocker == "margin" for t in blocked),
            "named_floor_margin_blocked": sum(t.blocker == "margin" and t.forecast_about == "floor" for t in blocked),
            "curse_mean": statistics.fmean(curse) if curse else None,
            "looks": {n: {"df_median": statistics.median(x.df for x in looks),
                          "df_median_measured": statistics.median(measured[n]) if measured[n] else None,
                          "truncated": sum(x.truncated for x in looks),
                          "between_truncated": sum(x.between_truncated for x in looks), "of": len(looks)}
                      for n, looks in sorted(by_look.items())},
            "trials": [{"first": t.first.decision, "final": t.final.decision, "forecast": t.forecast,
                        "about": t.forecast_about, "blocker": t.blocker, "settled": t.settled,
                        "half": t.half, "half_settled": t.half_settled,
                        "leader": [t.leader_estimate, t.leader_truth], "stages": [t.first.stages, t.final.stages],
                        "looks": [[x.number, x.df, x.truncated, x.between_df, x.between_truncated] for x in t.looks]}
                       for t in trials]}


def ratio(k: int, n: int) -> str:
    return f"{k}/{n} ({k / n:.0%})" if n else "—"


def pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.1%}"


HEADER = ("| grid | model | strategy | sweeps | decided | forecasts (more than) | settled as forecast | "
          "… of the unresolved | false | covered | within 2% | blocker: floor / margin (forecast named the floor) "
          "| leader's estimate ÷ truth |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def markdown_line(grid: str, model: str, strategy: str, f: dict) -> str:
    curse = f"{f['curse_mean']:.3f}" if f["curse_mean"] else "—"
    return (f"| {grid} | {model} | {strategy} | {f['sweeps']} | {f['decided']} | {f['forecasts']} ({f['more_than']}) | "
            f"{ratio(f['settled'], f['continued'])} | {ratio(f['settled_unresolved'], f['continued_unresolved'])} | "
            f"{pct(f['false'])} | {pct(f['covered'])} of {f['recommendations']} | {pct(f['within'])} | "
            f"{f['blocker_floor']} / {f['blocker_margin']} ({f['named_floor_margin_blocked']}) | {curse} |")


def markdown_lines(path: str) -> list[str]:
    """The table lines of one earlier ``--json`` file; a file that is not one is one line, not a traceback (read
    bounded, as verdicts.py does: a FIFO or /dev/zero is refused at once)."""
    try:
        return [markdown_line(*key.split("/"), f) for key, f in json.loads(read_limited(path, CONFIG_LIMIT))["cells"].items()]
    except UnreadableFile as exc:
        raise SystemExit(f"--markdown {path}: {exc}") from None
    except (ValueError, KeyError, TypeError, AttributeError, ZeroDivisionError) as exc:
        why = f"has no {exc}" if isinstance(exc, KeyError) else f"({type(exc).__name__}: {exc})"
        raise SystemExit(f"--markdown {path}: not a file benchmarks/forecast.py --json wrote {why}") from None


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=50, help="sweeps per grid, model and strategy (default 50)")
    p.add_argument("--grid", action="append", choices=GRIDS, help=f"repeatable (default: {', '.join(GRIDS)})")
    p.add_argument("--model", action="append", choices=sorted(MODELS), help="repeatable (default: every one): "
                   + "; ".join(f"{k}: {v}" for k, v in MODELS.items()).replace("%", "%%"))   # argparse formats help with %
    p.add_argument("--strategy", action="append", choices=STRATEGIES, help="repeatable (default: both)")
    p.add_argument("--prompts", type=int, default=96, help="the prompt set's size (default 96, the audit's)")
    p.add_argument("--cap", type=int, default=60, help="continue forecasts of at most this many stages (default 60: "
                   "every forecast the verdict makes)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--beyond", type=int, default=0, metavar="N", help="continue the first N sweeps of a cell told "
                   "\"more than …\" (neither S nor H) by the cap, and count how many then decide (default 0)")
    p.add_argument("--quick", action="store_true", help="two sweeps per cell (it runs; far too few to quote)")
    p.add_argument("--json", metavar="FILE", help="also write the figures there")
    p.add_argument("--markdown", nargs="+", metavar="JSON", help="print earlier --json files as Markdown and exit")
    args = p.parse_args(argv)
    if args.markdown:
        lines = [line for path in args.markdown for line in markdown_lines(path)]     # every file checked first
        print("\n".join([HEADER, *lines]))
        return 0
    if args.trials < 1 or args.prompts < 12 or args.cap < 1 or args.beyond < 0:
        p.error("--trials and --cap must be at least 1, --prompts at least 12 and --beyond at least 0")
    if args.json and not Path(args.json).resolve().parent.is_dir():       # found now, not after an hour of sweeps
        p.error(f"--json {args.json}: no folder {Path(args.json).resolve().parent} to write it in")
    trials = 2 if args.quick else args.trials
    cells = {}
    with tempfile.TemporaryDirectory(prefix="draftbench-forecast-") as temp:
        folder = Path(temp)
        for grid in args.grid or GRIDS:
            for model in args.model or sorted(MODELS):
                for strategy in args.strategy or STRATEGIES:
                    start = time.perf_counter()
                    f = figures(run_cell(grid, model, strategy, trials, args.seed, args.prompts, args.cap, folder,
                                         beyond=args.beyond))
                    cells[f"{grid}/{model}/{strategy}"] = f
                    print(markdown_line(grid, model, strategy, f) + f"  ({time.perf_counter() - start:.0f} s)",
                          flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"trials": trials, "seed": args.seed, "prompts": args.prompts,
                                               "cap": args.cap, "cells": cells}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
