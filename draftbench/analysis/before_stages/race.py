"""A race of the blocks era (files measured before stages): its outcome as one decision with the verdict —
best, tied, within the noise floor, eliminated, and why.

The race and the verdict used to speak separately ("ngram-mod wins the race", then "speculative
decoding not recommended"). Here the outcome is built from the rows the race recorded (``race.decision``,
eliminated rows' reasons, each look's bound) *and* the verdict's own entry: the best of the race is
the configuration the verdict recommends where it recommends one, otherwise the race's leader, said to
be not significantly faster than the target alone (the race's winner is the leader confirmed on fresh
requests: ``before_stages/rule.py``, so the two agree). The others: within the noise floor of it
(resolved), tied (an equivalence: two one-sided tests against ± the floor), unresolved (the planned
requests could not tell; no claim), eliminated. The console and the report both render
:meth:`RaceOutcome.sentence` and :meth:`RaceOutcome.history` from this one object, stored in the
target's verdict (``TargetVerdict.race``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ...results.file import ResultsFile, Row
from ...results.speedup import Speedup
from ..categories import candidate_name
from ..choice import Choice
from ..stats import describe_speedup

# The race's decisions (``race.decision`` in a row) beyond winner / tied / within the noise floor / eliminated:
UNRESOLVED = "unresolved: the planned requests could not separate it from the leader"
LEADER_NOT_CONFIRMED = "leader, not confirmed faster than the baseline by the noise floor"
NOT_A_SPEEDUP = "not a speed-up: faster than its counters allow"


@dataclass(frozen=True)
class RaceLook:
    """One look at a candidate: after how many requests, its speed-up bounds and where it stood."""

    requests: int
    ratio: float | None
    low: float | None
    high: float | None
    standing: str


@dataclass(frozen=True)
class Entry:
    """One candidate's race: every look, the decision, why, and what it cost."""

    name: str
    decision: str
    why: str
    loads: int | None
    requests: int
    planned: int | None
    looks: tuple[RaceLook, ...] = ()


@dataclass(frozen=True)
class RaceOutcome:
    target: str
    best: str | None
    significant: bool            # the best is significantly faster than the target alone (the verdict's test)
    best_speedup: str | None
    tied: tuple[str, ...]            # equivalent to the best within ± the noise floor (two one-sided tests)
    resolved: tuple[str, ...]        # cannot beat the best by more than the noise floor
    eliminated: tuple[str, ...]
    not_separated: tuple[str, ...]
    entries: tuple[Entry, ...]
    unresolved: tuple[str, ...] = ()  # the planned requests could not separate it from the best (no claim)

    def sentence(self) -> str:
        """The race's outcome in the verdict's words."""
        if self.best is None:
            left = ", ".join(self.not_separated)
            text = f"{self.target}: the race left no best" + (f" ({len(self.not_separated)} not separated: {left})"
                                                              if left else "")
        elif self.significant:
            text = (f"{self.target}: best of the race: {self.best}, significantly faster than the target alone "
                    f"({self.best_speedup})")
        else:
            text = (f"{self.target}: best of the race: {self.best}, but not significantly faster than the target "
                    f"alone" + (f" ({self.best_speedup})" if self.best_speedup else ""))
        if self.resolved:
            text += f"; within the noise floor of it: {', '.join(self.resolved)}"
        if self.tied:
            text += f"; tied with it (equal within the noise floor either way): {', '.join(self.tied)}"
        if self.unresolved:
            text += f"; not separated from it (the planned requests could not tell): {', '.join(self.unresolved)}"
        if self.eliminated:
            text += f"; eliminated: {', '.join(self.eliminated)}"
        return text + "."

    def to_dict(self) -> dict:
        return {**asdict(self), "sentence": self.sentence()}


def _looks(row: Row) -> tuple[RaceLook, ...]:
    out = []
    for look in (row.race or {}).get("looks") or ():
        if isinstance(look, dict) and isinstance(look.get("requests"), int):
            out.append(RaceLook(look["requests"], look.get("ratio"), look.get("low"), look.get("high"),
                            str(look.get("standing") or "")))
    return tuple(out)


def _entry(row: Row) -> Entry:
    race = row.race or {}
    decision = str(race.get("decision") or row.status)
    why = row.reason if decision == "eliminated" and row.reason else {
        "winner": "the leader when no candidate was left open, confirmed on fresh requests",
        "within the noise floor of the winner": "it cannot beat the winner by more than the noise floor",
        "within the noise floor of the leader": "it cannot beat the leader by more than the noise floor",
        "tied with the winner": "equal to the winner within the noise floor either way (two one-sided tests)",
        "tied with the leader": "equal to the leader within the noise floor either way (two one-sided tests)",
        UNRESOLVED: "it did not look better than the leader, and even every planned request would not separate "
                    "them",
        LEADER_NOT_CONFIRMED: "the leader, but fresh requests did not confirm it faster than the target by the "
                              "noise floor",
        NOT_A_SPEEDUP: "its server's counters cannot explain its speed: the machine's speed changed",
        "not separated": "the race ended (budget) before it was separated from the others",
        "inactive": "the server did not speculate with it",
        "running": "still being measured"}.get(decision, row.reason or "")
    return Entry(candidate_name(row), decision, why, race.get("loads"), len(row.requests), race.get("planned"),
                 _looks(row))


def race_outcome(results: ResultsFile, target: str, choice: Choice) -> RaceOutcome | None:
    """The race of ``target``, decided together with its verdict's ``choice``; None when it was not raced."""
    raced = [r for r in results.rows_of(target) if r.role == "speculative" and r.race
             and r.concurrency == 1]
    if not raced:
        return None
    by_decision: dict[str, list[str]] = {}
    for row in raced:
        by_decision.setdefault(str((row.race or {}).get("decision")), []).append(candidate_name(row))
    best_speed: Speedup | None
    best: str | None
    if choice.shown_faster:
        best, significant, best_speed = choice.recommended_label, True, choice.speedup
    else:
        # the verdict's "best": the fastest measured survivor, else the fastest probe the race eliminated
        pool = [r for r in raced if r.counts_as_speedup() and r.speedup] or \
               [r for r in raced if r.status == "eliminated" and r.speedup]
        top = max(pool, key=lambda r: r.speedup.ratio if r.speedup else 0.0) if pool else None
        best, significant = (candidate_name(top) if top else None), False
        best_speed = top.speedup if top else None
    not_best = [n for n in by_decision.get("winner", []) if n != best]      # the verdict decides: one best

    def named(*decisions: str) -> tuple[str, ...]:
        return tuple(n for d in decisions for n in by_decision.get(d, []) if n != best)
    return RaceOutcome(
        target=target, best=best, significant=significant,
        best_speedup=describe_speedup(best_speed) if best_speed else None,
        tied=named("tied with the winner", "tied with the leader"),
        resolved=named("within the noise floor of the winner", "within the noise floor of the leader"),
        eliminated=named("eliminated"),
        not_separated=tuple(by_decision.get("not separated", []) + by_decision.get("running", [])),
        entries=tuple(_entry(r) for r in raced),
        unresolved=named(UNRESOLVED, LEADER_NOT_CONFIRMED) + tuple(not_best))
