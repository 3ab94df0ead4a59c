"""One whole sweep on any backend, from Python — and its loops, top to bottom, in this one module (vLLM's
``benchmarks/sweep`` ``run_combs`` → ``run_comb`` → ``run_benchmark`` is the model; pyperf's ``Runner`` the API):

    run_sweep              the sweep: each target at each prompt length, then the combinations measured on
                           their own; the results analysed once, at the end
      SweepRun.target      one target: a look (``analysis/decision.py``) after each stage decides what the next
                           one measures, under the target's budget
        TargetRun.stage    one stage: its steps in the design's order (``schedule.stage_steps``), fresh servers
          TargetRun.step   one step: the servers up together and the requests they answer, in order
            .request       one request: measured, then added to its row at once (a request measured is a
                           request kept: ``stage_rows.py``; a row's fields summarised as its step ends)

Nothing here calls back into its caller: each level returns what happened and the level above decides.

    outcome = run_sweep(load_config("configs/demo_sweep.json"))     # or run_sweep(config, backend=MyBackend())
    for verdict in outcome.verdicts.values():       # typed, per target (analysis/stage_verdict.py)
        print(verdict.verdict, verdict.best, verdict.quote.text() if verdict.quote else "")
    outcome.results                                  # the analysed results file (save_results writes it)

``backend``: any object implementing the backend contract (``draftbench/backends/base.py``), by default the config's
own; ``store`` receives every request's row as it is measured (the command line's saves each in the results file's
journal: ``sweep/store.py``); ``clock`` times the budget (a simulator passes its own); ``more``: stages beyond the
plan for each unresolved target. The command line and ``benchmarks/verdicts.py`` run here."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..analysis.axis_points import Point
from ..analysis.comparison import own_speedup
from ..analysis.decision import Decider, Decision
from ..analysis.stage_verdict import StagedVerdict, staged_verdict
from ..analysis.stats import describe_subset
from ..analysis.summary import staged_verdicts
from ..analysis.verdict import acceptance, analyze, analyze_rows
from ..backends import get_backend
from ..backends.base import Backend
from ..common.errors import RequestError, ServerError
from ..config.prompts import prompts_for
from ..measure.context import answers_of, with_context
from ..measure.sequential import MeasureOptions, explain_failure, measure_one, request_seed
from ..results.file import RequestRecord, ResultsFile
from ..results.kinds import Role, Status
from . import distribution_check
from .config_file import SweepConfig
from .console import Reporter, format_duration
from .launcher import Launcher, LaunchFailed, Session, next_session_number
from .plan import Combination, plan, shows_k
from .runner import CombinationRunner, RunnerIO, first_line, log_of, reason_of
from .schedule import Design, Request, Side, StageStep, stage_steps
from .stage_rows import RowWriter, in_stages
from .stages import BaselineFailed, Budget, Charges, Ending, RequestFailed, measured_before, owed, steps_measured
from .store import RowStore, empty_results
from .target_plan import TargetPlan, points, target_plan


@dataclass(frozen=True)
class SweepOutcome:
    """What :func:`run_sweep` returns: the results analysed once, each staged target's verdict from that analysis
    and how its stages ended (keyed by the target's label; on an axis by its point: ``"<label> at <N> tokens"``,
    ``"<label> at temperature <T>"``, see ``axis_points.Point.name``)."""

    results: ResultsFile
    verdicts: dict[str, StagedVerdict] = field(default_factory=dict)
    endings: dict[str, Ending] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Every planned candidate was measured (a budget stop leaves some not probed: exit code 3)."""
        return not any(r.status is Status.NOT_PROBED for r in self.results.results)


