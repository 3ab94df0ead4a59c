#!/usr/bin/env python3
"""How well does the adaptive search do against an exhaustive sweep?

Replay (default): from recorded results it draws many synthetic races and reports, against an
exhaustive sweep of the same synthetic data, how often the race picks the same winner, how often
it picks a candidate within 2% of the true best, and the fraction of request time it spends.

    python benchmarks/adaptive.py                      # the two upstream reference grids
    python benchmarks/adaptive.py results/a.json ...   # our own sweeps (they keep per-request data)
    python benchmarks/adaptive.py --live               # forged models: exhaustive vs adaptive, side by side

Noise model. Our own files keep every request: a synthetic request of (candidate, prompt)
resamples that pair's recorded repetitions, times log-normal run noise (``--run-noise``). The
upstream reference files keep only each row's mean tok/s, so each race draws, per prompt, a
difficulty shared by the baseline (``--prompt-noise``), a speculation effect shared by every
candidate (``--shared-noise``: code drafts better than prose, for every draft), a candidate's own
effect (``--own-noise``), and run noise per request. The race uses the same rule functions as the
sweep (``draftbench.analysis.racing``) and the same passes as ``draftbench/sweep/race.py``: block k
(repetition k, on a session of its own) for every candidate still in the race, a look after every
pass. The whole sweep through the sweep's own code, with session effects and drift, is
``benchmarks/verdicts.py``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from draftbench.analysis.decision import selected
from draftbench.analysis.pairing import Pair
from draftbench.analysis.racing import RaceRules, Standing, judge
from draftbench.analysis.replication import Unit
from draftbench.analysis.stats import speedup_of_units
from draftbench.config.settings import DEFAULTS
from draftbench.results.file import Row, load_results
from draftbench.results.kinds import Role, Status
from simulation.grids import REFERENCE as REFERENCE_FILES
from simulation.grids import reference_targets
from simulation.score import within_2pct

REFERENCE = list(REFERENCE_FILES.values())
CATEGORIES = ("code", "json", "list", "prose", "chat", "summarisation")   # the built-in prompt set


@dataclass
class Grid:
    """One target's race: tok/s per (prompt, run) are drawn by ``draw``."""

    name: str
    candidates: list[str]
    prompts: list[str]
    # (rng, runs) -> ({"": baseline, candidate: {(prompt, run): tok/s}}, {candidate: its true speed-up})
    draw: Callable[[random.Random, int], tuple[dict, dict]]


def reference_grids(path: Path, args) -> list[Grid]:
    grids = []
    for target in reference_targets(path):
        base, cands = target.base_tps, {draft: tps for draft, (tps, _) in target.drafts.items()}

        def draw(rng, runs, base=base, cands=cands):
            difficulty = {p: rng.gauss(0, args.prompt_noise) for p in CATEGORIES}
            shared = {p: rng.gauss(0, args.shared_noise) for p in CATEGORIES}
            own = {(c, p): rng.gauss(0, args.own_noise) for c in cands for p in CATEGORIES}
            out = {"": {(p, r): base * math.exp(difficulty[p] + rng.gauss(0, args.run_noise))
                        for p in CATEGORIES for r in range(runs)}}
            for c, tps in cands.items():
                out[c] = {(p, r): tps * math.exp(difficulty[p] + shared[p] + own[(c, p)] + rng.gauss(0, args.run_noise))
                          for p in CATEGORIES for r in range(runs)}
            truth = {c: tps / base * math.exp(statistics.fmean(shared[p] + own[(c, p)] for p in CATEGORIES))
                     for c, tps in cands.items()}
            return out, truth

        grids.append(Grid(f"{path.name}: {target.name}", list(cands), list(CATEGORIES), draw))
    return grids


