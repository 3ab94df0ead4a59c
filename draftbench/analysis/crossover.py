"""The crossover: up to how many concurrent streams speculative decoding still pays.

:func:`analysis.analyze` compares every row with the baseline at the same concurrency level (the
same prompts and repetitions, the same number of streams). Here the recommended candidate is
followed across the levels: the crossover is the largest N at which it is still significantly
faster — at N and at every level below — and the verdict says what happens after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..results.file import ResultsFile, Row
from ..results.kinds import Role
from ..results.speedup import Speedup, rank
from .choice import Choice
from .concurrency import level_summary, row_levels
from .stats import describe_speedup


class LevelOutcome(str, Enum):
    FASTER = "faster"                     # significantly faster than the target alone at this level
    NOT_SIGNIFICANT = "not significant"
    SLOWER = "slower"                     # significantly slower
    NO_MEASUREMENT = "no valid measurement"


@dataclass(frozen=True)
class LevelResult:
    """The followed candidate at one concurrency level, and the best of that level."""

    streams: int
    outcome: LevelOutcome | None           # None when no candidate is followed
    speedup: Speedup | None
    aggregate_tps: float | None
    baseline_aggregate_tps: float | None
    best: str | None                       # the label of the fastest significantly faster candidate there

    def to_dict(self) -> dict[str, Any]:
        return {"streams": self.streams, "outcome": self.outcome.value if self.outcome else None,
                "speedup": self.speedup.to_dict() if self.speedup else None, "aggregate_tps": self.aggregate_tps,
                "baseline_aggregate_tps": self.baseline_aggregate_tps, "best": self.best}


@dataclass(frozen=True)
class Crossover:
    """Up to how many streams the followed candidate (``draft``, ``draft_max``) stays significantly faster."""

    levels: tuple[int, ...]
    draft: str | None
    draft_max: int | None
    max_streams: int | None
    per_level: tuple[LevelResult, ...]
    next_streams: int | None = None        # the first level past the crossover, when one was measured

    @property
    def candidate(self) -> str | None:
        return label(self.draft, self.draft_max) if self.draft is not None else None

    def to_dict(self) -> dict[str, Any]:
        out = {"levels": list(self.levels), "candidate": self.candidate, "draft": self.draft,
               "draft_max": self.draft_max, "max_streams": self.max_streams,
               "per_level": [p.to_dict() for p in self.per_level]}
        return out if self.next_streams is None else {**out, "next_streams": self.next_streams}


def outcome(row: Row | None) -> LevelOutcome:
    if row is None or not row.counts_as_speedup() or not row.speedup:
        return LevelOutcome.NO_MEASUREMENT
    if not row.speedup.significant:
        return LevelOutcome.NOT_SIGNIFICANT
    return LevelOutcome.FASTER if row.speedup.ratio > 1 else LevelOutcome.SLOWER


def label(draft: str, draft_max: int | None) -> str:
    return draft + (f" (k={draft_max})" if draft_max else "")


def candidates_by_level(results: ResultsFile, target: str) -> dict[tuple[str, int | None], dict[int, Row]]:
    """(candidate, k) → {level: its row} for one target's speculative rows."""
    out: dict[tuple[str, int | None], dict[int, Row]] = {}
    for r in results.rows_of(target):
        if r.role is Role.SPECULATIVE and r.draft is not None:
            out.setdefault((r.draft, r.draft_max), {}).setdefault(r.concurrency, r)
    return out


def max_streams(per_level: dict[int, Row], levels: tuple[int, ...]) -> int | None:
    """The largest level at which the candidate is significantly faster there and at every level below."""
    best = None
    for n in levels:
        if outcome(per_level.get(n)) is not LevelOutcome.FASTER:
            break
        best = n
    return best


def _aggregate(row: Row | None) -> float | None:
    summary = level_summary(row) if row is not None else None
    return summary["aggregate_tps"] if summary else None


def _aggregate_text(results: ResultsFile, target: str, row: Row | None, n: int) -> str:
    base, spec = _aggregate(results.baseline_for(target, n)), _aggregate(row)
    return f"; aggregate {base:.1f} → {spec:.1f} tok/s" if base is not None and spec is not None else ""


