"""One whole sweep on any backend, from Python: plan → stages → analysis (pyperf's ``Runner`` is the model).

    from draftbench.sweep import load_config, run_sweep

    config = load_config("configs/demo_sweep.json")
    outcome = run_sweep(config)                      # or run_sweep(config, backend=MyBackend())
    for verdict in outcome.verdicts.values():       # typed, per target (analysis/stage_verdict.py)
        print(verdict.verdict, verdict.best, verdict.quote.text() if verdict.quote else "")
    outcome.results                                  # the analysed results file (save_results writes it)

``backend`` is any object implementing the backend contract (``draftbench/backends/base.py``: launch a
server for a ``LaunchSpec``, stream completions, report draft counters); by default the config's own
(llama.cpp, vLLM or LM Studio). ``store`` receives every row as it is measured (the command line's saves
the file after each; the default keeps them in memory); ``clock`` times the budget (a simulator passes
its own). ``more``: stages beyond the plan for every target left unresolved (``--more``).

The loops are the call depth: :func:`run_sweep` → :meth:`SweepRun.target` (one target's stages, under its
budget: ``sweep/stages.py``) → ``StageRunner.run`` (one stage) → a candidate's step → a request. The
command line (``cli/sweep_cli.py`` through ``sweep/session.py``) and the simulator
(``benchmarks/verdicts.py``) both run sweeps through here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..analysis.context_length import at_length, each_length
from ..analysis.context_length import lengths as context_lengths
from ..analysis.decision import Decision, decide
from ..analysis.stage_verdict import StagedVerdict, staged_verdict
from ..analysis.temperature_axis import at_temperature, each_temperature
from ..analysis.verdict import analyze
from ..backends import get_backend
from ..backends.base import Backend
from ..common.errors import ResultsFileError
from ..common.numbers import temperature_text
from ..config.model_ref import ModelRef
from ..config.prompts import Prompt, prompts_for
from ..measure.sequential import MeasureOptions
from ..results.file import SCHEMA_VERSION, ResultsFile
from ..results.kinds import Role, Status
from . import distribution_check, long_context
from .config_file import SweepConfig
from .console import Reporter, format_duration
from .estimate import Estimator
from .launcher import Launcher, next_session_number
from .plan import Combination, plan, shows_k
from .runner import CombinationRunner, RunnerIO
from .schedule import Design, stage_steps
from .stage_rows import RowStore, RowWriter, StagedDesign, in_stages
from .stage_runner import StageRunner, TargetPlan
from .stages import Budget, Ending, StageLoop
from .target_plan import target_plan


class MemoryStore:
    """A :class:`RowStore` without a file (analysed once at the end: the stages decide on raw rows)."""

    def __init__(self, results: ResultsFile):
        self.results = results

    def current(self) -> ResultsFile:
        return self.results

    def record(self, row):
        self.results = self.results.with_row(row)
        return row

    def describe_prompts(self, prompt_set: dict) -> None:
        self.results = replace(self.results, prompt_set=prompt_set)


def empty_results(config: SweepConfig) -> ResultsFile:
    return ResultsFile(name=config.name, hardware=config.hardware, backend=config.backend,
                       model_family=config.model_family, settings=config.settings.to_dict(),
                       schema_version=SCHEMA_VERSION)


@dataclass(frozen=True)
class SweepOutcome:
    """What :func:`run_sweep` returns: the analysed results, each staged target's verdict and how it ended
    (keyed by the target's label; on the context axis by ``"<label> at <N> tokens"``, one per length)."""

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
    """Run the whole sweep ``config`` describes on ``backend`` and return it analysed."""
    run = SweepRun(config, backend or get_backend(config.backend), store or MemoryStore(empty_results(config)),
                   reporter or Reporter(), clock)
    return run.all(logs_dir or Path("results") / "logs", more)


class SweepRun:
    """The sweep's loop over its targets, then the combinations measured on their own."""

    def __init__(self, config: SweepConfig, backend: Backend, store: RowStore, reporter: Reporter,
                 clock: Callable[[], float]):
        self.config, self.backend, self.store, self.reporter, self.clock = config, backend, store, reporter, clock
        self.endings: dict[str, Ending] = {}
        self._looks_before: dict[str, int] = {}      # looks a target had before this run (a resumed sweep)

    def all(self, logs_dir: Path, more: int) -> SweepOutcome:
        settings = self.config.settings
        combos = plan(self.config)
        prompts = prompts_for(settings).prompts
        options = MeasureOptions.from_settings(settings)
        runner = CombinationRunner(self.backend, self.config.backend, settings, prompts, options,
                                   RunnerIO(logs_dir, self.reporter, clock=self.clock))
        launcher = Launcher(runner, self.reporter, self.clock, next_session_number(self.store.current()))
        lengths = context_lengths(settings)
        for target in self.config.targets:
            for heat in settings.temperatures if settings.temperature_axis else (None,):   # the temperature axis
                runner.options = point = options if heat is None else replace(options, temperature=heat)
                for length, measured in self._prompts_of(target, runner, prompts, lengths, more):
                    runner.prompts = measured
                    at_n = [c for c in combos if c.target.label == target.label and c.context_tokens == length
                            and c.temperature == heat]
                    self._one_length(at_n, target.label, length, launcher, point, more, heat)
                    if length is not None:       # the rest of this length (other levels) on its own prompts
                        self.plain([c for c in at_n if not in_stages(c)], runner)
        runner.prompts, runner.options = prompts, options
        self.plain([c for c in combos if not in_stages(c) and c.context_tokens is None], runner)
        return self._outcome(lengths)

    def _one_length(self, combos: list[Combination], label: str, length: int | None, launcher: Launcher,
                    options: MeasureOptions, more: int, heat: float | None = None) -> None:
        """A target's stages at one prompt length (``None``: the sweep has no context axis) and temperature (``None``:
        no temperature axis); then, above temperature 0, the output-distribution check where it is asked for."""
        settings = self.config.settings
        found = target_plan(settings, self.backend, combos, label, launcher.runner.prompts,
                            _point(self.store.current(), length, heat))
        if found is not None:
            key = label + (f" at {length} tokens" if length is not None else "") + \
                (f" at temperature {temperature_text(heat)}" if heat is not None else "")
            self.endings[key] = self.target(found, launcher, options, more, length, heat)
            if settings.distribution_samples and options.temperature > 0:
                distribution_check.check_target(launcher, self.store, found, options, settings.distribution_samples)

    def _prompts_of(self, target: ModelRef, runner: CombinationRunner, prompts: list[Prompt],
                    lengths: tuple[int, ...], more: int) -> list[tuple[int | None, list[Prompt]]]:
        """The prompts each length measures: the sweep's own without a context axis; else the target's long
        prompts, cut with its own tokenizer (not when every length of the target is decided already)."""
        if not lengths:
            return [(None, list(prompts))]
        if self._settled(target.label, lengths, more):
            return []
        built = long_context.build(runner, target, lengths, filler=self.config.settings.context_filler,
                                   seed=self.config.settings.seed)
        record = self.store.current().prompt_set
        changed = long_context.changed_sources(record, built)
        if changed:
            raise ResultsFileError(f"the results file was measured on other long prompts: {changed}",
                                   "use --results with a new file name, or the Python that made the file")
        self.store.describe_prompts(long_context.prompt_set_record(record, {target.label: built}))
        return [(n, built.by_length[n]) for n in lengths]

    def _settled(self, label: str, lengths: tuple[int, ...], more: int) -> bool:
        """Every length of ``label`` measured and decided (a resumed sweep need not cut its prompts again)."""
        results = self.store.current()
        rows = [r for r in results.rows_of(label) if r.context_tokens is not None]
        if {r.context_tokens for r in rows if r.measured} != set(lengths) or not all(r.measured for r in rows):
            return False
        return all(d.final(more) for n in lengths for d in decide(at_length(results, n)).values())

    def _outcome(self, lengths: tuple[int, ...]) -> SweepOutcome:
        results = analyze(self.store.current())
        verdicts: dict[str, StagedVerdict] = {}
        for heat, hot in each_temperature(results):
            for length, part in each_length(hot):
                for target, found in decide(part).items():
                    key = target + (f" at {length} tokens" if length is not None else "") + \
                        (f" at temperature {temperature_text(heat)}" if heat is not None else "")
                    verdicts[key] = staged_verdict(found)
        return SweepOutcome(results, verdicts, dict(self.endings))

    # ------------------------------------------------------------------ one target
    def target(self, plan: TargetPlan, launcher: Launcher, options: MeasureOptions, more: int,
               length: int | None = None, heat: float | None = None) -> Ending:
        rows = RowWriter(self.store, launcher.runner, StagedDesign(plan.design, plan.stages.horizon,
                                                                   plan.stages.size, plan.stages.fixed))
        total = plan.stages.horizon * len(stage_steps(plan.design, 0, plan.stages.stage(0), 0, list(plan.candidates)))
        runner = StageRunner(launcher, plan, rows, self.reporter, options, (steps_measured(plan, rows), total))
        self.reporter.note(f"{plan.label}: {plan.design.label} — {plan.why}; {plan.stages.describe()}")
        settings = self.config.settings
        decider = self._decider(plan.label, length, heat)
        before = decider(10 ** 6)
        self._looks_before[plan.label] = len(before.looks) if before is not None else 0
        loop = StageLoop(plan, runner, rows, decider)
        budget = Budget(settings.budget_s, self.clock, self._spent(plan), self.clock())
        ending = loop.run(budget, more, after_stage=lambda stage: self._looked(plan, decider(stage + 1), rows, budget))
        if ending is Ending.BUDGET:
            self._not_probed(plan, rows, budget)
        if ending is Ending.BASELINE_FAILED:
            self._skip_unmeasured(plan, rows, runner.baseline_failed)
        self._rows_in_full(plan, rows)
        return ending

    def _rows_in_full(self, plan: TargetPlan, rows: RowWriter) -> None:
        """Each measured candidate's row as its stages left it (by category, inside the draft, output check)."""
        for name, combo in plan.candidates.items():
            row = rows.row(combo)
            if row is not None and row.status is Status.OK and row.requests:
                self.reporter.note(f"{plan.label} — {name}, over {len({r.block for r in row.requests})} stage(s):")
                self.reporter.row_recorded(row)

    def _decider(self, label: str, length: int | None, heat: float | None = None) -> Callable[[int], Decision | None]:
        """The decision on a target's stages before a given one, at its prompt length and temperature (asked twice
        per stage on the same rows: kept)."""
        seen: dict[int, tuple[ResultsFile, Decision | None]] = {}

        def decided(stage: int) -> Decision | None:
            results = self.store.current()
            if stage in seen and seen[stage][0] is results:
                return seen[stage][1]
            found = decide(_point(results, length, heat), before={label: stage}, live=True).get(label)
            seen[stage] = (results, found)
            return found
        return decided

    def _spent(self, plan: TargetPlan) -> float:
        """Measuring time the target's staged rows recorded before this run (a resumed budget goes on)."""
        return sum(r.wall_time or 0.0 for r in self.store.current().rows_of(plan.label)
                   if r.concurrency == 1 and r.design and r.design.get("horizon"))

    def _looked(self, plan: TargetPlan, known: Decision | None, rows: RowWriter, budget: Budget) -> None:
        """After a stage: the look in words, the candidates it left behind marked so (with why), and the time
        left — at most the stages still planned at the pace so far, and never more than the budget."""
        if known is None or known.last is None:
            return
        verdict = staged_verdict(known)
        for name, why in verdict.eliminated.items():
            row = rows.row(plan.candidates[name]) if name in plan.candidates else None
            if row is not None and row.status is Status.OK:
                self.store.record(replace(row, status=Status.ELIMINATED, reason=f"eliminated: {why}"))
        left = ", ".join(f"{n} ({why})" for n, why in verdict.eliminated.items())
        look = known.last.number
        self.reporter.race(f"{plan.label}: look {look} — best so far {verdict.best}: "
                           f"{verdict.quote.interval() if verdict.quote else 'n/a'} (95% over the candidates and "
                           "looks together)" + (f"; left the race: {left}" if left else ""))
        spent = budget.spent()
        pace = (spent - budget.spent_before) / max(1, look - self._looks_before.get(plan.label, 0))
        remaining = pace * max(0, plan.stages.horizon - look)
        if budget.left() is not None:
            remaining = min(remaining, budget.left() or 0.0)
        self.reporter.progress(spent, remaining, at_most=True)

    def _not_probed(self, plan: TargetPlan, rows: RowWriter, budget: Budget) -> None:
        why = (f"the budget of {format_duration(budget.seconds or 0)} was spent first — run the same "
               "command with a larger budget_s (or --more) to continue")
        for combo in plan.candidates.values():
            if rows.row(combo) is None:
                self.reporter.row_recorded(rows.not_probed(combo, why))
        self.reporter.race(f"{plan.label}: the budget of {format_duration(budget.seconds or 0)} was spent; "
                           "run the same command with a larger budget_s (or --more) to continue")

    def _skip_unmeasured(self, plan: TargetPlan, rows: RowWriter, reason: str | None) -> None:
        """The baseline failed: its candidates not measured yet are skipped, with why (as upstream) — all of them
        when it failed before measuring anything; a candidate's own error row is kept."""
        baseline = rows.row(plan.baseline)
        measured_before = baseline is not None and bool(baseline.requests)
        reason = reason or (baseline.reason if baseline is not None else None) or "not measured"
        why = f"skipped: the baseline of {plan.label} failed ({reason.splitlines()[0]})"
        for combo in plan.candidates.values():
            row = rows.row(combo)
            if row is None or (not measured_before and row.status is Status.OK):
                self.reporter.row_recorded(rows.skipped(combo, why.splitlines()[0]))

    # ------------------------------------------------------------------ on their own
    def plain(self, combos: list[Combination], runner: CombinationRunner) -> None:
        """Other concurrency levels, drafts alone and ceiling runs: each on a server of its own, in plan order."""
        failed: dict[str, str] = {}
        show_k = shows_k(self.config)
        for index, combo in enumerate(combos, 1):
            row = self.store.current().row(combo.key)
            if row is not None and row.measured:
                continue
            self.reporter.combination_started(index, len(combos), combo.title(show_k))
            row = self.store.record(runner.run(combo, index, failed, results=self.store.current()))
            if combo.role is Role.BASELINE and not row.ok:
                failed[combo.target.label] = row.reason or row.status
            self.reporter.row_recorded(row)


def _point(results: ResultsFile, length: int | None, heat: float | None) -> ResultsFile:
    """The file as one point of the axes sees it: its prompt length's rows and its temperature's."""
    part = at_length(results, length) if length is not None else results
    return at_temperature(part, heat) if heat is not None else part


def steps_measured(plan: TargetPlan, rows: RowWriter) -> int:
    """The steps a target's rows were measured in before this run: a candidate's server session is a step, and
    so is each baseline server outside the interleaved design (there, the stage's baseline server is beside)."""
    candidates = {r.session for c in plan.candidates.values() if (row := rows.row(c)) for r in row.requests
                  if r.session}
    baseline = rows.row(plan.baseline)
    own = {r.session for r in (baseline.requests if baseline else ()) if r.session}
    return len(candidates) + (0 if plan.design is Design.INTERLEAVED else len(own))


def estimator_for(config: SweepConfig, prompts: int, results_path: Path) -> Estimator:
    return Estimator.for_results_path(config, prompts, results_path)
