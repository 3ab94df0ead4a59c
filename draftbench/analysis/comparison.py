"""One row against its baseline: the speed-up, per category, and what the server's counters allow.

The speed-up's interval is built on prompts and server sessions (:mod:`replication`), with the
session-to-session spread pooled over the target's comparisons (:func:`session_spread`).

**Counters bound the gain.** A verify step costs at least one target step, so a row cannot be
faster than its requests' (n − 1) / (n − 1 − accepted) times the target alone
(:func:`pairing.request_bound`). Two checks use that, on the same units as the speed-up:

* *excess*: the interval of log(measured ratio) − log(bound); wholly above 0 means the row ran
  faster than speculation can explain;
* *no drafts* (a free A/A check): the requests on which the method drafted nothing cannot be
  faster than the target alone; their interval wholly above 1 says the same.

Either one means the machine's speed changed between the two sides of the comparison: the row
is not a speed-up (``counter_bound.speed_changed``), whatever its interval says. Short of that, no
figure quoted passes the bound (:func:`capped`): an estimate above it (noise, on few pairs) is quoted
at the bound, with a note saying what was measured — as the staged verdict's quote is capped.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import overload

from ..common.percent import change_text
from ..config.workloads import SESSION_CATEGORY
from ..results.file import ResultsFile, Row
from ..results.kinds import Role
from ..results.speedup import Speedup
from .moments import LOG_FLOAT_MAX, ratio_of
from .pairing import Pair, pairs, prompt_log_bounds, units
from .replication import SessionVariance, estimate, pool_sessions, session_component
from .stats import describe_speedup, speedup_of_units


@dataclass(frozen=True)
class Comparison:
    speedup: Speedup | None
    by_category: dict[str, Speedup] | None
    counter_bound: dict | None
    confirmed: Speedup | None = None        # on the confirmation block alone (see decision.py)


def confirmation_block(row: Row) -> int | None:
    """The block a row's confirmation requests carry (``design.confirmation_block``), None without one."""
    block = (row.design or {}).get("confirmation_block")
    return block if isinstance(block, int) else None


def measured_pairs(row: Row, baseline: Row) -> tuple[list[Pair], list[Pair]]:
    """(the pairs the row's speed-up is built on, its confirmation block's): fresh prompts only (a
    session's turns are apart, session.py), the confirmation kept out of the first."""
    return _split(pairs(row, baseline), confirmation_block(row))


def _split(every: list[Pair], block: int | None) -> tuple[list[Pair], list[Pair]]:
    fresh = [p for p in every if p.category != SESSION_CATEGORY]
    return [p for p in fresh if block is None or p.block != block], [p for p in fresh if block is not None
                                                                        and p.block == block]


def session_spread(rows: list[Row], baseline: Row) -> SessionVariance:
    """σ²_session of the log ratios, pooled over ``rows`` (a target's comparisons with ``baseline``)."""
    return pool_sessions(session_component(units(p for p in pairs(r, baseline) if p.category != SESSION_CATEGORY))
                         for r in rows if r.requests)


def compare(row: Row, baseline: Row, *, noise_floor: float, sessions: SessionVariance | None = None) -> Comparison:
    """``row`` against ``baseline``; ``sessions``: the pooled session spread (default: the row's own)."""
    if not (row.requests and baseline.requests):
        if row.mean_tps and baseline.mean_tps:      # upstream rows: means only, no interval
            ratio = row.mean_tps / baseline.mean_tps
            return Comparison(Speedup(ratio=round(ratio, 4), method="ratio-of-means", n_pairs=0,
                                      percent=round((ratio - 1) * 100, 2)), None, None)
        return Comparison(None, None, None)
    every, block = pairs(row, baseline), confirmation_block(row)      # paired once, split three ways
    fresh, confirming = _split(every, block)
    matched = [p for p in every if block is None or p.block != block]
    spread = sessions if sessions is not None and sessions.df > 0 else None
    bound = check_counters(fresh + confirming, spread) if row.role == "speculative" else None
    # a row shown faster than its counters allow keeps what it measured: it is then no speed-up at all (judged)
    cap = bound is not None and not bound["speed_changed"]
    speed = speedup_of_units(units(fresh), noise_floor=noise_floor, sessions=spread)
    by_category = {}
    for category in dict.fromkeys(p.category for p in matched):
        mine = [p for p in matched if p.category == category]
        part = speedup_of_units(units(mine), noise_floor=noise_floor, sessions=spread)
        if part:
            by_category[category] = capped(part, bound_ratio(mine)) if cap else part
    confirmed = speedup_of_units(units(confirming), noise_floor=noise_floor, sessions=spread) if confirming else None
    if cap:
        speed = capped(speed, bound_ratio(fresh))
        confirmed = capped(confirmed, bound_ratio(confirming))
    return Comparison(speed, by_category or None, bound, confirmed)


