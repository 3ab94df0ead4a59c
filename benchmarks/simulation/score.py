"""What a simulated sweep got right, against the truth it was drawn from."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from draftbench.config.prompts import Prompt
from draftbench.results.kinds import Role
from draftbench.results.speedup import Speedup

from .sweeps import Sweep
from .world import Truth


def within_2pct(pick_truth: float | None, best: float) -> bool:
    """The pick's true speed-up is within 2% of the best candidate's, or nothing was picked where
    nothing beats the target alone by 2% (``benchmarks/adaptive.py`` scores its races the same way)."""
    return (pick_truth is not None and pick_truth >= best / 1.02) or (pick_truth is None and best < 1.02)


def covers(speed: Speedup, truth: float) -> bool:
    assert speed.ci95_low is not None and speed.ci95_high is not None
    return speed.ci95_low <= truth <= speed.ci95_high


@dataclass(frozen=True)
class Score:
    recommended: bool
    false_1: bool               # recommended a candidate whose true speed-up ("prompts like these") ≤ 1.00
    false_floor: bool           # … ≤ 1 + noise floor
    within_2pct: bool           # … of the true best on prompts like these
    within_these: bool          # … of the best on this sweep's prompts (what a sweep of them can know at best)
    these: tuple[bool, ...]     # per row with an interval: it covers the speed-up on the prompts it measured
    like: tuple[bool, ...]      # … the speed-up on prompts like these (the candidate's population value)
    pick_covered: bool | None   # the verdict's interval covers the pick's population value
    requests: int
    loads: int
    wall_s: float


def score(sweep: Sweep, truth: Truth, prompts: tuple[Prompt, ...], noise_floor: float) -> Score:
    entry = (sweep.results.summary or {}).get("targets", [{}])[0]
    pick = entry.get("recommended_draft")
    pick_speed = Speedup.from_value(entry.get("speedup"))
    index = {p.id: i for i, p in enumerate(prompts)}
    these, like = [], []
    for row in sweep.results.results:
        if row.role is not Role.SPECULATIVE or row.draft is None or row.speedup is None or not row.speedup.has_interval:
            continue
        measured = [index[r.prompt_id] for r in row.requests if r.error is None and r.decode_tps]
        these.append(covers(row.speedup, truth.on_prompts(row.draft, measured)))
        like.append(covers(row.speedup, truth.population[row.draft]))
    value = truth.population.get(pick) if pick else None
    on_all = {name: truth.on_prompts(name, list(range(len(prompts)))) for name in truth.population}
    recommended = pick is not None and bool(pick_speed and pick_speed.significant)
    return Score(recommended=recommended, false_1=recommended and value is not None and value <= 1.0,
                 false_floor=recommended and value is not None and value <= 1.0 + noise_floor,
                 within_2pct=within_2pct(value if recommended else None, max(truth.population.values())),
                 within_these=within_2pct(on_all[pick] if recommended and pick else None, max(on_all.values())),
                 these=tuple(these), like=tuple(like),
                 pick_covered=covers(pick_speed, value) if recommended and pick_speed and pick_speed.has_interval
                 and value is not None else None,
                 requests=sweep.requests, loads=sweep.loads, wall_s=sweep.wall_s)


def summary(scores: list[Score]) -> dict:
    """Rates over the trials; coverage pooled over every row with an interval."""
    def rate(values) -> float | None:
        values = [v for v in values if v is not None]
        return sum(values) / len(values) if values else None

    return {"trials": len(scores), "recommends": rate(s.recommended for s in scores),
            "false_1": rate(s.false_1 for s in scores), "false_floor": rate(s.false_floor for s in scores),
            "within_2pct": rate(s.within_2pct for s in scores), "within_these": rate(s.within_these for s in scores),
            "coverage_these": rate(c for s in scores for c in s.these),
            "coverage_like": rate(c for s in scores for c in s.like),
            "coverage_pick": rate(s.pick_covered for s in scores),
            "requests": statistics.fmean(s.requests for s in scores),
            "loads": statistics.fmean(s.loads for s in scores),
            "wall_s": statistics.fmean(s.wall_s for s in scores)}
