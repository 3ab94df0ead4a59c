"""The sweep on the command line: the results file saved after every row, resumable, interruptible.

The session owns the results file: it opens (or resumes) it, runs the sweep through
:func:`draftbench.sweep.run.run_sweep` with a :class:`SessionStore` (every row saved in the file's journal as it
is recorded, with the machine's load while it was measured; nothing analysed until the end), and writes the
analysed file and the report at the end — also after Ctrl-C.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ..analysis.axis_points import Point, each_point
from ..analysis.busy import busy_before, busy_row
from ..analysis.concurrency import levels
from ..analysis.context_length import lengths as context_lengths
from ..analysis.decision import decide
from ..analysis.next_step import rerun_of
from ..analysis.verdict import analyze
from ..backends import get_backend
from ..backends.base import Backend
from ..common.errors import ConfigError
from ..config.long_documents import LONG_CATEGORIES
from ..config.prompts import prompts_for
from ..lifetime import machine_load
from ..lifetime.process import prepare_to_start_servers
from ..results.file import ResultsFile, Row, now_iso
from ..results.findings import Code
from ..results.output_paths import logs_dir_for
from . import long_context
from .config_file import SweepConfig
from .console import Console, Reporter
from .plan import plan
from .resume import open_results
from .run import SweepOutcome, run_sweep
from .store import RowStore, recorded_prompts

MIN_WINDOW_S = 0.001      # the shortest window a row's load is read over (its latest reading)
EXIT_OK, EXIT_ERROR, EXIT_CONFIG, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def default_paths(config: SweepConfig, results: str | None, chart: str | None) -> tuple[Path, Path]:
    results_path = Path(results) if results else Path("results") / f"{config.default_stem()}.json"
    chart_path = Path(chart) if chart else results_path.with_suffix(".html")
    return results_path, chart_path


@dataclass(frozen=True)
class RunOptions:
    """How the command line runs a sweep: plotly.js from its CDN, stages beyond the plan (``--more``), the
    clock the budget runs on."""

    cdn: bool = False
    more: int = 0
    clock: Callable[[], float] = time.perf_counter


class Sweep:
    def __init__(self, config: SweepConfig, results_path: Path, chart_path: Path | None, *,
                 reporter: Reporter | None = None, backend: Backend | None = None,
                 options: RunOptions = RunOptions()):
        self.config = config
        self.results_path = results_path
        self.chart_path = chart_path
        self.reporter = reporter if reporter is not None else Console()
        self.backend = backend if backend is not None else get_backend(config.backend)
        self.options = options
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
        selection = prompts_for(settings)      # a standard set is fetched into the cache on first use
        # the sample's seed and ids; long prompts record theirs when they are built (sweep/run.py)
        results = replace(results, prompt_set=recorded_prompts(settings, selection) or results.prompt_set)
        self._header(results, len(combos), len(selection.prompts) if not lengths else len(LONG_CATEGORIES) * len(lengths))
        for note in self.backend.sweep_notes(settings):   # e.g. what LM Studio's REST path cannot measure
            self.reporter.note(note)
        self.monitor = machine_load.Monitor().start()
        store = SessionStore(results, self.results_path, self.monitor)   # the file saved, its journal started
        outcome: SweepOutcome | None = None
        try:
            outcome = run_sweep(self.config, self.backend, store=store, reporter=self.reporter,
                                clock=self.options.clock, logs_dir=logs_dir_for(self.results_path), more=self.options.more)
        except KeyboardInterrupt as exc:
            self.reporter.interrupted(str(exc) or "Ctrl-C", str(self.results_path))
        finally:
            self.monitor.stop()
            # what run_sweep returns, analysed once, is what the console, the file and the report show
            results = self.results = outcome.results if outcome is not None else analyze(store.current())
            store.finish(results)
            chart_written = self.chart_path is not None and self._write_chart(results)
        if outcome is None:
            return EXIT_INTERRUPTED
        default_results, _ = default_paths(self.config, None, None)
        rerun = rerun_of(results, self.config.source,
                         None if self.results_path == default_results else str(self.results_path))
        self.reporter.summary(results, str(self.results_path), str(self.chart_path) if chart_written else None,
                              rerun=rerun)
        # Eliminated candidates are a finished race's outcome, not a failure; not probed ones are.
        return EXIT_OK if outcome.complete and all(r.measured for r in results.results) else EXIT_INCOMPLETE

    def _header(self, results: ResultsFile, runs: int, prompts: int) -> None:
        """What will run: how many combinations, how many done (a resumed file) and how many still in stages."""
        settings = self.config.settings
        done = {r.key for r in results.results if r.measured}
        undecided = {(t, point) for point, part in each_point(results) for t, d in decide(part).items()
                     if not d.final(self.options.more)}     # each point of the axes decided on its own rows
        open_rows = {r.key for r in results.results if r.key in done and r.ok
                     and (r.target, Point(r.context_tokens, r.temperature)) in undecided}
        self.reporter.sweep_header(n_targets=len(self.config.targets), n_drafts=len(self.config.drafts),
                                   n_candidates=len(self.config.candidates), n_runs=runs, n_prompts=prompts,
                                   runs=settings.runs, max_tokens=settings.max_tokens, backend=self.config.backend,
                                   resumed_from=str(self.results_path) if done else None,
                                   n_done=len(done - open_rows), n_open=len(open_rows),
                                   per_stage=settings.prompts_per_stage)

    def _load_before(self, results: ResultsFile) -> ResultsFile:
        """Read the machine's load for a second, record it, and say so up front when it is busy."""
        load = machine_load.now(machine_load.BEFORE_WINDOW_S)
        finding = busy_before(load)
        if finding is not None:
            self.reporter.warning(finding.message)
        return replace(results, load_before=[*(results.load_before or ()), {"at": now_iso(), **load.to_dict()}])

    def _write_chart(self, results: ResultsFile) -> bool:
        from ..report import write_report
        assert self.chart_path is not None
        try:
            write_report(results, self.chart_path, cdn=self.options.cdn)
            return True
        except Exception as exc:  # the results are what matter; never lose them over a chart
            self.reporter.warning(f"could not write the report {self.chart_path}: {exc}; regenerate it with "
                                  f"--chart-only --results {self.results_path}")
            return False


class SessionStore(RowStore):
    """The command line's row store: the results file saved as it goes (its journal), each row with the load other
    programs put on the machine while it was measured."""

    def __init__(self, results: ResultsFile, path: Path, monitor: machine_load.Monitor):
        super().__init__(results, path)
        self.monitor = monitor

    def record(self, row: Row) -> Row:
        return super().record(self._with_machine_load(row))

    def _with_machine_load(self, row: Row) -> Row:
        """The row with the load of the window it was just measured in (its wall time grew by that much)."""
        prior = self.row(row.key)
        summary = prior.machine_load if prior is not None else row.machine_load
        grew = (row.wall_time or 0.0) - ((prior.wall_time or 0.0) if prior is not None else 0.0)
        if len(row.requests) > (len(prior.requests) if prior is not None else 0):
            grew = max(grew, MIN_WINDOW_S)      # new requests in a window too short to round above 0
        load = self.monitor.over_last(grew) if grew > 0 else None
        if load is not None:
            summary = machine_load.add_window(summary, load)
        row = replace(row, machine_load=summary)
        finding = busy_row(row)
        kept = tuple(w for w in row.warnings if w.code is not Code.BUSY_MACHINE)
        return replace(row, warnings=kept + ((finding,) if finding else ()))
