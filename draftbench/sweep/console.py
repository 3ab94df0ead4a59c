"""What a sweep tells the person watching it.

:class:`Reporter` declares every event the runner and the sweep emit, each doing nothing;
:class:`Console` prints them the way upstream draftbench does. Tests pass a bare
:class:`Reporter` (or record the calls) to run the logic without output.
"""

from __future__ import annotations

import sys
import textwrap
import time
from collections.abc import Callable
from typing import TextIO

from ..analysis.comparison import describe_with_bound
from ..analysis.context_length import describe_length
from ..analysis.draft import best_k as kpredict
from ..analysis.draft.k_advice import kind
from ..analysis.draft.positions import drafted_positions
from ..analysis.next_step import for_the_sweep, rerun_of
from ..analysis.session import WITHIN_A_SESSION, category_label
from ..analysis.stats import describe_speedup
from ..analysis.summary import summary_of, verdicts_of
from ..common.numbers import duration_text
from ..common.text_safety import safe_text
from ..results.file import ResultsFile, Row
from ..results.findings import Code
from ..results.fragments import describe as describe_fragments
from ..results.kinds import Role, Status
from ..results.method_stats import describe as describe_methods

format_duration = duration_text       # the one way a duration is written (common/numbers.py)


def reason_text(row: Row) -> str:
    """A row's reason to show after its status: without a repeated ``skipped:`` (some reasons start so)."""
    reason = row.reason or ""
    prefix = f"{row.status}:"
    return reason[len(prefix):].lstrip() if reason.lower().startswith(prefix) else reason


class Reporter:
    """Every event of a sweep, in the order they happen. The base class shows nothing."""

    def warning(self, text: str) -> None: ...
    def sweep_header(self, *, n_targets: int, n_drafts: int, n_runs: int, n_prompts: int, runs: int,
                     max_tokens: int, backend: str, resumed_from: str | None, n_done: int,
                     n_candidates: int = 0, n_open: int = 0, per_stage: int = 0) -> None: ...
    def combination_started(self, index: int, total: int, title: str, at_most: bool = False) -> None: ...
    def server_starting(self) -> None: ...
    def port_retry(self, old: int, new: int) -> None: ...
    def port_moved(self, old: int, new: int) -> None: ...
    def server_ready(self, load_time_s: float | None) -> None: ...
    def note(self, text: str) -> None: ...
    def speculation_inactive(self, reason: str) -> None: ...
    def benchmarking(self) -> None: ...
    def request_done(self, done: int, total: int) -> None: ...
    def measured(self, tps: float | None, acceptance: float | None, speculative: bool) -> None: ...
    def streams_measured(self, streams: int, aggregate_tps: float | None, in_flight_max: int | None) -> None: ...
    def failed(self, message: str, fix: str | None, log_tail: str = "", log_path: str | None = None) -> None: ...
    def server_stopped(self) -> None: ...
    def race(self, text: str) -> None: ...
    def row_recorded(self, row: Row) -> None: ...
    def progress(self, elapsed_s: float, remaining_s: float | None, at_most: bool = False) -> None: ...
    def interrupted(self, why: str, results_path: str) -> None: ...
    def summary(self, results: ResultsFile, results_path: str, chart_path: str | None,
                rerun: str | None = None) -> None: ...


LOG_LINES = 12            # a failed server's log lines the console shows (the whole log's path beside them)
# A block that runs this long between two words on the console says how far it got (not only dots).
PROGRESS_EVERY_S = 60.0


