"""Files measured in blocks, before stages: which candidate may be called faster, accounting for choosing
among many (today's sweeps are decided in stages: :mod:`draftbench.analysis.decision`).

Picking the best of C candidates and then quoting its own 95% interval would recommend a useless
candidate far more often than 5% of the time (with 22 of them: one sweep in five), and its estimate
would lean high (the winner's curse). Two ways out, both here:

* **Confirmation on fresh requests** (what a sweep does): the best point estimate above 1 + floor is
  *selected* (:func:`selected`), then measured once more on a block of fresh requests — every prompt
  once, on new server sessions, in the target's design. The recommendation is that block's own 95%
  test (it clears 1 + floor) and the speed-up quoted is that block's estimate (``Row.confirmed``):
  the selection cannot have picked that block's noise, so one test needs no correction for C and
  the estimate carries no winner's curse. With prompts as the replication unit, one block is almost
  as precise as all of them. (The fresh block repeats the same prompts: a candidate selected because
  it suits these prompts keeps that edge; the interval's prompt-to-prompt spread covers it.)
* **Simultaneous bounds** (files without a confirmation, or stopped before it): a candidate is
  recommended only when its lower bound at the simultaneous level — 95% jointly over the C
  candidates (Bonferroni: each two-sided at 1 − 0.05 / C) — clears 1 + floor.

An adaptive race of that era (:mod:`.race`) selected by its own rules and its leader was confirmed the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...results.file import Row
from ...results.speedup import Speedup
from ..moments import ratio_of
from ..stats import describe_speedup
from ..student_t import t_quantile

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
    return ratio_of(mean - half), ratio_of(mean + half)


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


def winners(candidates: Sequence[Row], raced_rows: Sequence[Row], noise_floor: float) -> list[Row]:
    """The rows the verdict may recommend, surest first: the confirmed one where a confirmation was
    measured (that block decides); a race's winner in a file from before confirmations; else the rows
    clearing the simultaneous bounds over the candidates."""
    if confirmed_row(candidates) is not None:
        winner = confirmed_winner(candidates)
        return [winner] if winner is not None else []
    if raced(raced_rows):
        winner = race_winner(candidates)
        speed = winner.speedup if winner is not None else None
        return [winner] if winner is not None and speed is not None and speed.significant and speed.ratio > 1 else []
    return [r for r in recommendable(candidates, noise_floor) if r.speedup and r.speedup.ratio > 1]


def raced(rows: Sequence[Row]) -> bool:
    return any((r.race or {}).get("decision") for r in rows)


def race_winner(rows: Sequence[Row]) -> Row | None:
    return next((r for r in rows if (r.race or {}).get("decision") == "winner"), None)


# --------------------------------------------------------------------------- confirmation on fresh requests

def may_be_speedup(row: Row) -> bool:
    """A row that could be recommended: measured, speculating (shown by its counters), within them."""
    return (row.counts_as_speedup() and row.speculation_active is True and row.speedup is not None
            and not (row.counter_bound or {}).get("speed_changed"))


def selectable(rows: Sequence[Row], noise_floor: float) -> list[Row]:
    """Rows worth confirming: they may be a speed-up and their estimate is above 1 + floor."""
    return [r for r in rows if may_be_speedup(r) and r.speedup is not None and r.speedup.ratio > 1.0 + noise_floor]


def selected(rows: Sequence[Row], noise_floor: float) -> Row | None:
    """The candidate to confirm: the best point estimate among :func:`selectable` rows (none: nothing to
    confirm, nothing recommended). Any rule may select; the confirmation alone decides."""
    pool = selectable(rows, noise_floor)
    return max(pool, key=lambda r: r.speedup.ratio if r.speedup else 0.0) if pool else None


def confirmed_row(rows: Sequence[Row]) -> Row | None:
    """The row a confirmation block was measured for (one per target and level)."""
    return next((r for r in rows if r.confirmed is not None), None)


def confirmed_winner(rows: Sequence[Row]) -> Row | None:
    """The confirmed row, when its confirmation shows it faster by more than the floor (95%, one test)."""
    row = confirmed_row(rows)
    speed = row.confirmed if row is not None else None
    if row is None or speed is None or not may_be_speedup(row):
        return None
    return row if speed.significant and speed.ratio > 1 else None


# --------------------------------------------------------------------------- how the verdict says it

def confirmed_text(best: Row, n_candidates: int) -> str:
    """What the quoted figure is: the confirmation block's, and what it is about."""
    question = best.confirmed.question if best.confirmed and best.confirmed.question else "these requests"
    among = f"chosen among {n_candidates} candidates, then " if n_candidates > 1 else ""
    return f"; {among}confirmed on fresh requests (on {question})"


def not_confirmed_text(row: Row) -> str:
    return (f" The best measured, {row.draft} ({describe_speedup(row.speedup)}), was measured again on fresh "
            f"requests and was not confirmed: {describe_speedup(row.confirmed)}.")


def at_least_text(best: Row, n_candidates: int) -> str:
    """'; at least +12.0% on prompts like these, with 7 candidates compared' (the simultaneous lower bound)."""
    bounds = simultaneous_bounds(best.speedup, n_candidates) if best.speedup else None
    if bounds is None:
        return ""
    question = best.speedup.question if best.speedup and best.speedup.question else "these requests"
    compared = f", {n_candidates} candidates compared" if n_candidates > 1 else ""
    return f"; at least {(bounds[0] - 1) * 100:+.1f}% on {question}{compared}"