def run_sweep(config: SweepConfig, backend: Backend | None = None, *, store: RowStore | None = None,
              reporter: Reporter | None = None, clock: Callable[[], float] = time.perf_counter,
              logs_dir: Path | None = None, more: int = 0) -> SweepOutcome:
    """Run the whole sweep ``config`` describes on ``backend``: each target, then the rest; analysed once."""
    settings, selection = config.settings, prompts_for(config.settings)
    run = SweepRun(config, backend or get_backend(config.backend),
                   store or RowStore(empty_results(config, selection)), reporter or Reporter(), clock)
    prompts = selection.prompts
    options = MeasureOptions.from_settings(settings)
    runner = CombinationRunner(run.backend, config.backend, settings, prompts, options,
                               RunnerIO(logs_dir or Path("results") / "logs", run.reporter, clock=clock))
    launcher = Launcher(runner, run.reporter, clock, next_session_number(run.store.current()))
    combos = plan(config)
    endings: dict[str, Ending] = {}
    for target in config.targets:
        for point, measured in points(run.store, runner, target, prompts, more):
            runner.prompts = measured        # the point's own prompts, sent at its temperature
            runner.options = options if point.temperature is None else replace(options, temperature=point.temperature)
            at_n = [c for c in combos if c.target.label == target.label and point.holds(c)]
            found = target_plan(settings, run.backend, at_n, target.label, measured, point.of(run.store.current()))
            if found is not None:
                endings[point.name(target.label)] = \
                    run.target(TargetRun(launcher, found, RowWriter(run.store, runner, found.staged), run.reporter), point, more)
                if settings.distribution_samples and runner.options.temperature > 0:     # output truth above 0
                    distribution_check.check_target(launcher, run.store, found, runner.options,
                                                    settings.distribution_samples)
            if point != Point():             # the rest of this point (other levels) on its own prompts
                runner.run_each([c for c in at_n if not in_stages(c)], run.store, shows_k(config))
    runner.prompts, runner.options = prompts, options
    runner.run_each([c for c in combos if not in_stages(c) and Point().holds(c)], run.store, shows_k(config))
    results = analyze(run.store.current(), run.deciders.get(Point()))   # its looks, not judged again
    return SweepOutcome(results, staged_verdicts(results), endings)