class Console(Reporter):
    def __init__(self, stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic):
        self.stream = stream or sys.stdout
        self.clock = clock
        self._after_progress = False            # the last thing printed was the "Elapsed" line
        self._block: tuple[float, float] | None = None   # (when the requests began, when progress was last said)

    # Labels, reasons and server log tails reach the terminal: control sequences in them are shown, not run.
    def line(self, text: str = "") -> None:
        print(safe_text(text), file=self.stream, flush=True)
        self._after_progress = False

    def part(self, text: str) -> None:
        print(safe_text(text), end="", file=self.stream, flush=True)
        self._after_progress = False

    def warning(self, text: str) -> None:
        self.line(f"Warning: {text}")

    def sweep_header(self, *, n_targets, n_drafts, n_runs, n_prompts, runs, max_tokens, backend, resumed_from,
                     n_done, n_candidates=0, n_open=0, per_stage=0) -> None:
        self.line("=" * 60)
        more = f" + {n_candidates} candidate{'s' if n_candidates != 1 else ''}" if n_candidates else ""
        self.line(f"  Sweep: {n_targets} target{'s' if n_targets != 1 else ''} x {n_drafts} draft"
                  f"{'s' if n_drafts != 1 else ''}{more} = {n_runs} runs")
        if per_stage:
            self.line(f"  {n_prompts} prompts in the set, stages of {per_stage} fresh ones (the whole set at each "
                      f"stage when it is smaller), max_tokens {max_tokens}, backend {backend}")
        else:
            self.line(f"  {n_prompts} prompts x {runs} run(s), max_tokens {max_tokens}, backend {backend}")
        if resumed_from:
            racing = f", {n_open} of them with stages still to measure (their target is not decided yet)" \
                if n_open else ""
            self.line(f"  Resuming {resumed_from}: {n_done} done, {n_runs - n_done} remaining{racing}")
        self.line("=" * 60)
        self.line()

    def combination_started(self, index, total, title, at_most=False) -> None:
        # a race numbers its servers as it starts them, out of the most it may start
        self.line(f"[{index}/{'≤' if at_most else ''}{total}] {title}")

    def server_starting(self) -> None:
        self.part("  Starting server ... ")

    def port_retry(self, old, new) -> None:
        self.part(f"port {old} was taken, retrying on {new} ... ")

    def port_moved(self, old, new) -> None:
        self.line(f"  Note: port {old} is in use by another program; using port {new} for this run")

    def server_ready(self, load_time_s) -> None:
        self.line(f"ready ({load_time_s:.1f} s)" if load_time_s else "ready")

    def note(self, text) -> None:
        self.line(f"  Note: {text}")

    def speculation_inactive(self, reason) -> None:
        self.line(f"  ! Speculation is not active: {reason}")

    def benchmarking(self) -> None:
        self.part("  Benchmarking ... ")
        now = self.clock()
        self._block = (now, now)

    def request_done(self, done, total) -> None:
        self.part(".")
        if self._block is None or done >= total:
            return
        began, said = self._block
        now = self.clock()
        if now - said >= PROGRESS_EVERY_S:     # a long block: how far it got, not only dots
            self.part(f" {done}/{total} requests in {format_duration(now - began)} ")
            self._block = (began, now)

    def measured(self, tps, acceptance, speculative) -> None:
        line = " " + (f"{tps:.2f} tok/s" if tps is not None else "n/a tok/s")
        if speculative:
            line += f" (acceptance: {'n/a' if acceptance is None else f'{acceptance:.0%}'})"
        self.line(line)

    def streams_measured(self, streams, aggregate_tps, in_flight_max) -> None:
        total = "n/a" if aggregate_tps is None else f"{aggregate_tps:.2f}"
        self.line(f"  {streams} streams: {total} tok/s in total (tok/s above: per stream), "
                  f"up to {in_flight_max} requests in flight at once")

    def failed(self, message, fix, log_tail="", log_path=None) -> None:
        self.line("failed")
        self.line(f"  ! {message}")
        if fix:
            self.line(f"    Fix: {fix}")
        lines = [line for line in log_tail.splitlines() if line.strip()][-LOG_LINES:]
        if lines:        # what "see the log lines below" promises, and where the whole log is
            self.line(f"    Last lines of the server log{f' ({log_path})' if log_path else ''}:")
            for line in lines:
                self.line(f"      | {line}")
        elif log_path:
            self.line(f"    Server log: {log_path}")

    def server_stopped(self) -> None:
        self.line("  Server stopped")

    def race(self, text) -> None:
        self.line(f"  Race: {text}")

    def row_recorded(self, row: Row) -> None:
        if row.status is Status.ELIMINATED:
            self.line(f"  Eliminated: {reason_text(row)}")
            return
        if row.status is Status.SKIPPED:
            self.line(f"  Skipped: {reason_text(row)}")
            return
        if row.status is Status.NOT_PROBED:
            self.line(f"  Not probed: {row.target} — {row.draft}: {reason_text(row)}")
            return
        if row.status is Status.ERROR:
            self.line(f"  Error recorded: {reason_text(row)}")
            return
        inactive = row.role is Role.SPECULATIVE and row.speculation_active is False
        if inactive:
            self.line("  Speed-up vs baseline: none — speculation was not active, so this is the target alone")
        elif row.role in (Role.SPECULATIVE, Role.CONTROL, Role.CEILING) and row.speedup:
            label = {Role.CONTROL: "Drift vs first baseline", Role.CEILING: "Synthetic speed-up vs baseline (not a "
                     "candidate)"}.get(Role(row.role), "Speed-up vs baseline")
            self.line(f"  {label}: {describe_with_bound(row) if row.role == Role.SPECULATIVE else describe_speedup(row.speedup)}")
            bound = row.counter_bound or {}
            if bound.get("speed_changed"):
                self.line(f"  ! Not a speed-up: {bound.get('text')}")
            if row.confirmed:
                self.line(f"  Confirmed on fresh requests (the verdict's figure): {describe_speedup(row.confirmed)}")
        if row.role is Role.SPECULATIVE and not inactive and len(row.speedup_by_category or {}) > 1:
            self.line("  Speed-up by prompt category: " + ", ".join(
                f"{category_label(category)} {speed.ratio - 1:+.1%}" + (" (significant)" if speed.significant else "")
                for category, speed in (row.speedup_by_category or {}).items()))
        if row.role is Role.SPECULATIVE and row.speedup_in_session and not inactive:
            self.line(f"  Speed-up {WITHIN_A_SESSION} (turns that build on earlier ones; not a fresh prompt's figure): "
                      f"{describe_speedup(row.speedup_in_session)}")
        self._inside_the_draft(row)
        eq = row.equivalence
        if eq and eq.get("checked"):
            first = eq["mismatches"][0] if eq["mismatches"] else None
            self.line(f"  Output: identical to the baseline on {eq['matched']}/{eq['compared']} requests"
                      + (f" (first difference at character {first['char_pos']} of {first['prompt_id']})"
                         if first else ""))
        if row.method_stats:
            self.line(f"  Per method: {describe_methods(row.method_stats)}")
        if row.role is Role.SPECULATIVE and row.draft_fragments:   # LM Studio SDK: where drafts landed
            self.line(f"  {describe_fragments(row.draft_fragments)}")
        if inactive:
            self.line("  ! Speculation was not active: this row is not counted as a speed-up")
        for finding in row.warnings:
            if finding.code is not Code.SERVER_NOTE:   # notes were shown when the server started
                self.line(f"  ! {finding.message}")

    def _inside_the_draft(self, row: Row) -> None:
        """Acceptance by position and its diagnosis (with what every source says about k), where known."""
        if row.role is not Role.SPECULATIVE:
            return
        if row.accepted_per_pos and row.verify_steps:
            k = row.draft_max if kind(row) == "draft" else None      # only the positions drafted
            shares = ", ".join(f"{a / row.verify_steps:.0%}" for a in drafted_positions(row.accepted_per_pos, k))
            self.line(f"  Acceptance by position: {shares} (mean accepted length {row.mean_accepted_len})")
        if row.diagnosis:     # ends with the one statement about k (analysis/draft/k_advice.py)
            self.line(f"  Diagnosis: {row.diagnosis.message}")

    def progress(self, elapsed_s, remaining_s, at_most=False) -> None:
        if self._after_progress:       # said just now (a race reports after a step and after its pass)
            return
        eta = f", {'at most' if at_most else 'about'} {format_duration(remaining_s)} left" if remaining_s else ""
        self.line(f"  Elapsed {format_duration(elapsed_s)}{eta}")
        self.line()
        self._after_progress = True

    def _predicted_vs_measured(self, results: ResultsFile) -> None:
        """Where a draft_max list was swept: each measured k beside its one-run prediction; then each
        draft against its ceiling (known only once the ceiling runs are done)."""
        for row in results.results:
            if row.role is Role.SPECULATIVE and row.ceiling and row.ceiling.get("text"):
                k = f" (k={row.draft_max})" if row.draft_max else ""
                self.line(f"Ceiling of {row.target} + {row.draft}{k}: {row.ceiling['text']}")
        for row in kpredict.leading_rows(results.results):
            prediction = row.k_prediction or {}
            lines = kpredict.comparison_lines(prediction)
            if lines:
                self.line(f"Best k from one run, {row.target} + {row.draft} (predicted from k={prediction['from_k']}; "
                          f"mean error {prediction['mean_abs_error_pct']:.1f}%):")
                for text in lines:
                    self.line(f"  {text}")

    def _together(self, results: ResultsFile, rerun: str) -> None:
        """Where several targets have a next command: the one that continues them all (``--more`` applies to
        every target left unresolved or shortlisted)."""
        steps = [v.next_step for v in verdicts_of(results) if v.next_step is not None]
        together = for_the_sweep(steps) if len(steps) > 1 else None
        if together is not None and together not in steps:
            self.line(f"  Every target at once: {together.text(rerun)}")

    def interrupted(self, why, results_path) -> None:
        self.line()
        self.line(f"Interrupted ({why}). Every completed combination is saved in {results_path}.")
        self.line("Resume with the same command; only the remaining combinations will run.")

    def summary(self, results, results_path, chart_path, rerun=None) -> None:
        self.line("=== Sweep complete ===")
        bad = [r for r in results.results if not r.measured]
        if bad:
            self.line(f"{len(bad)} combination(s) did not produce a measurement:")
            for r in bad:
                streams = f" [{r.concurrency} streams]" if r.concurrency != 1 else ""
                self.line(f"  - {r.target}{' + ' + r.draft if r.draft else ''}{streams}: {r.status}: {reason_text(r)}")
        eliminated = [r for r in results.results if r.status is Status.ELIMINATED]
        if eliminated:
            self.line(f"{len(eliminated)} candidate(s) eliminated by the adaptive search (probe numbers kept): "
                      + ", ".join(f"{r.target} + {r.draft}" + (f" (k={r.draft_max})" if r.draft_max else "")
                                  for r in eliminated))
        summary = summary_of(results)
        if summary is not None:
            self.line(f"Server loads: {summary.server_loads}")
        self._predicted_vs_measured(results)
        self.line()
        self.line("Verdict:")
        for verdict in verdicts_of(results):
            self.line(f"  {verdict.verdict}")
            for length in verdict.context.per_length if verdict.context is not None else ():   # prefill, decode apart
                self.line(textwrap.indent(describe_length(length), "    "))
            if verdict.race is not None:
                self.line(f"    Race: {verdict.race.sentence()}")       # the same decision, in the same words
            for text in verdict.command_lines():
                self.line(f"    {text}")
            if verdict.next_step is not None:        # unresolved or a shortlist: what measures on, and its cost
                self.line(f"    {verdict.next_step.text(rerun or rerun_of(results))}")
        self._together(results, rerun or rerun_of(results))
        self.line()
        self.line(f"Results saved to {results_path}")
        if chart_path:
            self.line(f"Chart saved to {chart_path}")
