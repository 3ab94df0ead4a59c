"""One stage of one target, on fresh servers: its steps (``schedule.stage_steps``) in order, every request
recorded with its server session, its stage, whether the method could have seen the prompt, and the
baseline sessions it is compared with; each side's rows written after every step.

A candidate that fails (it cannot start, does not speculate, a request breaks) keeps what it measured in
an error row and leaves the target's stages; the others go on beside the same baseline server. A
baseline that fails ends the target's stages: with nothing measured before, its candidates are skipped
(as upstream); otherwise the target stays unresolved with what it has.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ..analysis.stats import describe_subset
from ..common.errors import RequestError, ServerError
from ..config.prompts import Prompt
from ..measure.context import answers_of, with_context
from ..measure.sequential import MeasureOptions, explain_failure, measure_one, request_seed
from ..results.file import RequestRecord
from ..results.kinds import Role, Status
from .console import Reporter
from .launcher import Launcher, LaunchFailed, Session
from .plan import Combination
from .runner import first_line, log_of, reason_of
from .schedule import Design, Request, Side, StageStep, stage_steps
from .stage_plan import StagePlan
from .stage_rows import RowWriter


@dataclass(frozen=True)
class TargetPlan:
    """What one target's stages measure: its baseline, its candidates by name, the design and the prompts."""

    baseline: Combination
    candidates: dict[str, Combination]
    design: Design
    why: str
    stages: StagePlan
    prompts: tuple[Prompt, ...]

    @property
    def label(self) -> str:
        return self.baseline.target.label


@dataclass
class Outcome:
    """What a stage left behind: the candidates that failed (and why), or why the baseline failed."""

    dead: dict[str, str] = field(default_factory=dict)
    baseline_failed: str | None = None


