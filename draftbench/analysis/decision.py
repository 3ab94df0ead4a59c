"""The recommendation's rule: which candidate may be called faster, accounting for choosing among many.

Picking the best of C candidates and then quoting its own 95% interval would recommend a useless
candidate far more often than 5% of the time (with 22 of them: one sweep in five). So a
candidate is *recommended* only when its lower bound at the simultaneous level — 95% jointly over
the C candidates of the target (Bonferroni: each two-sided at 1 − 0.05 / C) — clears 1 + noise
floor. Those simultaneous intervals cover every candidate's true speed-up at once with at least
95%, so the recommended one's covers its truth whatever the choice (no winner's curse in the
interval; the point estimate of a chosen one still leans high, which is why the verdict quotes
"at least"). With one candidate it is the row's own 95% test.

An adaptive race decides with its own spent boundary (:mod:`racing`); its winner is the
recommendation (``race.decision == "winner"``), one decision for the race and the verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..results.file import Row
from ..results.speedup import Speedup
from .student_t import t_quantile

ALPHA = 0.05


def simultaneous_bounds(speed: Speedup, n_candidates: int, alpha: float = ALPHA) -> tuple[float, float] | None:
    """The interval of ``speed`` at the simultaneous level over ``n_candidates`` (None without one)."""
    if speed.se_log is None or speed.df is None:
        return (speed.ci95_low, speed.ci95_high) if speed.ci95_low is not None and speed.ci95_high is not None \
            else None
    if speed.se_log == 0:
        return speed.ratio, speed.ratio
    if speed.df < 1:
        return None
    half = t_quantile(1.0 - alpha / (2 * max(1, n_candidates)), min(speed.df, 1e6)) * speed.se_log
    mean = math.log(speed.ratio)
    return math.exp(mean - half), math.exp(mean + half)


def clears(speed: Speedup | None, n_candidates: int, noise_floor: float) -> bool:
    """Recommendable: the simultaneous lower bound is above 1 + floor."""
    if speed is None or (speed.significant is False and speed.note):
        return False                          # not a speed-up (inactive, unknown, above its counters)
    bounds = simultaneous_bounds(speed, n_candidates)
    floor = max(noise_floor, speed.noise_floor or 0.0)        # raised to a measured drift, where it was
    return bounds is not None and bounds[0] > 1.0 + floor


def recommendable(rows: Sequence[Row], noise_floor: float) -> list[Row]:
    """The rows that clear the simultaneous test, best lower bound first."""
    n = len(rows)
    out = [r for r in rows if clears(r.speedup, n, noise_floor)]

    def key(r: Row) -> tuple[float, float]:
        assert r.speedup is not None
        bounds = simultaneous_bounds(r.speedup, n)
        return (bounds[0] if bounds else 0.0, r.speedup.ratio)
    return sorted(out, key=key, reverse=True)


def raced(rows: Sequence[Row]) -> bool:
    return any((r.race or {}).get("decision") for r in rows)


def race_winner(rows: Sequence[Row]) -> Row | None:
    return next((r for r in rows if (r.race or {}).get("decision") == "winner"), None)


def race_outcome(rows: Sequence[Row]) -> dict:
    """The race's decision as data: winner, tied, resolved, unresolved, eliminated (with why), other."""
    out: dict = {"winner": None, "tied": [], "resolved": [], "unresolved": [], "eliminated": {}, "other": {}}
    for r in rows:
        decision = (r.race or {}).get("decision")
        name = (r.draft or r.target) + (f" (k={r.draft_max})" if r.draft_max else "")
        if not decision:
            continue
        if decision == "winner":
            out["winner"] = name
        elif decision.startswith("tied"):
            out["tied"].append(name)
        elif decision.startswith("not better"):
            out["resolved"].append(name)
        elif decision.startswith("unresolved"):
            out["unresolved"].append(name)
        elif decision == "eliminated":
            out["eliminated"][name] = r.reason
        else:
            out["other"][name] = decision
    return out