class SweepRun:
    """The sweep's targets, each under its budget and decided look by look, and the combinations on their own."""

    def __init__(self, config: SweepConfig, backend: Backend, store: RowStore, reporter: Reporter,
                 clock: Callable[[], float]):
        self.config, self.backend, self.store, self.reporter, self.clock = config, backend, store, reporter, clock
        self.deciders: dict[Point, Decider] = {}     # per point of the axes: each look costs what changed since

    # ------------------------------------------------------------------ one target
    def target(self, run: TargetRun, point: Point, more: int) -> Ending:
        """A target's stages: before each, the decision on the stages before it (the sweep's own verdict rule)
        says whether to stop and who measures; the budget is checked before every candidate's step."""
        plan, rows = run.plan, run.rows
        self.reporter.note(f"{plan.label}: {plan.design.label} — {plan.why}; {plan.stages.describe()}")
        budget = Budget(self.config.settings.budget_s, self.clock, self._spent(plan), self.clock())
        done = max((measured_before(rows.row(c)) for c in plan.candidates.values()), default=0)
        last = max(plan.stages.horizon, done if more else 0) + more if plan.candidates else 0
        run.reach(last)
        decision = self.decide(plan.label, point, 0)
        looks_before = len(b.looks) if done and (b := self.decide(plan.label, point, None)) is not None else 0
        ending = Ending.STAGES_DONE
        for stage in range(last):
            if decision is not None and decision.final(more):
                break
            run.plan = plan = replace(plan, stages=plan.stages.sized(stage, decision))   # as measured costs ask
            if not run.alive(decision):
                break         # nothing left to measure, at this stage or any later one (--more)
            todo = run.owed(stage, decision)
            if todo and budget.over():
                ending = Ending.BUDGET
                break
            if todo and run.stage(stage, todo, budget):
                ending = Ending.BASELINE_FAILED
                break
            decision = self.decide(plan.label, point, stage + 1)          # the look: once, after the stage
            if todo:
                self.looked(plan, rows, decision, budget, looks_before)
                if budget.over() and run.owed(stage, decision, names=list(todo)):
                    ending = Ending.BUDGET
                    break
        if decision is not None and decision.final(more) and ending is Ending.STAGES_DONE:
            ending = Ending.DECIDED
        baseline = rows.row(plan.baseline)
        if ending in (Ending.DECIDED, Ending.STAGES_DONE) and (baseline is None or not baseline.requests):
            # nothing to compare (no candidates, or all refused before a server started): the target alone, once
            ending = Ending.BASELINE_FAILED if run.stage(0, {}, budget) else ending
        self._ended(run, ending, budget, point)
        return ending

    def _ended(self, run: TargetRun, ending: Ending, budget: Budget, point: Point) -> None:
        """Candidates never measured: not probed (the budget), or skipped (the baseline failed); then each measured
        candidate's row as its stages left it, against its target's rows and its last look."""
        plan, rows = run.plan, run.rows
        if ending is Ending.BUDGET:
            why = (f"the budget of {format_duration(budget.seconds or 0)} was spent first — run the same "
                   "command with a larger budget_s (or --more) to continue")
            for unmeasured in rows.not_probed(plan.candidates.values(), why):
                self.reporter.row_recorded(unmeasured)
            self.reporter.race(f"{plan.label}: the budget of {format_duration(budget.seconds or 0)} was spent; "
                               "run the same command with a larger budget_s (or --more) to continue")
        if ending is Ending.BASELINE_FAILED:
            for skipped in rows.skip_unmeasured(plan.baseline, plan.candidates.values(), run.baseline_failed):
                self.reporter.row_recorded(skipped)
        keys = [c.key for c in plan.candidates.values()
                if (mine := rows.row(c)) is not None and mine.status is Status.OK and mine.requests]
        decision = self.decide(plan.label, point, None) if keys else None      # as the final analysis will
        for row in analyze_rows(self.store.current(), keys, {plan.label: decision} if decision else {},
                                self.deciders[point].judgements):       # judged once: the final analysis reuses them
            name = next(n for n, c in plan.candidates.items() if c.key == row.key)
            self.reporter.note(f"{plan.label} — {name}, over {len({r.block for r in row.requests})} stage(s):")
            self.reporter.row_recorded(row)

    def decide(self, label: str, point: Point, stage: int | None, live: bool = True) -> Decision | None:
        """The decision on ``label``'s stages before ``stage`` (None: all), on its point's rows alone (a look)."""
        before, decider = {label: stage} if stage is not None else None, self.deciders.setdefault(point, Decider())
        return decider.decide(point.of(self.store.current()), before=before, live=live, only=[label]).get(label)

    def looked(self, plan: TargetPlan, rows: RowWriter, known: Decision | None, budget: Budget,
               looks_before: int) -> None:
        """After a stage: the look in words, the candidates it left behind marked so (with why), and the time
        left — at most the stages still planned at the pace so far, and never more than the budget."""
        if known is None or known.last is None:
            return
        verdict = staged_verdict(known)
        rows.eliminated({plan.candidates[n]: why for n, why in verdict.eliminated.items() if n in plan.candidates})
        left = ", ".join(f"{n} ({why})" for n, why in verdict.eliminated.items())
        look = known.last.number
        first = ": wide at the first looks, from few stages, most of the error kept for later ones" if look == 1 else ""
        self.reporter.race(f"{plan.label}: look {look} — best so far {verdict.best}: "
                           f"{verdict.quote.interval() if verdict.quote else 'n/a'} (95% over the candidates and looks "
                           f"together{first})" + (f"; left the race: {left}" if left else ""))
        spent = budget.spent()
        pace = (spent - budget.spent_before) / max(1, look - looks_before)
        remaining = pace * max(0, plan.stages.horizon - look)
        if budget.left() is not None:
            remaining = min(remaining, budget.left() or 0.0)
        self.reporter.progress(spent, remaining, at_most=True)

    def _spent(self, plan: TargetPlan) -> float:
        """Measuring time the target's staged rows recorded before this run (a resumed budget goes on)."""
        return sum(r.wall_time or 0.0 for r in self.store.current().rows_of(plan.label)
                   if r.concurrency == 1 and r.design and r.design.get("horizon"))


