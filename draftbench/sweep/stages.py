"""A target's stages as its rows hold them: what each candidate still owes a stage, how many steps were measured
before this run, how the stages of a target end, and the budget they run under. The loop itself is
``sweep/run.py`` (``SweepRun.target``).

A candidate owes a stage each prompt it has no measured pair for there: its own request and the target alone's
request for the same prompt on the baseline server it was compared with. So a stage that a stop cut (Ctrl-C, a
crash, the budget) is finished by a resumed sweep with only the prompts still owed, on fresh servers, every pair
whole; nothing measured is repeated or lost. The budget is the seconds the user gave for the target's measuring:
what its rows recorded before this run plus this run's time on the clock, counted once; it is checked before
every candidate's step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from ..common.errors import RequestError, ServerError
from ..results.file import Row
from .schedule import Design, Side
from .target_plan import TargetPlan


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


def owed(plan: TargetPlan, row: Row | None, baseline: Row | None, stage: int) -> list[int]:
    """The prompts (indexes into ``plan.prompts``) a candidate's ``row`` has no measured pair for at ``stage``."""
    wanted = plan.stages.stage(stage)
    if row is None or baseline is None:
        return list(wanted)
    run = plan.stages.run_of(stage)
    base = {(r.prompt_id, r.session) for r in baseline.requests if r.block == stage and r.run == run and r.error is None}
    paired = {r.prompt_id for r in row.requests if r.block == stage and r.run == run and r.error is None
              and any((r.prompt_id, s) in base for s in r.compared_with or ())}
    return [i for i in wanted if plan.prompts[i].id not in paired]


def measured_before(row: Row | None) -> int:
    """The stages a candidate's row reaches into (a stage with any request counts)."""
    return max((r.block + 1 for r in (row.requests if row is not None else ()) if r.block is not None), default=0)


def steps_measured(plan: TargetPlan, rows: dict[str, Row | None], baseline: Row | None) -> int:
    """The steps a target's rows were measured in before this run: a candidate's server session is a step, and
    so is each baseline server outside the interleaved design (there, the stage's baseline server is beside)."""
    candidates = {r.session for row in rows.values() if row is not None for r in row.requests if r.session}
    own = {r.session for r in (baseline.requests if baseline else ()) if r.session}
    return len(candidates) + (0 if plan.design is Design.INTERLEAVED else len(own))


class Charges:
    """Where a step's time goes: each charge is the time since the last one. A candidate's step is all charged to
    the candidate's row (the stage's baseline requests beside it are charged none); a baseline's own step to it."""

    def __init__(self, clock: Callable[[], float]):
        self.clock, self.mark = clock, clock()

    def take(self, charge: bool) -> float:
        if not charge:
            return 0.0
        now = self.clock()
        elapsed, self.mark = now - self.mark, now
        return elapsed


class RequestFailed(Exception):
    """A request failed on one side of a step (its server's explanation)."""

    def __init__(self, side: Side, error: RequestError | ServerError):
        super().__init__(str(error))
        self.side, self.error = side, error


class BaselineFailed(Exception):
    """The target alone failed: it ends the target's stages."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
