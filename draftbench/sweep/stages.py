"""A target's stages, one after another, each planned on what the stages before it decided.

Before stage k the target is decided on stages 0..k−1 (``analysis/decision.py``, the verdict's own
function): a final decision ends the target (``Decision.final``). Otherwise stage k measures the candidates
the decision keeps in (``Decision.members``: every one, exhaustively; the survivors, in a race) that have not
measured it yet — so a
resumed sweep continues at the first stage any of them lacks, and no measurement is repeated or lost.
The budget is the seconds the user gave for the target's measuring: what its rows recorded before this
run plus this run's time on the clock, counted once; it is checked before every candidate's step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum

from ..analysis.decision import Decision
from ..results.kinds import Role, Status
from .stage_plan import measured_size
from .stage_rows import RowWriter
from .stage_runner import StageRunner, TargetPlan


class Ending(str, Enum):
    DECIDED = "decided"
    STAGES_DONE = "every planned stage was measured"
    BUDGET = "the budget was spent"
    BASELINE_FAILED = "the baseline failed"


@dataclass(frozen=True)
class Budget:
    """The seconds given for one target's measuring, and the clock they run on."""

    seconds: float | None
    clock: Callable[[], float]
    spent_before: float              # measuring time its rows recorded before this run
    started: float                   # this run's start on ``clock``

    def spent(self) -> float:
        return self.spent_before + (self.clock() - self.started)

    def left(self) -> float | None:
        return None if self.seconds is None else max(0.0, self.seconds - self.spent())

    def over(self) -> bool:
        return self.seconds is not None and self.spent() >= self.seconds


class StageLoop:
    """Runs one target's stages until it is decided, the stages or the budget run out, or its baseline fails."""

    def __init__(self, plan: TargetPlan, runner: StageRunner, rows: RowWriter,
                 decide: Callable[[int], Decision | None]):
        self.plan, self.runner, self.rows, self.decide = plan, runner, rows, decide
        self.failed: dict[str, str] = {}

    def has_stage(self, name: str, stage: int) -> bool:
        """Whether ``name`` measured ``stage`` (a row that failed mid-stage has not: a later run measures it)."""
        row = self.rows.row(self.plan.candidates[name])
        if row is None:
            return False
        measured = {r.prompt_id for r in row.requests if r.block == stage and r.error is None and r.decode_tps}
        if row.status is not Status.ERROR:
            return bool(measured)
        return measured >= {self.plan.prompts[i].id for i in self.plan.stages.stage(stage)}

    def dead(self) -> dict[str, str]:
        """Candidates not measured further in this run: they failed (or were skipped) in it. A later run tries
        them again (a model added since, a crash that does not repeat), keeping what they measured."""
        return dict(self.failed)

    def run(self, budget: Budget, more: int = 0, after_stage: Callable[[int], None] | None = None) -> Ending:
        ending = self.run_stages(budget, more, after_stage) if self.plan.candidates else Ending.STAGES_DONE
        if ending in (Ending.DECIDED, Ending.STAGES_DONE):
            # nothing to compare (no candidates, or every one refused before a server started): the target
            # alone, once, so the user still learns its speed
            baseline = self.rows.row(self.plan.baseline)
            if baseline is None or not baseline.requests:
                outcome = self.runner.run(0, [], stop=budget.over)
                if outcome.baseline_failed is not None:
                    return Ending.BASELINE_FAILED
        return ending

    def run_stages(self, budget: Budget, more: int, after_stage: Callable[[int], None] | None) -> Ending:
        done = max((r.block + 1 for c in self.plan.candidates.values() if (row := self.rows.row(c)) is not None
                    for r in row.requests if r.block is not None), default=0)
        last = max(self.plan.stages.horizon, done if more else 0) + more
        for stage in range(last):
            known = self.decide(stage)
            if known is not None and known.final(more):
                return Ending.DECIDED
            self.sized(stage, known)
            dead = self.dead()
            members = [n for n in self.members(known) if n not in dead]
            if not members:
                break         # nothing left to measure, at this stage or any later one (--more)
            todo = [n for n in members if not self.has_stage(n, stage)]
            if not todo:
                continue
            if budget.over():
                return Ending.BUDGET
            outcome = self.runner.run(stage, todo, stop=budget.over)
            self.failed.update(outcome.dead)
            if outcome.baseline_failed is not None:
                return Ending.BASELINE_FAILED
            if after_stage is not None:
                after_stage(stage)
            if budget.over() and any(not self.has_stage(n, stage) for n in todo if n not in outcome.dead):
                return Ending.BUDGET
        known = self.decide(last)
        if known is not None and known.final(more):
            return Ending.DECIDED
        return Ending.STAGES_DONE

    def sized(self, stage: int, known: Decision | None) -> None:
        """The fresh stages from ``stage`` on cut at the size what was measured before it asks for
        (``stage_plan.measured_size``): the same on a resumed run, which re-derives every stage's size as it goes."""
        if known is None or not known.looks:
            return
        stages = self.plan.stages.resized(stage, measured_size(known, self.plan.stages.size))
        if stages is not self.plan.stages:
            self.plan = replace(self.plan, stages=stages)
            self.runner.plan = self.plan

    def members(self, known: Decision | None) -> list[str]:
        """Who the next stage measures (the decision so far says; the A/A control always)."""
        names = list(self.plan.candidates)
        if known is None:
            return names
        return known.members(names, always=[n for n, c in self.plan.candidates.items() if c.role is Role.CONTROL])
