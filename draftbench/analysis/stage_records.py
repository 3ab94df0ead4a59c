"""From a results file to what the staged decision is made on: each candidate's stages against the target
alone, who took no part (and why), the most each one's counters allow, and the machine's session spread over
the whole file (:class:`TargetStages`, one per target measured in stages).

:func:`draftbench.analysis.decision.decide` reads it, in the sweep after every stage and in the verdict on the
saved file, so a stopped, resumed or re-analysed sweep tells one story. Rows measured in stages carry their
plan in ``design`` (``horizon``: planned stages, ``per_stage``: prompts per stage); a request's ``block`` is
its stage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from ..config.workloads import SESSION_CATEGORY
from ..results.file import ResultsFile, Row
from ..results.kinds import Role, Status
from .categories import candidate_name
from .comparison import check_counters
from .machine_spread import MachineSpread, Spread
from .memory_cost import not_eligible
from .pairing import Pair, pairs
from .stage_evidence import Series, series_from


def is_staged(row: Row) -> bool:
    """Measured in stages (fresh prompts on fresh servers), as recorded in its design."""
    return isinstance((row.design or {}).get("horizon"), int)


def staged_pairs(row: Row, baseline: Row) -> list[Pair]:
    """The row's fresh-prompt pairs (a session's turns are apart: analysis/session.py) with their stage."""
    return [p for p in pairs(row, baseline) if p.category != SESSION_CATEGORY and p.block is not None]


def series_of(matched: Iterable[Pair]) -> Series:
    return series_from((p.block or 0, p.prompt_id, p.log_ratio, p.order, p.category) for p in matched)


class AbsenceKind(Enum):
    """Why a candidate takes no part in the decision (it still counts among the candidates; decision.Why is why
    one left the race)."""

    NOT_PROBED = "not probed"                        # the budget ran out before it was measured
    FAILED = "failed"                                # its row's own reason says how
    NOT_ACTIVE = "speculation was not active"
    NO_COUNTERS = "the server reported no draft counters"
    # Left out for now: every request it has was left out of the pairs (a burst of other programs' load on one
    # side), which its next stage can mend — it is measured on, and no look is final before it takes part (make
    # demo, 2026-11-29: ngram-simple's four requests of stage 1 all met a burst, and the race never measured it again).
    NO_PAIRS = "no request was measured against the target alone"
    SPEED_CHANGED = "faster than its counters allow: the machine's speed changed"
    OVER_MEMORY = "over the memory limit"            # memory_cost.not_eligible says by how much


@dataclass(frozen=True)
class Absence:
    """A candidate's part missing from the decision: why, and in words (a failed row's reason, the memory limit's)."""

    why: AbsenceKind
    text: str

    @classmethod
    def of(cls, why: AbsenceKind, text: str | None = None) -> Absence:
        return cls(why, text or why.value)


def why_not_decided(row: Row, matched: list[Pair], counters: dict | None) -> Absence | None:
    """Why a candidate row takes no part in the decision; ``counters``: what its counters allow on ``matched``
    (:func:`comparison.check_counters`)."""
    if row.status is Status.NOT_PROBED:
        return Absence.of(AbsenceKind.NOT_PROBED)
    if row.status not in (Status.OK, Status.ELIMINATED):
        return Absence.of(AbsenceKind.FAILED, row.reason or str(row.status))
    if row.speculation_active is False:
        return Absence.of(AbsenceKind.NOT_ACTIVE)
    if row.speculation_active is None:
        return Absence.of(AbsenceKind.NO_COUNTERS)
    if not matched:
        return Absence.of(AbsenceKind.NO_PAIRS)
    if counters and counters["speed_changed"]:
        return Absence.of(AbsenceKind.SPEED_CHANGED)
    return None


@dataclass(frozen=True)
class TargetStages:
    """What one target's stages measured: its candidates' stages against the target alone, who could not take
    part (and why), the most each one's counters allow, and the machine's session spread."""

    target: str
    horizon: int                         # planned stages
    per_stage: int
    series: dict[str, Series]            # the candidates taking part, by name
    rows: dict[str, Row]                 # every candidate row, by name
    left_out: dict[str, Absence]         # candidates in no comparison, and why
    caps: dict[str, float]               # the most each candidate's counters allow (a ratio), where they say
    machine: MachineSpread               # the session spread as it stood after any server session
    fixed: bool = False                  # every stage measured the same prompts: the claim is about these prompts
    ineligible: tuple[str, ...] = ()     # left out by the memory limit (memory_cost.not_eligible): not measured on
    prompt_set: int | None = None        # prompts in the set the stages draw from (past it, prompts come back)

    @property
    def candidates(self) -> int:
        """C, the candidates the error is shared over: every candidate row, measured or not."""
        return len(self.rows)

    @property
    def unprobed(self) -> tuple[str, ...]:
        return tuple(n for n, absent in self.left_out.items() if absent.why is AbsenceKind.NOT_PROBED)

    @property
    def awaiting(self) -> tuple[str, ...]:
        """Candidates measured whose every request was left out of the pairs: measured on, awaited by the looks."""
        return tuple(n for n, absent in self.left_out.items() if absent.why is AbsenceKind.NO_PAIRS)

    @property
    def stages_done(self) -> int:
        return max((len(s) for s in self.series.values()), default=0)

    @property
    def spread(self) -> Spread:
        """The machine's session spread at the last stage measured."""
        return self.machine.at(max((s[-1].order for s in self.series.values() if s), default=None))


