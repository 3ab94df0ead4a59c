#!/usr/bin/env python3
"""Does the verdict keep its three promises? A Monte Carlo of whole sweeps on grids with known truth.

Each trial draws the truth of one sweep (per-prompt effects around each candidate's true gain) and runs it
twice on the same simulated machine, exhaustively and as a race, through the sweep's own entry point
(``draftbench.sweep.run.run_sweep``: the plan, the stages, the looks, the verdict; only the servers and the
clock are simulated: ``benchmarks/simulation``). Per scenario and strategy it prints:

  recommends      share of sweeps that recommend a candidate
  (1) false       share of sweeps that recommend one whose true gain is at most the noise floor (≤ 5% promised)
  (2) covered     given a recommendation: the quoted interval covers the pick's true gain (≥ 95% promised);
      naive       … the pick's own 95% interval, not corrected for choosing among many and stopping early
  (3) within 2%   given a recommendation: the pick is within 2% of the true best (≥ 95% promised)
  nothing / shortlist / unresolved: the other outcomes (a shortlist: every candidate left gains, which is
                  fastest is not settled — its share holding the true best, and its leader within 2%)
  requests, loads: per sweep, and as a multiple of the exhaustive sweep before issue 32; wall: simulated
  rows÷truth      the candidate rows' estimates over their truth, geometric mean over every row (centred: 1.000)

    python benchmarks/verdicts.py --quick                       # every scenario, two trials: it runs
    python benchmarks/verdicts.py --trials 200                  # the published figures (docs/statistics.md)
    python benchmarks/verdicts.py --scenario best10/harsh --world mymodel:factory
    python benchmarks/verdicts.py --scenario best10/harsh --world simulation.audit_world:session3 --prompts 96
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from draftbench.backends.base import Backend
from draftbench.common.reading import CONFIG_LIMIT, UnreadableFile, read_limited
from simulation.grids import Scenario, prompts, scenarios
from simulation.score import score, summary
from simulation.sweeps import Setup, WorldFactory, machine_world, sweep
from simulation.world import draw_truth

STRATEGIES = ("exhaustive", "race")
QUICK_TRIALS = 2
DESIGNS = ("interleaved", "bracketed", "sequential")


def run_scenario(scenario: Scenario, trials: int, seed: int, design: str = "interleaved",
                 world: WorldFactory | None = None, stages: int | None = None) -> dict[str, dict]:
    """Both strategies on the same drawn truths; each gets its own noise (its own sweep of the machine)."""
    rng = random.Random(f"{seed}:{scenario.name}")
    listed = prompts(scenario.n_prompts)
    categories = [p.category for p in listed]
    setups: dict[tuple[int, str], Setup] = {}
    scores: dict[str, list] = {s: [] for s in STRATEGIES}
    for trial in range(trials):
        g = trial % len(scenario.grids)
        grid = scenario.grids[g]
        truth = draw_truth(grid, len(listed), rng, categories)
        for strategy in STRATEGIES:
            setup = setups.get((g, strategy))
            if setup is None:
                setup = setups[(g, strategy)] = Setup.of(
                    grid, listed, max_tokens=scenario.max_tokens, noise_floor=scenario.noise_floor,
                    search="adaptive" if strategy == "race" else "exhaustive", design=design,
                    stages=stages or scenario.stages, per_stage=scenario.per_stage,
                    temperature=scenario.temperature)
            factory = world or machine_world(scenario.machine, setup)
            backend = factory(grid, truth, setup.names, listed, random.Random(rng.getrandbits(64)))
            scores[strategy].append(score(sweep(setup, backend), truth, scenario.noise_floor))
    return {s: {**summary(v), "today_requests": scenario.today_cost[0], "today_loads": scenario.today_cost[1]}
            for s, v in scores.items()}


def pct(x: float | None) -> str:
    return "     —" if x is None else f"{x:6.1%}"


HEADER = (f"{'scenario':<22} {'strategy':<10} {'recommends':>10} {'(1)false':>8} {'(2)cover':>8} {'naive':>6} "
          f"{'(3)2%':>6} {'nothing':>7} {'short':>6} {'best in':>7} {'lead2%':>6} {'unres.':>6} {'requests':>14} "
          f"{'loads':>12} {'wall':>7} {'rows÷truth':>10}")


def line(name: str, strategy: str, s: dict) -> str:
    return (f"{name:<22} {strategy:<10} {pct(s['recommends']):>10} {pct(s['false']):>8} {pct(s['covered']):>8} "
            f"{pct(s['covered_naive']):>6} {pct(s['within']):>6} {pct(s['nothing']):>7} {pct(s['shortlist']):>6} "
            f"{pct(s['shortlist_best']):>7} {pct(s['leader_within']):>6} {pct(s['unresolved']):>6} "
            f"{s['requests']:6.0f} ({s['requests'] / s['today_requests']:4.2f}×) "
            f"{s['loads']:5.1f} ({s['loads'] / s['today_loads']:4.2f}×) {s['wall_s'] / 60:6.1f}m "
            f"{s['rows_centre'] or 0:10.4f}")


MARKDOWN_HEADER = ("| scenario | strategy | recommends | (1) false | (2) covered (naive) | (3) within 2% | nothing gains "
                   "| shortlist (holds the best; leader within 2%) | unresolved | requests (× before) | loads (× before) "
                   "| wall |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def markdown_line(name: str, strategy: str, s: dict) -> str:
    """One row of the published table (docs/statistics.md)."""
    def p(x):
        return "—" if x is None else f"{x:.1%}"
    recs = s.get("recommendations", 0)
    covered = f"{p(s['covered'])} ({p(s['covered_naive'])})" + (f" of {recs}" if recs else "")
    shortlist = p(s["shortlist"]) + (f" ({p(s['shortlist_best'])}; {p(s['leader_within'])})" if s["shortlist"] else "")
    return (f"| {name} | {strategy} | {p(s['recommends'])} | {p(s['false'])} | {covered} | {p(s['within'])} | "
            f"{p(s['nothing'])} | {shortlist} | {p(s['unresolved'])} | {s['requests']:.0f} "
            f"({s['requests'] / s['today_requests']:.2f}×) | {s['loads']:.1f} ({s['loads'] / s['today_loads']:.2f}×) | "
            f"{s['wall_s'] / 60:.1f} min |")


def load_world(spec: str) -> WorldFactory:
    """``MODULE:FACTORY`` — a factory(grid, truth, names, prompts, rng) returning a backend (see sweeps.py). Every
    way it can be wrong is one line: a module or name that is not there, a name that is no factory, a factory that
    fails or returns something else than a draftbench ``Backend``."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise SystemExit(f"--world {spec}: write MODULE:FACTORY, e.g. mynoise:world")
    try:
        found = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise SystemExit(f"--world {spec}: cannot import {module} ({exc}); put it on PYTHONPATH") from None
    except AttributeError:
        raise SystemExit(f"--world {spec}: module {module} has no {name}") from None
    except Exception as exc:      # the module itself raised while it was imported
        raise SystemExit(f"--world {spec}: importing {module} raised {type(exc).__name__}: {exc}") from None
    if not callable(found) or (isinstance(found, type) and issubclass(found, Backend)):
        raise SystemExit(f"--world {spec}: {name} is a {type(found).__name__}, not a factory(grid, truth, names, "
                         "prompts, rng) returning a backend")

    def factory(*args) -> Backend:
        try:
            backend = found(*args)
        except Exception as exc:
            raise SystemExit(f"--world {spec}: {name}(grid, truth, names, prompts, rng) raised "
                             f"{type(exc).__name__}: {exc}") from None
        if not isinstance(backend, Backend):
            raise SystemExit(f"--world {spec}: {name}(grid, truth, names, prompts, rng) returned "
                             f"{type(backend).__name__}, not a draftbench Backend (see benchmarks/simulation/sweeps.py)")
        return backend
    return factory


