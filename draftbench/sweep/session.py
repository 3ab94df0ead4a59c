"""The sweep: every planned combination, saved after each one, resumable, interruptible.

Order and console output follow upstream draftbench. The session owns the results file: it
opens (or resumes) it, hands each pending combination to the runner, re-analyses and rewrites
the file atomically after every row, and writes the report at the end — also after Ctrl-C.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from ..analysis.busy import busy_before, busy_row
from ..analysis.concurrency import levels
from ..analysis.context_length import lengths as context_lengths
from ..analysis.verdict import analyze
from ..backends import get_backend
from ..backends.base import Backend
from ..common.errors import ConfigError, ResultsFileError
from ..config.long_documents import LONG_CATEGORIES
from ..config.prompts import prompts_for
from ..lifetime import machine_load
from ..lifetime.process import prepare_to_start_servers
from ..measure.sequential import MeasureOptions
from ..results.file import ResultsFile, Row, now_iso, save_results
from ..results.findings import Code
from ..results.kinds import Role
from ..results.output_paths import logs_dir_for
from . import long_context
from .config_file import SweepConfig
from .console import Console, Reporter
from .estimate import Estimator, total_s
from .passes import in_passes, run_passes
from .plan import Combination, plan, shows_k
from .race import AdaptiveSearch, may_continue
from .race_plan import race_costs
from .resume import open_results
from .runner import CombinationRunner

EXIT_OK, EXIT_ERROR, EXIT_CONFIG, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def default_paths(config: SweepConfig, results: str | None, chart: str | None) -> tuple[Path, Path]:
    results_path = Path(results) if results else Path("results") / f"{config.default_stem()}.json"
    chart_path = Path(chart) if chart else results_path.with_suffix(".html")
    return results_path, chart_path


class Sweep:
    def __init__(self, config: SweepConfig, results_path: Path, chart_path: Path | None, *,
                 reporter: Reporter | None = None, cdn: bool = False, backend: Backend | None = None):
        self.config = config
        self.results_path = results_path
        self.chart_path = chart_path
        self.reporter = reporter if reporter is not None else Console()
        self.cdn = cdn
        self.backend = backend if backend is not None else get_backend(config.backend)
        self.results: ResultsFile | None = None
        self.monitor: machine_load.Monitor | None = None     # reads the machine's load while the sweep runs

    def run(self) -> int:
        settings = self.config.settings
        for warning in self.config.warnings:
            self.reporter.warning(str(warning))
        # One clear error before anything starts if the backend cannot run at all, or a target's RPC
        # endpoint does not answer (config problems: exit 2, nothing started).
        self.backend.check_ready_to_run(settings)
        problems = self.backend.target_problems(self.config.targets, settings)
        lengths = context_lengths(settings)
        if lengths:      # a length a model cannot take (trained context, KV memory) is refused here
            problems += long_context.length_problems(self.config, self.backend.context_problem, settings.max_tokens,
                                                     lengths, max(levels(settings)))
        if problems:
            raise ConfigError(self.config.source, problems)
        prepare_to_start_servers(results=self.results_path)   # a server left by a crashed run: stop here
        results = open_results(self.config, self.backend, self.results_path)
        results = self._load_before(results)     # before any server of ours runs: the others' load alone
        combos = plan(self.config)
        done = {r.key for r in results.results if r.measured}   # eliminated: measured as far as the race wanted
        selection = prompts_for(settings)      # a standard set is fetched into the cache on first use
        prompts = selection.prompts
        # the sample's seed and ids; long prompts record theirs when they are built (_run_lengths)
        results = replace(results, prompt_set=selection.record() if not lengths else results.prompt_set)
        options = MeasureOptions.from_settings(settings)
        runner = CombinationRunner(self.backend, self.config.backend, settings, prompts, options,
                                   logs_dir_for(self.results_path), self.reporter)
        # Rows with blocks still to measure (or left open by a race) are not "done": they are measured further.
        adaptive = settings.search == "adaptive"
        open_rows = {r.key for r in results.results if may_continue(r)}      # blocks still to measure
        n_done = sum(1 for c in combos if c.key in done and c.key not in open_rows)
        n_open = sum(1 for c in combos if c.key in open_rows)
        self.reporter.sweep_header(n_targets=len(self.config.targets), n_drafts=len(self.config.drafts),
                                   n_candidates=len(self.config.candidates),
                                   n_runs=len(combos), n_prompts=len(prompts) if not lengths else
                                   len(LONG_CATEGORIES) * len(lengths), runs=options.runs,
                                   max_tokens=options.max_tokens, backend=self.config.backend,
                                   resumed_from=str(self.results_path) if n_done or n_open else None, n_done=n_done,
                                   n_open=n_open)
        for note in self.backend.sweep_notes(settings):   # e.g. what LM Studio's REST path cannot measure
            self.reporter.note(note)
        self.results = analyze(results)
        save_results(self.results, self.results_path)
        interrupted, complete = False, True
        self.monitor = machine_load.Monitor().start()
        try:
            if adaptive and self._race_pays(combos, prompts, options):
                estimator = Estimator.for_results_path(self.config, len(prompts), self.results_path)
                complete = AdaptiveSearch(self.config, runner, self, self.reporter, prompts, options,
                                          estimator=estimator).run(combos)
            elif lengths:
                self._run_lengths(combos, {k for k in done if k not in open_rows}, runner, options, lengths)
            else:
                self._run_exhaustive(combos, done, runner, prompts, options)
        except KeyboardInterrupt as exc:
            interrupted = True
            self.reporter.interrupted(str(exc) or "Ctrl-C", str(self.results_path))
        finally:
            self.monitor.stop()
            results = self.results = analyze(self.results)
            save_results(results, self.results_path)
            chart_written = self.chart_path is not None and self._write_chart(results)
        if interrupted:
            return EXIT_INTERRUPTED
        self.reporter.summary(results, str(self.results_path), str(self.chart_path) if chart_written else None)
        # Eliminated candidates are a finished race's outcome, not a failure.
        return EXIT_INCOMPLETE if not complete or any(not r.measured for r in results.results) else EXIT_OK

    def _race_pays(self, combos: list[Combination], prompts: list, options: MeasureOptions) -> bool:
        """Race only where it can save time (see race_plan.py); a race already under way goes on."""
        assert self.results is not None
        if any(r.race for r in self.results.results):
            return True
        costs = race_costs(self.config, self.backend, combos, prompts, options.runs, self.results_path)
        if not costs.race_saves_time:
            self.reporter.note(f"adaptive search: {costs.describe()}")
        return costs.race_saves_time

    def current(self) -> ResultsFile:
        assert self.results is not None
        return self.results

    def _load_before(self, results: ResultsFile) -> ResultsFile:
        """Read the machine's load for a second, record it, and say so up front when it is busy."""
        load = machine_load.now(machine_load.BEFORE_WINDOW_S)
        finding = busy_before(load)
        if finding is not None:
            self.reporter.warning(finding.message)
        return replace(results, load_before=[*(results.load_before or ()), {"at": now_iso(), **load.to_dict()}])

    def _with_machine_load(self, row: Row) -> Row:
        """The row with the load of the window it was just measured in (its wall time grew by that much)."""
        prior = self.current().row(row.key)
        summary = prior.machine_load if prior is not None else row.machine_load
        grew = (row.wall_time or 0.0) - ((prior.wall_time or 0.0) if prior is not None else 0.0)
        load = self.monitor.over_last(grew) if self.monitor is not None and grew > 0 else None
        if load is not None:
            summary = machine_load.add_window(summary, load)
        row = replace(row, machine_load=summary)
        finding = busy_row(row)
        kept = tuple(w for w in row.warnings if w.code is not Code.BUSY_MACHINE)
        return replace(row, warnings=kept + ((finding,) if finding else ()))

    def record(self, row: Row) -> Row:
        """Add (or replace) a row with the machine's load while it was measured, re-analyse and rewrite the
        file; the row as analysed."""
        row = self._with_machine_load(row)
        self.results = analyze(self.current().with_row(row))
        save_results(self.results, self.results_path)
        return self.results.row(row.key) or row

    def _run_exhaustive(self, combos: list[Combination], done: set, runner: CombinationRunner,
                        prompts: list, options: MeasureOptions) -> None:
        """Each target's one-stream candidates in the design's passes (``schedule.py``), then what runs
        on its own (other concurrency levels, drafts alone) in plan order."""
        estimator = Estimator.for_results_path(self.config, len(prompts), self.results_path)
        run_passes(self.config, self.backend, combos, self, self.reporter, runner, list(prompts), options, estimator)
        self._run_pending([c for c in combos if not in_passes(c)], done, runner)

    def _run_lengths(self, combos: list[Combination], done: set, runner: CombinationRunner, options: MeasureOptions,
                     lengths: tuple[int, ...]) -> None:
        """The context axis: per target, its long prompts cut with its own tokenizer (skipped when every
        combination is measured already), then each length as a sweep of its own, shortest first."""
        built: dict[str, long_context.LongPrompts] = {}
        for target in self.config.targets:
            mine = [c for c in combos if c.target.label == target.label and c.context_tokens is not None]
            if all(c.key in done for c in mine):
                continue
            built[target.label] = long_context.build(runner, target, lengths, filler=self.config.settings.context_filler,
                                                     seed=self.config.settings.seed)
            changed = long_context.changed_sources(self.current().prompt_set, built[target.label])
            if changed:
                raise ResultsFileError(f"{self.results_path} was measured on other long prompts: {changed}",
                                       "use --results with a new file name, or the Python that made the file")
            self.results = replace(self.current(), prompt_set=long_context.prompt_set_record(
                self.current().prompt_set, built))
            for n in lengths:
                runner.prompts = built[target.label].by_length[n]
                at_n = [c for c in mine if c.context_tokens == n]
                estimator = Estimator.for_results_path(self.config, len(runner.prompts), self.results_path)
                run_passes(replace(self.config, targets=(target,)), self.backend, at_n, self, self.reporter, runner,
                           list(runner.prompts), options, estimator)
                self._run_pending([c for c in at_n if not in_passes(c)], done, runner)

    def _run_pending(self, combos: list[Combination], done: set, runner: CombinationRunner) -> None:
        """Run what is not measured yet into ``self.results``; the file is rewritten after every row,
        so an interruption (the caller catches it) loses at most the combination in progress."""
        failed_baselines: dict[str, str] = {}
        estimator = Estimator.for_results_path(self.config, len(runner.prompts), self.results_path)
        sweep_start = time.perf_counter()
        show_k = shows_k(self.config)
        for index, combo in enumerate(combos, 1):
            if combo.key in done:
                continue
            self.reporter.combination_started(index, len(combos), combo.title(show_k))
            row = runner.run(combo, index, failed_baselines, results=self.results)
            if combo.role is Role.BASELINE and not row.ok:
                failed_baselines[combo.target.label] = row.reason or row.status
            self.reporter.row_recorded(self.record(row))
            estimator.add(self.current())     # the ETA is --dry-run's estimate, learning from this sweep's rows
            eta = total_s(estimator, [c for c in combos[index:] if c.key not in done])
            self.reporter.progress(time.perf_counter() - sweep_start, eta)

    def _write_chart(self, results: ResultsFile) -> bool:
        from ..report import write_report
        assert self.chart_path is not None
        try:
            write_report(results, self.chart_path, cdn=self.cdn)
            return True
        except Exception as exc:  # the results are what matter; never lose them over a chart
            self.reporter.warning(f"could not write the report {self.chart_path}: {exc}; regenerate it with "
                                  f"--chart-only --results {self.results_path}")
            return False