def recorded_grids(path: Path, args) -> list[Grid]:
    results = load_results(path)
    grids = []
    for target in dict.fromkeys(r.target for r in results.results):
        rows = [r for r in results.results if r.target == target and r.measured and r.requests
                and r.role in (Role.BASELINE, Role.SPECULATIVE)]
        base_row = next((r for r in rows if r.role is Role.BASELINE), None)
        cands = {r.draft + (f" (k={r.draft_max})" if r.draft_max else ""): r for r in rows if r.role is Role.SPECULATIVE}
        if base_row is None or len(cands) < 2:
            continue
        prompts = list(dict.fromkeys(q.prompt_id for q in base_row.requests))

        def per_prompt(row):
            out: dict[str, list[float]] = {}
            for q in row.requests:
                if q.decode_tps:
                    out.setdefault(q.prompt_id, []).append(q.decode_tps)
            return out

        table = {"": per_prompt(base_row), **{c: per_prompt(r) for c, r in cands.items()}}

        def draw(rng, runs, table=table, prompts=prompts):
            out = {label: {(p, r): rng.choice(samples[p]) * math.exp(rng.gauss(0, args.run_noise))
                           for p in prompts if p in samples for r in range(runs)} for label, samples in table.items()}
            base = table[""]
            truth = {c: math.exp(statistics.fmean(math.log(statistics.fmean(s[p]) / statistics.fmean(base[p]))
                                                  for p in prompts if p in s and p in base))
                     for c, s in table.items() if c}
            return out, truth

        grids.append(Grid(f"{path.name}: {target}", list(cands), prompts, draw))
    return grids


def pairs_of(data: dict, candidate: str, prompts: list[str], blocks: int | range) -> list[Pair]:
    """The candidate's paired log ratios over its first ``blocks`` blocks (block = repetition, a session each)."""
    base = data[""]
    runs = range(blocks) if isinstance(blocks, int) else blocks
    return [Pair(p, p, r, f"{candidate}#{r}", math.log(data[candidate][(p, r)] / base[(p, r)]), None, None, r)
            for r in runs for p in prompts if (p, r) in data[candidate] and (p, r) in base]


def speed_of(data: dict, candidate: str, prompts: list[str], runs: range, noise_floor: float):
    return speedup_of_units([Unit(p.prompt_id, p.log_ratio, p.session) for p in pairs_of(data, candidate, prompts, runs)
                             ], noise_floor=noise_floor)


def confirmed(data: dict, candidate: str | None, prompts: list[str], runs: int, noise_floor: float) -> str | None:
    """analysis/decision.py: the selected candidate measured once more (the drawn repetition ``runs``, never
    used to select it); recommended when that block alone clears 1 + floor."""
    if candidate is None:
        return None
    speed = speed_of(data, candidate, prompts, range(runs, runs + 1), noise_floor)
    return candidate if speed and speed.significant and speed.ratio > 1 else None


def best_of(grid: Grid, data: dict, runs: int, noise_floor: float) -> str | None:
    """The candidate an exhaustive sweep recommends: the best estimate above 1 + floor, confirmed."""
    rows = [Row(target="t", draft=c, role="speculative", speculation_active=True,
                speedup=speed_of(data, c, grid.prompts, range(runs), noise_floor)) for c in grid.candidates]
    pick = selected(rows, noise_floor)
    return confirmed(data, pick.draft if pick else None, grid.prompts, runs, noise_floor)


@dataclass(frozen=True)
class Outcome:
    pick: str | None
    measured: dict[str, int]         # requests per candidate
    eliminated: frozenset[str]
    loads: int
    request_time: float              # Σ 1 / tok/s (time per token) over the requests measured