def bound_ratio(matched: list[Pair]) -> float | None:
    """The most these pairs' counters allow, on the speed-up's own scale (the mean over prompts of each prompt's
    mean log bound); None without counters."""
    by_prompt = prompt_log_bounds((p.prompt_id, p.log_bound) for p in matched)
    return math.exp(statistics.fmean(by_prompt.values())) if by_prompt else None


@overload
def capped(speed: Speedup, cap: float | None) -> Speedup: ...
@overload
def capped(speed: None, cap: float | None) -> None: ...
@overload
def capped(speed: Speedup | None, cap: float | None) -> Speedup | None: ...
def capped(speed: Speedup | None, cap: float | None) -> Speedup | None:
    """``speed`` quoted no higher than ``cap`` (what the counters allow): its estimate and upper end held at the
    cap, with a note of what was measured (the excess is noise, or the machine's speed changed)."""
    if speed is None or cap is None or speed.ratio <= cap:
        return speed
    high = speed.high
    top = cap if high is None else min(high, cap)
    note = (f"capped at the {change_text(cap)} its counters allow (measured {change_text(speed.ratio)}: "
            "a verify step costs at least one target step)")
    return replace(speed, ratio=round(cap, 4), percent=round((cap - 1) * 100, 2),
                   ci95_high=round(top, 4) if speed.ci95_low is not None else speed.ci95_high,
                   ci95_low=round(min(speed.ci95_low, top), 4) if speed.ci95_low is not None else None,
                   unbounded=None, note=speed.note or note)


def own_speedup(row: Row, baseline: Row, *, noise_floor: float) -> Speedup | None:
    """The row's speed-up on its fresh prompts with its own session spread, and nothing else of
    :func:`compare` (what a sweep says of a candidate as it goes; its verdict pools more)."""
    return speedup_of_units(units(measured_pairs(row, baseline)[0]), noise_floor=noise_floor)


def _interval(items: list[Pair], value, sessions: SessionVariance | None) -> dict | None:
    est = estimate(units(items, value), sessions)
    if est is None:
        return None
    low, high = est.bounds(0.95)
    return {"ratio": round(math.exp(est.mean), 4), "low": round(ratio_of(low), 4) if math.isfinite(low) else 0.0,
            "high": round(ratio_of(high), 4) if math.isfinite(high) and high <= LOG_FLOAT_MAX else None, "requests": len(items)}


def check_counters(matched: list[Pair], sessions: SessionVariance | None) -> dict | None:
    """The counters' bound on this row's speed-up and whether the measurement exceeds it (see above)."""
    bounded = [p for p in matched if p.log_bound is not None]
    ratio = bound_ratio(bounded)
    if ratio is None:
        return None
    excess = _interval(bounded, lambda p: p.log_ratio - (p.log_bound or 0.0), sessions)
    no_drafts = _interval([p for p in bounded if p.drafted == 0], lambda p: p.log_ratio, sessions)
    over = excess is not None and excess["low"] > 1.0
    idle_faster = no_drafts is not None and no_drafts["low"] > 1.0
    text = f"its counters allow at most {change_text(ratio)}"
    if over and excess is not None:
        text = (f"measured {change_text(excess['ratio'] * ratio)}, above the {change_text(ratio)} its counters allow (a verify "
                "step costs at least one target step): the machine's speed changed between the baseline's "
                "requests and this row's")
    if idle_faster and no_drafts is not None:
        text += ("; " if over else ": ") + (
            f"on the {no_drafts['requests']} requests where it drafted nothing it still ran "
            f"{change_text(no_drafts['ratio'])} [{change_text(no_drafts['low'])}, {change_text(no_drafts['high'])}] against the "
            "target alone (an A/A check: it should be about 0%)" + ("" if over else
                                                                   " — the machine's speed changed"))
    return {"ratio": round(ratio, 4), "requests": len(bounded), "excess": excess, "no_drafts": no_drafts,
            "speed_changed": over or idle_faster, "text": text}