class StageRunner:
    def __init__(self, launcher: Launcher, plan: TargetPlan, rows: RowWriter, reporter: Reporter,
                 options: MeasureOptions, numbering: tuple[int, int] | None = None):
        """``numbering``: (steps measured before this run, the most steps the target's stages may run): the
        console numbers steps out of the total, and a resumed target numbers on from where it stopped."""
        self.launcher, self.plan, self.rows, self.reporter, self.options = launcher, plan, rows, reporter, options
        self.steps_run = numbering[0] if numbering is not None else 0
        self.total: int | None = numbering[1] if numbering is not None else None
        self.opening_s = 0.0            # a baseline server's load and warm-up, charged to its row with its requests
        self.baseline_failed: str | None = None      # why the baseline failed, when it did (it ends the target)

    def run(self, stage: int, names: Sequence[str], stop: Callable[[], bool]) -> Outcome:
        """Measure stage ``stage`` for the candidates ``names``; ``stop`` is asked before each candidate step."""
        plan = self.plan
        steps = stage_steps(plan.design, stage, plan.stages.stage(stage), plan.stages.run_of(stage), names)
        outcome = Outcome()
        slots: dict[int, Session] = {}
        ids: dict[int, str] = {}
        early = self.launcher.runner.skipped_or_broken(plan.baseline, {})
        if early is not None:           # the target's model missing or broken: checked before any server starts
            self.reporter.row_recorded(self.rows.store.record(early))
            outcome.baseline_failed = self.baseline_failed = early.reason or str(early.status)
            return outcome
        try:
            for position, step in enumerate(steps):
                if step.candidate is not None and stop():
                    break
                if step.candidate is None:
                    self._baseline_step(stage, step, slots, ids)
                else:
                    self._candidate_step(stage, step, slots, ids, outcome)
                for slot in [s for s in slots if not any(t.baseline == s for t in steps[position + 1:])]:
                    self.launcher.stop(slots.pop(slot))
        except _BaselineFailed as failed:
            outcome.baseline_failed = self.baseline_failed = failed.reason
        finally:
            for session in slots.values():
                self.launcher.stop(session)
        for step in steps:          # a bracketed candidate is compared with the baseline server after it too
            for slot in step.compared_with[1:]:
                if step.candidate is not None and slot in ids:
                    self.rows.bracket(plan.candidates[step.candidate], stage, ids[slot])
        return outcome

    # ------------------------------------------------------------------ steps
    def _title(self, stage: int, name: str | None) -> str:
        combo = self.plan.baseline if name is None else self.plan.candidates[name]
        beside = ", beside the stage's baseline server" if self.plan.design is Design.INTERLEAVED and name else ""
        return f"{combo.title(True)} [stage {stage + 1}/{self.plan.stages.horizon}{beside}]"

    def _announce(self, stage: int, name: str | None) -> None:
        self.steps_run += 1
        self.reporter.combination_started(self.steps_run, self.total or self.steps_run, self._title(stage, name),
                                          at_most=self.total is not None)

    def _open_baseline(self, slot: int, slots: dict[int, Session], ids: dict[int, str]) -> Session:
        if slot not in slots:
            started = self.launcher.clock()
            try:
                slots[slot] = self.launcher.open(self.plan.baseline)
                self.launcher.warm(slots[slot], self.plan.prompts, self.options)
            except LaunchFailed as failed:
                self._baseline_failure(failed.error, failed.session, [])
            finally:
                self.opening_s += self.launcher.clock() - started
            ids[slot] = slots[slot].id
        return slots[slot]

    def _baseline_rows(self, session: Session, records: list[RequestRecord], wall: float) -> None:
        """The baseline's requests of a step added to its row, with the time its server took to start; a
        baseline that turned out to speculate ends the target (nothing may be compared with it)."""
        if session.methods is None and records:
            session.methods = session.server.active_methods()     # /slots fills in once a request ran
        session.memory = session.server.memory_use()               # its server runs on: the most so far
        row = self.rows.measured(self.plan.baseline, session, records, wall + self.opening_s)
        self.opening_s = 0.0
        if row.status is Status.ERROR:
            self.reporter.failed(row.reason or "the baseline failed", None)
            raise _BaselineFailed(row.reason or "the baseline failed")

    def _baseline_step(self, stage: int, step: StageStep, slots: dict[int, Session], ids: dict[int, str]) -> None:
        self._announce(stage, None)
        assert step.baseline is not None
        session = self._open_baseline(step.baseline, slots, ids)
        started = self.launcher.clock()
        records = {Side.BASELINE: [], Side.CANDIDATE: []}       # type: dict[Side, list[RequestRecord]]
        try:
            self._send(stage, step, {Side.BASELINE: session}, records, [])
        except _RequestFailed as failed:
            self._baseline_failure(failed.error, session, records[Side.BASELINE])
        self.reporter.measured(_mean(r.decode_tps for r in records[Side.BASELINE]), None, False)
        self._baseline_rows(session, records[Side.BASELINE], self.launcher.clock() - started)

    def _candidate_step(self, stage: int, step: StageStep, slots: dict[int, Session], ids: dict[int, str],
                        outcome: Outcome) -> None:
        name = step.candidate or ""
        combo = self.plan.candidates[name]
        self._announce(stage, name)
        early = self.launcher.runner.skipped_or_broken(combo, {})
        if early is not None:             # a model missing or broken: checked before any server starts
            kept = row.requests if (row := self.rows.row(combo)) else ()
            self.reporter.row_recorded(self.rows.store.record(replace(early, requests=kept)))
            outcome.dead[name] = early.reason or str(early.status)
            return
        base = self._open_baseline(step.baseline, slots, ids) if step.baseline is not None else None
        compared = [ids[s] for s in step.compared_with if s in ids]
        records: dict[Side, list[RequestRecord]] = {Side.BASELINE: [], Side.CANDIDATE: []}
        started = self.launcher.clock()
        opened: Session | None = None
        try:
            opened = self.launcher.open(combo, beside=base is not None)
            self.launcher.warm(opened, self.plan.prompts, self.options)
            sessions = {Side.CANDIDATE: opened, **({Side.BASELINE: base} if base is not None else {})}
            self._send(stage, step, sessions, records, compared)
            shown = records[Side.CANDIDATE]            # said before its server stops, as a one-pass sweep says it
            self.reporter.measured(_mean(r.decode_tps for r in shown), _acceptance(shown), combo.is_speculative)
        except (LaunchFailed, _RequestFailed) as failed:
            self._candidate_failure(name, combo, failed, opened, records, started, base, outcome)
            return
        finally:
            if opened is not None:
                self.launcher.stop(opened)
        wall = self.launcher.clock() - started
        if base is not None and records[Side.BASELINE]:
            self._baseline_rows(base, records[Side.BASELINE], 0.0)
        row = self.rows.measured(combo, opened, records[Side.CANDIDATE], wall)
        if row.role is Role.SPECULATIVE:
            self.reporter.note(f"{name} so far ({len(row.requests)} requests): {describe_subset(row.speedup)}")

    # ------------------------------------------------------------------ requests
    def _send(self, stage: int, step: StageStep, sessions: dict[Side, Session],
              records: dict[Side, list[RequestRecord]], compared: list[str]) -> None:
        base_row = self.rows.row(self.plan.baseline)
        known = answers_of(base_row.requests) if base_row is not None else {}     # second turns' context
        candidate = sessions.get(Side.CANDIDATE)
        self.reporter.benchmarking()
        for done, request in enumerate(step.requests, 1):
            session = sessions[request.side]
            record = self._one(session, request, known)
            records[request.side].append(replace(
                record, session=session.id, block=stage,
                seen_before=session.stateful and record.prompt_id in session.seen,
                compared_with=list(compared) if request.side is Side.CANDIDATE else None,
                beside=candidate.id if request.side is Side.BASELINE and candidate is not None else None))
            session.seen.add(record.prompt_id)
            if request.side is Side.BASELINE and record.text is not None:
                known.setdefault(record.prompt_id, record.text)        # the target's own first answer
            self.reporter.request_done(done, len(step.requests))

    def _one(self, session: Session, request: Request, known: dict) -> RequestRecord:
        prompt = self.plan.prompts[request.prompt]
        try:
            return measure_one(session.server, with_context(prompt, known), self.options,
                               max_tokens=self.options.max_tokens,
                               seed=request_seed(self.options.seed, request.run, request.prompt), run=request.run)
        except (RequestError, ServerError) as exc:
            raise _RequestFailed(request.side, explain_failure(session.server, exc)) from None

    # ------------------------------------------------------------------ failures
    def _candidate_failure(self, name: str, combo: Combination, failed: LaunchFailed | _RequestFailed,
                           opened: Session | None, records: dict[Side, list[RequestRecord]], started: float,
                           base: Session | None, outcome: Outcome) -> None:
        """Keep what both sides measured; a failure of the baseline server beside it ends the target's stages,
        one of the candidate's own ends its part in them."""
        wall = self.launcher.clock() - started
        if base is not None and records[Side.BASELINE]:
            self._baseline_rows(base, records[Side.BASELINE], 0.0)
        if isinstance(failed, _RequestFailed) and failed.side is Side.BASELINE:
            if opened is not None and records[Side.CANDIDATE]:
                self.rows.measured(combo, opened, records[Side.CANDIDATE], wall)
            self._baseline_failure(failed.error, base, [])
        reason = self._report(failed.error)
        session = opened or (failed.session if isinstance(failed, LaunchFailed) else None)
        self.rows.failed(combo, reason, session, records[Side.CANDIDATE], wall,
                         inactive=isinstance(failed, LaunchFailed) and failed.inactive)
        outcome.dead[name] = reason

    def _report(self, error: Exception) -> str:
        fix = getattr(error, "fix", None)
        self.reporter.failed(first_line(error), fix or None, *log_of(error))
        return reason_of(error)

    def _baseline_failure(self, error: Exception, session: Session | None, new: list[RequestRecord]) -> None:
        """Keep what the baseline measured; with nothing measured before, its row is an error. Ends the stage."""
        reason = self._report(error)
        row = self.rows.row(self.plan.baseline)
        if new and session is not None:
            self._baseline_rows(session, new, 0.0)
        elif row is None or not row.requests:
            self.rows.failed(self.plan.baseline, reason, session, new, 0.0)
        raise _BaselineFailed(reason)


class _RequestFailed(Exception):
    def __init__(self, side: Side, error: RequestError | ServerError):
        super().__init__(str(error))
        self.side, self.error = side, error


class _BaselineFailed(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _mean(values) -> float | None:
    vals = [v for v in values if v]
    return sum(vals) / len(vals) if vals else None


def _acceptance(records: Sequence[RequestRecord]) -> float | None:
    drafted = sum(r.draft_n or 0 for r in records)
    return sum(r.draft_n_accepted or 0 for r in records) / drafted if drafted and math.isfinite(drafted) else None