def race(grid: Grid, data: dict, runs: int, rules_for: Callable[[int, int], RaceRules]) -> Outcome:
    """The passes of sweep/race.py on drawn data: block k (repetition k, a session) for every candidate
    still in the race, a look after every pass, decided by racing.judge; once decided, the leader is
    confirmed on the drawn repetition ``runs`` (as the sweep measures a fresh block)."""
    rules = rules_for(len(grid.candidates), runs)
    blocks = {c: 0 for c in grid.candidates}
    out: set[str] = set()
    look = None
    for k in range(runs):
        if look is None:
            names = [c for c in grid.candidates]
        else:
            names = [c for c, s in look.standing.items() if s is Standing.OPEN]
            if look.leader is not None and look.winner is None:
                names.append(look.leader)
        names = [c for c in grid.candidates if c in names and c not in out]
        if not names:
            break
        for c in names:
            blocks[c] = k + 1
        look = judge({c: pairs_of(data, c, grid.prompts, blocks[c]) for c in grid.candidates
                      if c not in out and blocks[c]}, rules, k + 1)
        out.update(look.eliminated)
        if look.decided:
            break
    measured = {c: blocks[c] * len(grid.prompts) for c in grid.candidates}
    spent = sum(1 / data[c][(p, r)] + 1 / data[""][(p, r)] for c in grid.candidates for r in range(blocks[c])
                for p in grid.prompts)
    leader = look.leader if look is not None and look.decided else None
    lead = speed_of(data, leader, grid.prompts, range(blocks[leader]), rules.noise_floor) if leader else None
    chosen = leader if lead is not None and lead.ratio > 1 + rules.noise_floor else None
    loads = 2 * sum(blocks.values()) + (2 if chosen else 0)
    if chosen:
        spent += sum(1 / data[chosen][(p, runs)] + 1 / data[""][(p, runs)] for p in grid.prompts)
    return Outcome(confirmed(data, chosen, grid.prompts, runs, rules.noise_floor), measured, frozenset(out), loads,
                   spent)


def simulate(grids: list[Grid], args) -> dict:
    rng = random.Random(args.seed)
    same = within = exhaustive_within = races = 0
    fractions, load_ratios = [], []
    for grid in grids:
        for _ in range(args.races):
            data, truth = grid.draw(rng, args.runs + 1)      # one repetition more: the confirmation block
            full = best_of(grid, data, args.runs, args.noise_floor)
            outcome = race(grid, data, args.runs, lambda n, looks: RaceRules(
                n, looks, args.noise_floor, futility=not args.no_futility))
            pick, spent = outcome.pick, outcome.request_time
            exhaustive_time = sum(1 / data[c][(p, r)] + 1 / data[""][(p, r)] for c in grid.candidates
                                  for r in range(args.runs) for p in grid.prompts)
            best = max(truth.values())
            races += 1
            same += pick == full
            within += within_2pct(truth[pick] if pick else None, best)
            exhaustive_within += within_2pct(truth[full] if full else None, best)
            fractions.append(spent / exhaustive_time)
            load_ratios.append(outcome.loads / (2 * args.runs * len(grid.candidates)))
    return {"races": races, "same_winner": same / races, "within_2pct": within / races,
            "exhaustive_within_2pct": exhaustive_within / races, "time_fraction": statistics.fmean(fractions),
            "loads_per_candidate": statistics.fmean(load_ratios)}