def describe_with_bound(row: Row) -> str:
    """The row's speed-up for people, with the most its counters allow beside it
    ('+12.3% [+8.1%, +16.6%]; counters allow at most +40.0%')."""
    text = describe_speedup(row.speedup) if row.speedup else "n/a"
    bound = row.counter_bound or {}
    if bound.get("ratio") is not None:
        text += f"; counters allow at most {change_text(bound['ratio'])}"
        if bound.get("speed_changed"):
            text += " — above it: the machine's speed changed, not a speed-up"
    return text


def session_spreads(results: ResultsFile) -> dict[tuple[str, int], SessionVariance]:
    """Per (target, streams): σ²_session pooled over its comparisons (a property of the machine)."""
    compared: dict[tuple[str, int], list[Row]] = {}
    for r in results.results:          # grouped once: a lookup per row, not a scan per target
        group = compared.setdefault((r.target, r.concurrency), [])
        if r.measured and r.role in ("speculative", "control"):
            group.append(r)
    out = {}
    for (target, n), rows in compared.items():
        baseline = results.baseline_for(target, n)
        if baseline is not None:
            out[(target, n)] = session_spread(rows, baseline)
    return out


def not_a_speedup(row: Row, bound: dict | None, upstream: bool) -> str | None:
    """Why a speculative row's speed-up must not count, whatever its interval (None: it may)."""
    if row.role != "speculative":
        return None
    if row.speculation_active is False:
        return "speculation was not active: not a speed-up"
    if row.speculation_active is None and not upstream:
        return "the server reported no draft counters, so speculation is not shown to have run: not a speed-up"
    if bound and bound.get("speed_changed"):
        return "faster than its counters allow: the machine's speed changed, not a speed-up"
    return None


def judged(row: Row, baseline: Row, noise_floor: float, drift: dict[tuple[str, int], float],
           spreads: dict, is_upstream: bool) -> tuple[Comparison, float]:
    """The row against ``baseline`` (speed-up, per category, the confirmation block, the counters' bound),
    each said not to be a speed-up where the row is not one, and the noise floor it was judged with."""
    floor = noise_floor
    if row.role is Role.SPECULATIVE and drift.get((row.target, row.concurrency), 0.0) > noise_floor:
        # The same baseline measured twice differed by this much: a smaller "speed-up" is
        # indistinguishable from the machine's own drift, however tight its CI.
        floor = drift[(row.target, row.concurrency)]
    # A control is judged on its own session spread, as measured_drift() judges it to raise the floor: the
    # pooled spread (the candidates' sessions) would call "not significant" a drift that raised the floor.
    pooled = None if row.role is Role.CONTROL else spreads.get((row.target, row.concurrency))
    found = compare(row, baseline, noise_floor=floor, sessions=pooled)
    speed, by_category, confirmed = found.speedup, found.by_category, found.confirmed
    if speed and floor > noise_floor:
        speed = replace(speed, note=f"noise floor raised to the drift the control baseline measured ({floor:.1%})")
    why_not = not_a_speedup(row, found.counter_bound, is_upstream)
    if why_not:
        speed = replace(speed, significant=False, note=why_not) if speed else None
        confirmed = replace(confirmed, significant=False, note=why_not) if confirmed else None
        by_category = {c: replace(s, significant=False, note=why_not) for c, s in (by_category or {}).items()} or None
    return replace(found, speedup=speed, by_category=by_category, confirmed=confirmed), floor


class Judgements:
    """:func:`judged` of each row as last asked (one per row), given again while the row and its baseline are the
    same objects and it is judged with the same floor, drift, spread and provenance: a sweep judges a target's rows
    as the target ends, and its final analysis asks the same of the unchanged rows."""

    def __init__(self) -> None:
        self._rows: dict[tuple, tuple[Row, Row, tuple, tuple[Comparison, float]]] = {}

    def judged(self, row: Row, baseline: Row, noise_floor: float, drift: dict[tuple[str, int], float],
               spreads: dict, is_upstream: bool) -> tuple[Comparison, float]:
        at = (row.target, row.concurrency)
        given = (noise_floor, drift.get(at), spreads.get(at), is_upstream)
        known = self._rows.get(row.key)
        if known is not None and known[0] is row and known[1] is baseline and known[2] == given:
            return known[3]
        found = judged(row, baseline, noise_floor, drift, spreads, is_upstream)
        self._rows[row.key] = (row, baseline, given, found)
        return found
