"""What a simulated sweep got right, against the truth it was drawn from: the three guarantees.

(1) a recommendation whose true gain on prompts like these is at most 1 + floor (a *false* one);
(2) given a recommendation, whether the quoted interval covers the pick's true gain — and whether the
    pick's own 95% interval (not corrected for choosing and stopping) would have;
(3) given a recommendation, whether the pick is within 2% of the true best.
Plus the other outcomes (nothing gains, a shortlist, unresolved) and what the sweep cost.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from draftbench.analysis.decision import Outcome

from .sweeps import Sweep
from .world import Truth


def within_2pct(pick_truth: float, best: float) -> bool:
    return pick_truth >= best / 1.02


@dataclass(frozen=True)
class Score:
    decision: str                     # recommend, nothing gains, shortlist, unresolved
    false: bool                       # (1) recommended a candidate that gains at most the floor
    covered: bool | None              # (2) the quoted interval covers the pick's true gain
    covered_naive: bool | None        #     … the pick's own 95% interval (not corrected)
    within: bool | None               # (3) the pick is within 2% of the true best
    width: float | None               # the quoted interval's high / low
    shortlist_best: bool | None       # a shortlist holds the true best
    shortlist_false: bool | None      # … holds a candidate that gains at most the floor
    leader_within: bool | None        # … its leader is within 2% of the true best
    false_nothing: bool               # "nothing gains" while the true best gains more than the floor
    stages: int                       # stages measured: where it decided (the power curve), or all it was given
    requests: int
    loads: int
    wall_s: float
    row_error: float | None = None    # the mean over its candidate rows of log(estimate / truth): are rows centred?


def score(sweep: Sweep, truth: Truth, noise_floor: float) -> Score:
    v = sweep.verdict
    best = max(truth.population.values())
    floor = 1.0 + noise_floor
    decision = v.verdict.value if v is not None else Outcome.UNRESOLVED.value
    pick = v.pick if v is not None and v.verdict is Outcome.RECOMMEND else None
    value = truth.population.get(_label(pick)) if pick else None
    covered = naive = within = width = None
    if pick and value is not None and v is not None and v.quote is not None:
        covered = v.quote.low <= value <= v.quote.high
        width = v.quote.high / v.quote.low if v.quote.low > 0 else None
        within = within_2pct(value, best)
        row = next((r for r in sweep.results.results if r.draft == _label(pick)), None)
        if row is not None and row.speedup is not None and row.speedup.has_interval:
            naive = (row.speedup.ci95_low or 0) <= value <= (row.speedup.ci95_high or 0)
    shortlist = [truth.population[_label(n)] for n in (v.shortlist if v is not None else ())]
    lead = truth.population.get(_label(v.best)) if v is not None and v.best else None
    return Score(decision, bool(pick) and value is not None and value <= floor, covered, naive, within, width,
                 (max(shortlist) >= best / 1.0001) if shortlist else None,
                 any(x <= floor for x in shortlist) if shortlist else None,
                 within_2pct(lead, best) if shortlist and lead is not None else None,
                 decision == Outcome.NOTHING_GAINS.value and best > floor,
                 v.stages if v is not None else 0, sweep.requests, sweep.loads, sweep.wall_s, _row_error(sweep, truth))


def _row_error(sweep: Sweep, truth: Truth) -> float | None:
    errors = [math.log(r.speedup.ratio / truth.population[_label(r.draft)]) for r in sweep.results.results
              if r.draft and r.speedup is not None and r.speedup.ratio > 0 and _label(r.draft) in truth.population]
    return statistics.fmean(errors) if errors else None


def _label(name: str | None) -> str:
    """A candidate's name without its k (the simulated grids set none)."""
    return (name or "").split(" (k=")[0]


def summary(scores: list[Score]) -> dict:
    """Rates over the trials; the conditional ones over the trials that recommended (or shortlisted)."""
    def rate(values) -> float | None:
        values = [v for v in values if v is not None]
        return sum(values) / len(values) if values else None

    def share(name: str) -> float:
        return sum(s.decision == name for s in scores) / len(scores)

    widths = [s.width for s in scores if s.width]
    return {"trials": len(scores), "recommends": share("recommend"), "nothing": share("nothing gains"),
            "shortlist": share("shortlist"), "unresolved": share("unresolved"),
            "false": rate(s.false for s in scores), "recommendations": sum(s.decision == "recommend" for s in scores),
            "covered": rate(s.covered for s in scores), "covered_naive": rate(s.covered_naive for s in scores),
            "within": rate(s.within for s in scores), "width": statistics.fmean(widths) if widths else None,
            "shortlist_best": rate(s.shortlist_best for s in scores),
            "shortlist_false": rate(s.shortlist_false for s in scores),
            "leader_within": rate(s.leader_within for s in scores),
            "false_nothing": rate(s.false_nothing for s in scores),
            "decided_by_stage": {k: sum(s.decision in ("recommend", "nothing gains") and s.stages <= k
                                        for s in scores) / len(scores) for k in range(1, 1 + max(s.stages for s in scores))},
            "paying_by_stage": {k: sum(s.decision in ("recommend", "nothing gains", "shortlist") and s.stages <= k
                                       for s in scores) / len(scores) for k in range(1, 1 + max(s.stages for s in scores))},
            "covered_by_look": covered_by_look(scores),
            "rows_centre": math.exp(statistics.fmean(e)) if (e := [s.row_error for s in scores
                                                                    if s.row_error is not None]) else None,
            "requests": statistics.fmean(s.requests for s in scores),
            "loads": statistics.fmean(s.loads for s in scores),
            "wall_s": statistics.fmean(s.wall_s for s in scores)}


LOOK_BUCKETS = ((1, 1), (2, 3), (4, 6), (7, 12), (13, 10_000))


def covered_by_look(scores: list[Score]) -> dict[str, list[int]]:
    """Given a recommendation, whether its quoted interval covered the truth, by the look that decided:
    bucket → [covered, recommendations] (issue 43: coverage misses clustered at looks 2–3)."""
    out: dict[str, list[int]] = {}
    for low, high in LOOK_BUCKETS:
        found = [s.covered for s in scores if s.covered is not None and low <= s.stages <= high]
        if found:
            out[f"{low}" if low == high else f"{low}-{high}" if high < 10_000 else f"{low}+"] = [sum(found), len(found)]
    return out
