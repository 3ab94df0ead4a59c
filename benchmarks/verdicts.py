#!/usr/bin/env python3
"""How often is the verdict wrong? A Monte Carlo of whole sweeps on grids with known truth.

Each trial draws the truth of one sweep (per-prompt effects around each candidate's true speed-up)
and runs it twice on the same simulated machine: an exhaustive sweep and an adaptive race. The
requests go through the sweep's own code (``benchmarks/simulation/sweeps.py``: plan, runner, request
records, ``analyze``/``recommend``, ``AdaptiveSearch`` and ``racing.judge``), in the order the sweep's
own schedule gives (``draftbench/sweep/schedule.py``, ``--design``: interleaved by default, as on a
CPU); only the servers and the clock are simulated (``benchmarks/simulation/world.py``). Per
scenario and strategy it prints:

  recommends     share of sweeps whose verdict recommends a candidate
  false ≤1.00    … one whose true speed-up on prompts like these is at most 1.00
  false ≤floor   … at most 1 + noise floor (1.02)
  within 2%      the pick is within 2% of the true best (or nothing is picked and nothing beats 1.02)
    (these)      … judged by the speed-ups on the sweep's own prompts (the best a sweep of them can know)
  cover          share of the rows' 95% intervals that contain the speed-up on the prompts each row
                 measured ("on these prompts": what the README's geometric-mean ratio estimates)
    (like)       … that contain the candidate's speed-up on prompts like these (its population value)
    (pick)       … of the verdict's own interval, around the pick's population value
  requests, loads, wall: measured requests, server loads and simulated wall time per sweep

    python benchmarks/verdicts.py --quick                 # every scenario, a few trials: seconds
    python benchmarks/verdicts.py --trials 200            # the published figures (docs/statistics.md)
    python benchmarks/verdicts.py --scenario null-session-2 --scenario useless-22
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from simulation.grids import Scenario, prompts, scenarios
from simulation.score import score, summary
from simulation.sweeps import Setup, exhaustive, race
from simulation.world import draw_truth

STRATEGIES = ("exhaustive", "race")
QUICK_TRIALS = 2


DESIGNS = ("interleaved", "bracketed", "sequential")


def run_scenario(scenario: Scenario, trials: int, seed: int, design: str = "interleaved") -> dict[str, dict]:
    """Both strategies on the same drawn truths; each gets its own noise (its own sweep of the machine)."""
    rng = random.Random(f"{seed}:{scenario.name}")
    listed = prompts(scenario.n_prompts)
    setups: dict[tuple[int, str], Setup] = {}
    scores: dict[str, list] = {s: [] for s in STRATEGIES}
    for trial in range(trials):
        g = trial % len(scenario.grids)
        grid = scenario.grids[g]
        truth = draw_truth(grid, len(listed), rng)
        for strategy in STRATEGIES:
            setup = setups.get((g, strategy))
            if setup is None:
                setup = setups[(g, strategy)] = Setup.of(
                    grid, listed, runs=scenario.runs, max_tokens=scenario.max_tokens,
                    noise_floor=scenario.noise_floor, search="adaptive" if strategy == "race" else "exhaustive",
                    design=design)
            world = setup.world(grid, scenario.machine, truth, random.Random(rng.getrandbits(64)))
            sweep = race(setup, world) if strategy == "race" else exhaustive(setup, world)
            scores[strategy].append(score(sweep, truth, setup.prompts, scenario.noise_floor))
    return {s: summary(v) for s, v in scores.items()}


def pct(x: float | None) -> str:
    return "    —" if x is None else f"{x:6.1%}"


HEADER = (f"{'scenario':<24} {'strategy':<10} {'recommends':>10} {'false ≤1.00':>11} {'false ≤floor':>12} "
          f"{'within 2%':>9} {'(these)':>7} {'cover':>6} {'(like)':>6} {'(pick)':>6} {'requests':>8} {'loads':>6} "
          f"{'wall':>7}")


def line(name: str, strategy: str, s: dict) -> str:
    return (f"{name:<24} {strategy:<10} {pct(s['recommends']):>10} {pct(s['false_1']):>11} {pct(s['false_floor']):>12} "
            f"{pct(s['within_2pct']):>9} {pct(s['within_these']):>7} {pct(s['coverage_these']):>6} "
            f"{pct(s['coverage_like']):>6} {pct(s['coverage_pick']):>6} {s['requests']:8.0f} {s['loads']:6.1f} "
            f"{s['wall_s'] / 60:6.1f}m")


def main(argv: list[str]) -> int:
    known = {s.name: s for s in scenarios()}
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=100, help="sweeps per scenario and strategy (default 100)")
    p.add_argument("--scenario", action="append", choices=sorted(known), metavar="NAME",
                   help=f"run only this scenario (repeatable): {', '.join(known)}")
    p.add_argument("--quick", action="store_true", help=f"{QUICK_TRIALS} trials per scenario: seconds, not minutes "
                   "(checks that everything runs; the rates are far too coarse to quote)")
    p.add_argument("--design", choices=DESIGNS, default="interleaved",
                   help="the sweeps' measurement design (sweep/schedule.py; default: interleaved, a CPU's)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", metavar="FILE", help="also write the figures there")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = p.parse_args(argv)
    if args.list:
        for s in known.values():
            print(f"{s.name:<24} {s.about} ({s.n_prompts} prompts × {s.runs} runs, {s.max_tokens} tokens)")
        return 0
    if args.trials < 1:
        p.error("--trials must be at least 1")
    trials = QUICK_TRIALS if args.quick else args.trials
    chosen = [known[n] for n in args.scenario] if args.scenario else list(known.values())
    print(f"{trials} trials per scenario, seed {args.seed}, design {args.design}")
    print(HEADER)
    out = {}
    for scenario in chosen:
        start = time.perf_counter()
        out[scenario.name] = figures = run_scenario(scenario, trials, args.seed, args.design)
        for strategy in STRATEGIES:
            print(line(scenario.name, strategy, figures[strategy]), flush=True)
        print(f"{'':<24} ({scenario.about}; {time.perf_counter() - start:.0f} s)", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"trials": trials, "seed": args.seed, "design": args.design,
                                               "scenarios": out}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