def live(args) -> int:
    """Exhaustive vs adaptive on the forged family: 7 candidates (two good drafts and the bad one at
    k = 2 and 6, and the ngram-mod method), the same config, one after the other."""
    import tempfile
    import time

    from draftbench.sweep import Sweep
    from draftbench.sweep.config_file import load_config
    from draftbench.sweep.console import Reporter

    from forge import ensure_family

    class Dots(Reporter):
        def combination_started(self, index, total, title, at_most=False):
            print(f"    [{index}/{total}] {title}", flush=True)

    models = {k: str(v) for k, v in ensure_family(which="all", quiet=True).items()}
    config = {"name": "live", "hardware": "this-machine", "backend": "llamacpp",
              "targets": [{"label": "241M Q4_1", "path": models["target-2x"]}],
              "drafts": [{"label": "135M Q4_1", "path": models["base"]}, {"label": "135M Q8_0", "path": models["draft-q8"]},
                         {"label": "57M trunc8", "path": models["draft-trunc"]}],
              "candidates": [{"label": "ngram-mod", "method": "ngram-mod"}],
              "settings": {"runs": args.runs, "max_tokens": args.max_tokens, "gpu_layers": 0, "ctx_size": 1024, "port": 0,
                           "prompts": ["code", "json", "list"], "draft_max": [2, 6]}}
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for search in (("adaptive", "exhaustive") if args.adaptive_first else ("exhaustive", "adaptive")):
            path = Path(tmp) / f"{search}.json"
            path.write_text(json.dumps(dict(config, settings=dict(config["settings"], search=search))))
            print(f"  {search} sweep:", flush=True)
            start = time.perf_counter()
            Sweep(load_config(path), Path(tmp) / f"{search}-results.json", None, reporter=Dots()).run()
            wall = time.perf_counter() - start
            results = load_results(Path(tmp) / f"{search}-results.json")
            entry = (results.summary or {}).get("targets", [{}])[0]
            pick = entry.get("recommended_draft")
            out[search] = (wall, pick, entry.get("draft_max"), results)
            base = next((r for r in results.results if r.role is Role.BASELINE), None)
            print(f"  {search}: {wall:.0f} s, winner {pick} (k={entry.get('draft_max')}), "
                  f"{sum(len(r.requests) for r in results.results)} requests, "
                  f"{results.summary.get('server_loads')} server loads; its baseline (the machine's speed "
                  f"then): {base.mean_tps if base else None} tok/s over {base.wall_time if base else None} s", flush=True)
            if args.keep:
                Path(args.keep).mkdir(parents=True, exist_ok=True)
                (Path(args.keep) / f"{search}-results.json").write_bytes((Path(tmp) / f"{search}-results.json").read_bytes())
    (ex_wall, ex_pick, ex_k, _), (ad_wall, ad_pick, ad_k, raced) = out["exhaustive"], out["adaptive"]
    eliminated = [r.draft + (f" (k={r.draft_max})" if r.draft_max else "") for r in raced.results
                  if r.status is Status.ELIMINATED]
    requests = sum(len(r.requests) for r in raced.results) / max(1, sum(len(r.requests) for r in out["exhaustive"][3].results))
    print(f"same winner: {'yes' if (ex_pick, ex_k) == (ad_pick, ad_k) else 'NO'}; adaptive wall time "
          f"{ad_wall / ex_wall:.0%} of exhaustive (target ≤ 40%), requests {requests:.0%}; "
          f"eliminated: {', '.join(eliminated) or 'none'}")
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="*", help="our own results files (default: the upstream reference grids)")
    p.add_argument("--races", type=int, default=200, help="synthetic races per target (default 200)")
    p.add_argument("--runs", type=int, default=3, help="runs of the prompt set per candidate (default 3)")
    p.add_argument("--max-tokens", type=int, default=128, help="--live: tokens per request (default 128)")
    p.add_argument("--keep", metavar="FOLDER", help="--live: keep both results files there")
    p.add_argument("--adaptive-first", action="store_true",
                   help="--live: run the adaptive sweep first (to see whether the order favours either)")
    p.add_argument("--noise-floor", type=float, default=DEFAULTS.noise_floor)
    p.add_argument("--run-noise", type=float, default=0.03, help="sd of log tok/s between repetitions (default 0.03)")
    p.add_argument("--prompt-noise", type=float, default=0.10, help="sd of a prompt's log tok/s (default 0.10)")
    p.add_argument("--shared-noise", type=float, default=0.10,
                   help="sd of a prompt's log speed-up, shared by all candidates (default 0.10)")
    p.add_argument("--own-noise", type=float, default=0.03,
                   help="sd of a prompt's log speed-up, per candidate (default 0.03)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-futility", action="store_true",
                   help="ablation: measure a contender until resolved, even when its planned requests cannot resolve it")
    p.add_argument("--live", action="store_true", help="instead: an exhaustive and an adaptive sweep of the same "
                   "forged-model config, side by side (real llama-server; minutes)")
    args = p.parse_args(argv)
    if args.live:
        return live(args)
    sources = [Path(f) for f in args.results] or REFERENCE
    for source in sources:
        grids = recorded_grids(source, args) if args.results else reference_grids(source, args)
        if not grids:
            print(f"{source}: no target with a baseline and two candidates", file=sys.stderr)
            continue
        out = simulate(grids, args)
        print(f"{source.name}: {len(grids)} target(s), {out['races']} races, runs {args.runs}")
        print(f"  same winner as exhaustive      {out['same_winner']:6.1%}")
        print(f"  within 2% of the true best     {out['within_2pct']:6.1%}   (exhaustive itself: "
              f"{out['exhaustive_within_2pct']:.1%})")
        print(f"  request time vs exhaustive     {out['time_fraction']:6.1%}")
        print(f"  server loads vs exhaustive     {out['loads_per_candidate']:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