class TargetRun:
    """One target's stages on their servers: a stage's steps, a step's requests, each request added to its row
    as it finishes (the A/B of ``bench.py --target`` runs its stages here too)."""

    def __init__(self, launcher: Launcher, plan: TargetPlan, rows: RowWriter, reporter: Reporter):
        self.launcher, self.plan, self.rows, self.reporter = launcher, plan, rows, reporter
        self.options: MeasureOptions = launcher.runner.options
        rows.resummarise([plan.baseline, *plan.candidates.values()])     # a sweep killed in a step, resumed
        # the console numbers steps out of the most the stages may run, on from where a resumed target stopped
        self.steps_run = steps_measured(plan, {n: rows.row(c) for n, c in plan.candidates.items()},
                                        rows.row(plan.baseline))
        self.per_stage = len(stage_steps(plan.design, 0, plan.stages.stage(0), 0, list(plan.candidates)))
        self.reach(plan.stages.horizon)
        self.opening_s = 0.0            # a baseline server's load and warm-up, charged to its row's first request
        self.dead: dict[str, str] = {}  # candidates that failed in this run (a later run tries them again)
        self.baseline_failed: str | None = None

    def reach(self, last: int) -> None:     # the stages this run may measure: the plan's, or as far as --more goes
        self.last, self.total = last, last * self.per_stage

    def alive(self, decision: Decision | None) -> list[str]:
        """The candidates the decision keeps in (all before a look; the A/A control always) not failed in this run."""
        names, control = list(self.plan.candidates), [n for n, c in self.plan.candidates.items() if c.role is Role.CONTROL]
        return [n for n in (decision.members(names, always=control) if decision else names) if n not in self.dead]

    def owed(self, stage: int, decision: Decision | None, names: Sequence[str] | None = None) -> dict[str, list[int]]:
        """The prompts each candidate the decision keeps in (or ``names``) still owes ``stage``."""
        plan = self.plan
        names = self.alive(decision) if names is None else [n for n in names if n not in self.dead]
        baseline = self.rows.row(plan.baseline)
        out = {n: owed(plan, self.rows.row(plan.candidates[n]), baseline, stage) for n in names}
        return {n: prompts for n, prompts in out.items() if prompts}

    def stage(self, stage: int, todo: dict[str, list[int]], budget: Budget) -> bool:
        """Measure ``stage`` for the candidates of ``todo`` (each its prompts still owed); True: the baseline
        failed (it ends the target). A candidate's step starts only while the budget lasts."""
        plan = self.plan
        steps = stage_steps(plan.design, stage, plan.stages.stage(stage), plan.stages.run_of(stage), list(todo), todo)
        early = self.launcher.runner.skipped_or_broken(plan.baseline, {})
        if early is not None:           # the target's model missing or broken: checked before any server starts
            self.reporter.row_recorded(self.rows.store.record(early))
            self.baseline_failed = early.reason or str(early.status)
            return True
        slots: dict[int, Session] = {}
        ids: dict[int, str] = {}        # each baseline slot's session, kept after its server stops
        try:
            for position, step in enumerate(steps):
                if step.candidate is not None and budget.over():
                    break
                self.step(stage, step, slots, ids)
                for slot in [s for s in slots if not any(t.baseline == s for t in steps[position + 1:])]:
                    self.launcher.stop(slots.pop(slot))
        except BaselineFailed as failed:
            self.baseline_failed = failed.reason
        finally:
            self.rows.summarise()          # the rows the steps added requests to (Ctrl-C included), the baseline's
            for session in slots.values():
                self.launcher.stop(session)
        for step in steps:          # a bracketed candidate is compared with the baseline server after it too
            for slot in step.compared_with[1:]:
                if step.candidate is not None and slot in ids:
                    self.rows.bracket(plan.candidates[step.candidate], stage, ids[slot])
        return self.baseline_failed is not None

    # ------------------------------------------------------------------ one step
    def step(self, stage: int, step: StageStep, slots: dict[int, Session], ids: dict[int, str]) -> None:
        """The servers of one step (the stage's baseline server it needs, a candidate's own) and its requests in
        order, each added to its row as it finishes. A candidate that fails keeps what it measured and leaves the
        target's stages; a baseline that fails ends them."""
        name = step.candidate
        combo = self.plan.baseline if name is None else self.plan.candidates[name]
        self.steps_run += 1
        beside = ", beside the stage's baseline server" if self.plan.design is Design.INTERLEAVED and name else ""
        self.reporter.combination_started(self.steps_run, self.total or self.steps_run,
                                          f"{combo.title(True)} [stage {stage + 1}/{self.last}{beside}]",
                                          at_most=True)
        early = self.launcher.runner.skipped_or_broken(combo, {}) if name is not None else None
        if early is not None:             # a model missing or broken: checked before any server starts
            kept = row.requests if (row := self.rows.row(combo)) else ()
            self.reporter.row_recorded(self.rows.store.record(replace(early, requests=kept)))
            self.dead[name or ""] = early.reason or str(early.status)
            return
        base = self._baseline_server(step.baseline, slots, ids) if step.baseline is not None else None
        sessions: dict[Side, Session] = {Side.BASELINE: base} if base is not None else {}
        clock = Charges(self.launcher.clock)
        try:
            if name is not None:
                sessions[Side.CANDIDATE] = self.launcher.open(combo, beside=base is not None)
                self.launcher.warm(sessions[Side.CANDIDATE], self.plan.prompts, self.options)
            self._requests(stage, step, sessions, [ids[s] for s in step.compared_with if s in ids], clock)
        except (LaunchFailed, RequestFailed) as failed:
            self._failed(name, combo, failed, sessions, clock)
            return
        finally:
            if name is not None and Side.CANDIDATE in sessions:
                self.launcher.stop(sessions[Side.CANDIDATE])
        self._step_done(name, combo, sessions, clock)

    def _requests(self, stage: int, step: StageStep, sessions: dict[Side, Session], compared: list[str],
                  clock: Charges) -> None:
        base_row = self.rows.row(self.plan.baseline)
        known = answers_of(base_row.requests) if base_row is not None else {}     # second turns' context
        done: dict[Side, list[RequestRecord]] = {Side.BASELINE: [], Side.CANDIDATE: []}
        self.reporter.benchmarking()
        for number, request in enumerate(step.requests, 1):
            done[request.side].append(self.request(stage, request, sessions, compared, known, clock))
            self.reporter.request_done(number, len(step.requests))
        shown = done[Side.CANDIDATE] if step.candidate is not None else done[Side.BASELINE]
        rates = [r.decode_tps for r in shown if r.decode_tps]
        self.reporter.measured(statistics.fmean(rates) if rates else None,
                               acceptance(shown)[2] if step.candidate else None,
                               step.candidate is not None and self.plan.candidates[step.candidate].is_speculative)

    # ------------------------------------------------------------------ one request
    def request(self, stage: int, request: Request, sessions: dict[Side, Session], compared: list[str],
                known: dict, clock: Charges) -> RequestRecord:
        """Measure one request and add it to its side's row at once (with the time since that row's last)."""
        session = sessions[request.side]
        prompt = self.plan.prompts[request.prompt]
        try:
            record = measure_one(session.server, with_context(prompt, known), self.options,
                                 max_tokens=self.options.max_tokens,
                                 seed=request_seed(self.options.seed, request.run, request.prompt), run=request.run)
        except (RequestError, ServerError) as exc:
            raise RequestFailed(request.side, explain_failure(session.server, exc)) from None
        candidate = sessions.get(Side.CANDIDATE)
        record = replace(record, session=session.id, block=stage,
                         seen_before=session.stateful and record.prompt_id in session.seen,
                         compared_with=list(compared) if request.side is Side.CANDIDATE else None,
                         beside=candidate.id if request.side is Side.BASELINE and candidate is not None else None)
        session.seen.add(record.prompt_id)
        if request.side is Side.BASELINE:
            if record.text is not None:
                known.setdefault(record.prompt_id, record.text)        # the target's own first answer
            self._baseline_record(session, [record], clock.take(candidate is None))
        else:
            assert candidate is not None
            self.rows.measured(candidate.combo, candidate, [record], clock.take(True))
        return record

    def _step_done(self, name: str | None, combo: Combination, sessions: dict[Side, Session], clock: Charges) -> None:
        """The step's rest of time and what its servers held, on their rows; how a candidate stands so far."""
        base = sessions.get(Side.BASELINE)
        if base is not None:
            base.memory = base.server.memory_use()                 # its server runs on: the most so far
            self._baseline_record(base, [], clock.take(name is None), summarise=False)   # at the stage's end
        if name is None:
            return
        row = self.rows.measured(combo, sessions[Side.CANDIDATE], [], clock.take(True))
        baseline = self.rows.row(self.plan.baseline)
        if row.role is Role.SPECULATIVE and baseline is not None:    # its own requests only (the looks pool more)
            speed = own_speedup(row, baseline, noise_floor=self.launcher.runner.settings.noise_floor)
            self.reporter.note(f"{name} so far ({len(row.requests)} requests): {describe_subset(speed)}")

    # ------------------------------------------------------------------ the baseline's servers and failures
    def _baseline_server(self, slot: int, slots: dict[int, Session], ids: dict[int, str]) -> Session:
        if slot not in slots:
            started = self.launcher.clock()
            try:
                slots[slot] = self.launcher.open(self.plan.baseline)
                self.launcher.warm(slots[slot], self.plan.prompts, self.options)
            except LaunchFailed as failed:
                self._baseline_failure(failed.error, failed.session)
            finally:
                self.opening_s += self.launcher.clock() - started
            ids[slot] = slots[slot].id
        return slots[slot]

    def _baseline_record(self, session: Session, new: list[RequestRecord], wall: float, summarise: bool = True) -> None:
        """The baseline's new requests on its row, with the time its server took to start; a baseline that turned
        out to speculate ends the target (nothing may be compared with it)."""
        if session.methods is None and new:
            session.methods = session.server.active_methods()     # /slots fills in once a request ran
        row = self.rows.measured(self.plan.baseline, session, new, wall + self.opening_s, summarise)
        self.opening_s = 0.0
        if row.status is Status.ERROR:
            self.reporter.failed(row.reason or "the baseline failed", None)
            raise BaselineFailed(row.reason or "the baseline failed")

    def _failed(self, name: str | None, combo: Combination, failed: LaunchFailed | RequestFailed,
                sessions: dict[Side, Session], clock: Charges) -> None:
        """Every request measured is on its row already; a failure of the baseline's server ends the target's
        stages, one of the candidate's own ends its part in them."""
        if name is None or (isinstance(failed, RequestFailed) and failed.side is Side.BASELINE):
            if name is not None and Side.CANDIDATE in sessions:
                self.rows.measured(combo, sessions[Side.CANDIDATE], [], clock.take(True))
            self._baseline_failure(failed.error, sessions.get(Side.BASELINE))
        reason = self._report(failed.error)
        session = sessions.get(Side.CANDIDATE) or (failed.session if isinstance(failed, LaunchFailed) else None)
        self.rows.failed(combo, reason, session, [], clock.take(True),
                         inactive=isinstance(failed, LaunchFailed) and failed.inactive)
        self.dead[name or ""] = reason

    def _baseline_failure(self, error: Exception, session: Session | None) -> None:
        """With nothing measured before, the baseline's row is an error (else it keeps what it measured); ends
        the stage and the target's stages."""
        reason = self._report(error)
        row = self.rows.row(self.plan.baseline)
        if row is None or not row.requests:
            self.rows.failed(self.plan.baseline, reason, session, [], 0.0)
        raise BaselineFailed(reason)

    def _report(self, error: Exception) -> str:
        fix = getattr(error, "fix", None)
        self.reporter.failed(first_line(error), fix or None, *log_of(error))
        return reason_of(error)