class StageRecords:
    """Reads results files into each target's :class:`TargetStages`, remembering each target's comparisons and
    the machine's spread: a sweep asks after every stage, and reading the file again then costs the targets whose
    rows changed (new row objects) and the stages measured since, not the whole file."""

    def __init__(self) -> None:
        # per target: its rows as last read, the cut, its candidate rows, and their comparisons and pairs by name
        self._targets: dict[str, tuple[tuple[Row, ...], int | None, list[Row], dict, dict]] = {}
        self._machine: MachineSpread | None = None

    def _target(self, target: str, rows: tuple[Row, ...], baseline: Row | None, cut: int | None
                ) -> tuple[list[Row], dict[str, Series], dict[str, list[Pair]]]:
        """A target's candidate rows, comparisons and pairs, by candidate (no candidate rows: not measured in
        stages); read again only when one of its rows is a new object (else the same objects are returned)."""
        known = self._targets.get(target)
        if known is not None and known[1] == cut and len(known[0]) == len(rows) \
                and all(a is b for a, b in zip(known[0], rows)):
            return known[2], known[3], known[4]
        candidates = [r for r in rows if r.role is Role.SPECULATIVE and r.concurrency == 1
                      and (is_staged(r) or r.status is Status.NOT_PROBED)]
        comparisons, matched_by = {}, {}
        if baseline is None or not any(is_staged(r) for r in candidates):
            candidates = []
        for row in candidates:
            name = candidate_name(row)
            assert baseline is not None
            matched_by[name] = [p for p in staged_pairs(row, baseline) if cut is None or (p.block or 0) < cut]
            comparisons[name] = series_of(matched_by[name])
        self._targets[target] = (rows, cut, candidates, comparisons, matched_by)
        return candidates, comparisons, matched_by

    def targets(self, results: ResultsFile, before: Mapping[str, int] | None = None,
                only: Iterable[str] | None = None) -> dict[str, TargetStages]:
        """The targets measured in stages (``only``: of these; the machine's spread is every target's)."""
        by_target: dict[str, list[Row]] = {}
        for r in results.results:
            by_target.setdefault(r.target, []).append(r)
        found = {target: self._target(target, tuple(rows), results.baseline_for(target), (before or {}).get(target))
                 for target, rows in by_target.items()}
        found = {target: read for target, read in found.items() if read[0]}
        compared = {target: read[1] for target, read in found.items()}
        machine = self._machine = MachineSpread({}).grown(compared) if self._machine is None \
            else self._machine.grown(compared)
        wanted = set(only) if only is not None else set(found)
        unfit = not_eligible(results)        # over the memory limit: measured, never recommended
        ids = (results.prompt_set or {}).get("ids")
        set_size = len(ids) if isinstance(ids, list) and ids else None
        return {target: _stages_of(target, read[0], machine, read[1], read[2], unfit, set_size)
                for target, read in found.items() if target in wanted}


def _stages_of(target: str, rows: list[Row], machine: MachineSpread, comparisons: Mapping[str, Series],
               matched_by: Mapping[str, list[Pair]], unfit: Mapping[tuple[str, str], str],
               prompt_set: int | None) -> TargetStages:
    design = next(r.design for r in rows if is_staged(r) and r.design)
    counters = {n: check_counters(matched_by[n], None) for n in map(candidate_name, rows)}
    over = {n: Absence.of(AbsenceKind.OVER_MEMORY, text) for (t, n), text in unfit.items() if t == target}
    left_out = {n: why for r in rows
                if (why := why_not_decided(r, matched_by[n := candidate_name(r)], counters[n]) or over.get(n)) is not None}
    series = {candidate_name(r): comparisons[candidate_name(r)] for r in rows if candidate_name(r) not in left_out}
    caps = {n: float(c["ratio"]) for n, c in counters.items() if c and isinstance(c.get("ratio"), (int, float))}
    return TargetStages(target, int(design["horizon"]), int(design.get("per_stage") or 0), series,
                        {candidate_name(r): r for r in rows}, left_out, caps, machine, bool(design.get("fixed_prompts")),
                        tuple(over), prompt_set=prompt_set)