def markdown_rows(path: str) -> list[str]:
    """The table rows of one earlier ``--json`` file; a file that is not one is one line (read bounded: a FIFO or
    /dev/zero is refused at once)."""
    try:
        data = json.loads(read_limited(path, CONFIG_LIMIT))
        return [markdown_line(name, strategy, figures) for name, by_strategy in data["scenarios"].items()
                for strategy, figures in by_strategy.items()]
    except UnreadableFile as exc:
        raise SystemExit(f"--markdown {path}: {exc}") from None
    except (ValueError, KeyError, TypeError, AttributeError, ZeroDivisionError) as exc:
        why = f"has no {exc}" if isinstance(exc, KeyError) else f"({type(exc).__name__}: {exc})"
        raise SystemExit(f"--markdown {path}: not a file benchmarks/verdicts.py --json wrote {why}") from None


def main(argv: list[str]) -> int:
    known = {s.name: s for s in scenarios()}
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=100, help="sweeps per scenario and strategy (default 100)")
    p.add_argument("--scenario", action="append", choices=sorted(known), metavar="NAME",
                   help=f"run only this scenario (repeatable): {', '.join(known)}")
    p.add_argument("--quick", action="store_true", help=f"{QUICK_TRIALS} trials per scenario (it runs; the rates "
                   "are far too coarse to quote)")
    p.add_argument("--design", choices=DESIGNS, default="interleaved", help="the sweeps' design (default: a CPU's)")
    p.add_argument("--stages", type=int, help="planned stages per target (default: the scenario's, 6)")
    p.add_argument("--prompts", type=int, help="the prompt set's size (default: the scenario's, 48; issue 43's "
                   "audit: 96)")
    p.add_argument("--per-stage", type=int, help="prompts per stage (default: the scenario's, 6)")
    p.add_argument("--world", metavar="MODULE:FACTORY", help="an outside noise model written against the backend "
                   "contract, in place of the scenario's machine")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", metavar="FILE", help="also write the figures there")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument("--markdown", nargs="+", metavar="JSON", help="print the table of earlier --json files in "
                   "Markdown (docs/statistics.md) and exit")
    args = p.parse_args(argv)
    if args.markdown:
        rows = [row for path in args.markdown for row in markdown_rows(path)]     # every file checked first
        print("\n".join([MARKDOWN_HEADER, *rows]))
        return 0
    if args.list:
        for s in known.values():
            print(f"{s.name:<22} {s.about}")
        return 0
    if args.trials < 1:
        p.error("--trials must be at least 1")
    if args.prompts is not None and args.prompts < 2:
        p.error("--prompts must be at least 2")
    trials = QUICK_TRIALS if args.quick else args.trials
    world = load_world(args.world) if args.world else None
    chosen = [known[n] for n in args.scenario] if args.scenario else list(known.values())
    if args.prompts:
        chosen = [replace(s, n_prompts=args.prompts) for s in chosen]
    if args.per_stage:
        chosen = [replace(s, per_stage=args.per_stage) for s in chosen]
    print(f"{trials} trials per scenario, seed {args.seed}, design {args.design}"
          + (f", world {args.world}" if args.world else ""))
    print(HEADER)
    out = {}
    for scenario in chosen:
        start = time.perf_counter()
        out[scenario.name] = figures = run_scenario(scenario, trials, args.seed, args.design, world, args.stages)
        for strategy in STRATEGIES:
            print(line(scenario.name, strategy, figures[strategy]), flush=True)
        print(f"{'':<22} ({time.perf_counter() - start:.0f} s)", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"trials": trials, "seed": args.seed, "design": args.design,
                                               "world": args.world, "scenarios": out}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