def _after(results: ResultsFile, target: str, row: Row | None, n: int) -> str:
    """What happens at the first level past the crossover."""
    state = outcome(row)
    if row is None or state is LevelOutcome.NO_MEASUREMENT:
        why = row.reason if row is not None and row.reason else "not measured"
        return f"at {n} streams it has no valid measurement ({why})"
    where = f"per stream at {n} streams: {describe_speedup(row.speedup)}{_aggregate_text(results, target, row, n)}"
    if state is LevelOutcome.SLOWER and row.speedup:
        return f"above that it costs {(1 - row.speedup.ratio) * 100:.0f}% of throughput ({where})"
    return f"above that it is no longer significantly faster ({where})"


def _levels_text(levels: tuple[int, ...]) -> str:
    return ", ".join(map(str, levels))


def _chosen(by_candidate: dict[tuple[str, int | None], dict[int, Row]], levels: tuple[int, ...],
            choice: Choice) -> tuple[str, int | None] | None:
    """The candidate followed: the recommended one, else the one significantly faster at most levels, if any."""
    rec, speed = choice.recommended_draft, choice.speedup
    if speed and speed.significant and rec is not None and (rec, choice.draft_max) in by_candidate:
        return rec, choice.draft_max
    faster = {key: sum(outcome(rows.get(n)) is LevelOutcome.FASTER for n in levels) for key, rows in by_candidate.items()}
    return max((k for k in faster if faster[k]), key=lambda k: faster[k], default=None)


def _per_level(results: ResultsFile, target: str, by_candidate: dict[tuple[str, int | None], dict[int, Row]],
               levels: tuple[int, ...], chosen: tuple[str, int | None] | None) -> tuple[LevelResult, ...]:
    per_level = []
    for n in levels:
        rows_at = [(key, rows[n]) for key, rows in by_candidate.items() if outcome(rows.get(n)) is LevelOutcome.FASTER]
        best = max(rows_at, key=lambda kr: rank(kr[1].speedup), default=None)
        row = by_candidate[chosen].get(n) if chosen else None
        per_level.append(LevelResult(n, outcome(row) if chosen else None, row.speedup if row is not None else None,
                                     _aggregate(row), _aggregate(results.baseline_for(target, n)),
                                     label(*best[0]) if best else None))
    return tuple(per_level)


def crossover(results: ResultsFile, target: str, choice: Choice) -> tuple[Crossover, str]:
    """The crossover of one target (for its verdict) and the sentence the verdict adds."""
    levels = row_levels(results, target)
    by_candidate = candidates_by_level(results, target)
    reach = {key: max_streams(rows, levels) for key, rows in by_candidate.items()}
    chosen = _chosen(by_candidate, levels, choice)
    per_level = _per_level(results, target, by_candidate, levels, chosen)
    info = Crossover(levels, chosen[0] if chosen else None, chosen[1] if chosen else None,
                     reach.get(chosen) if chosen else None, per_level)
    if chosen is None:
        return info, (f"Under load ({_levels_text(levels)} concurrent streams): no candidate is significantly "
                      "faster than the target alone at any level.")
    rows, name, top = by_candidate[chosen], label(*chosen), reach[chosen]
    if top is None:
        fast = [n for n in levels if outcome(rows.get(n)) is LevelOutcome.FASTER]
        sentence = (f"Under load: {name} is significantly faster only at {_levels_text(tuple(fast))} streams, not "
                    f"from {levels[0]} up, so there is no clear crossover.")
    elif top == levels[-1]:
        sentence = (f"Under load: {name} stays significantly faster up to {top} concurrent streams, the most "
                    f"measured ({describe_speedup(rows[top].speedup)} at {top}); the crossover is beyond {top}.")
    else:
        after = levels[levels.index(top) + 1]
        info = Crossover(info.levels, info.draft, info.draft_max, info.max_streams, per_level, next_streams=after)
        reach_text = "a single stream only" if top == 1 else f"up to {top} concurrent streams"
        sentence = (f"Under load: use {name} for {reach_text} ({describe_speedup(rows[top].speedup)} at {top}); "
                    f"{_after(results, target, rows.get(after), after)}.")
    further = [(key, n) for key, n in reach.items() if n is not None and (top is None or n > top)]
    if further:
        key, n = max(further, key=lambda kn: kn[1])
        sentence += f" {label(*key)} stays significantly faster up to {n} streams."
    return info, sentence
