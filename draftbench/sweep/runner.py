"""Measure one combination against a backend that is passed in, and turn it into a results row.

Everything a row records about the server goes through :class:`ServerInfo`; every way a
combination can end (measured, skipped before any server starts, failed while starting or
measuring) builds its row here, so the three error paths record the same fields.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ..analysis.stats import rounded
from ..analysis.verdict import analyze_rows, summarize_records
from ..backends.base import Backend, LaunchSpec, Server, SpeculationStatus
from ..common.errors import DraftbenchError, ServerError, ServerErrorKind
from ..common.redact_secrets import redact_args
from ..config.extra_args import bind_host
from ..config.long_prompts import server_context
from ..config.prompts import Prompt
from ..config.settings import Settings
from ..lifetime.pid_files import check_no_leftovers
from ..lifetime.process import free_port, port_is_free, wait_port_free
from ..measure.concurrent import level_fields, run_streams
from ..measure.context import answers_of, needs_context
from ..measure.sequential import MeasurementFailed, MeasureOptions, Schedule, run_prompts
from ..results.file import RequestRecord, ResultsFile, Row, now_iso
from ..results.findings import Code, Finding
from ..results.kinds import Role, Status
from ..results.topology import describe as describe_topology
from .ceilings import resolve
from .console import Reporter
from .plan import Combination
from .preflight import combination_problem
from .store import RowStore


@dataclass(frozen=True)
class ServerInfo:
    """What a row records about the server that measured it."""

    backend: str
    command: list[str] | None = None
    version: str | None = None
    log: str | None = None
    port: int | None = None
    log_tail: str | None = None          # only on errors

    @classmethod
    def of(cls, backend: str, server: Server | None, *, log: str | None, port: int | None,
           log_tail: str | None = None) -> ServerInfo:
        if server is None:
            return cls(backend, log=log, port=port, log_tail=log_tail)
        return cls(backend, command=redact_args(server.command), version=server.version, log=server.log_path or log,
                   port=server.port or port, log_tail=log_tail)

    def to_dict(self) -> dict:
        out = asdict(self)
        if self.log_tail is None:
            del out["log_tail"]
        return out


def log_slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-")[:60] or "run"


def log_of(exc: BaseException, server: Server | None = None) -> tuple[str, str | None]:
    """A failed server's log, as the console shows it: its last lines and its path (the error's, else the
    server's own)."""
    tail = getattr(exc, "log_tail", "") or (server.log_tail(20) if server is not None else "")
    return tail, getattr(exc, "log_path", None) or (server.log_path if server is not None else None)


def reason_of(exc: BaseException) -> str:
    """A failure as a row's reason: its first line and its fix, the log named by its path (a results file or a
    report has no log lines "below")."""
    fix, path = getattr(exc, "fix", None), getattr(exc, "log_path", None)
    if fix and path:
        fix = fix.replace("see the log lines below", f"see its log ({path})")
    return first_line(exc) + (f" — {fix}" if fix else "")


def first_line(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


def speculation_outcome(requested: bool, status: SpeculationStatus, drafted: int | None, *,
                        model_free: bool = False) -> tuple[bool | None, list[Finding]]:
    """Did this row speculate? The server's own per-request counters decide; where it has none, what
    it said after launch. A draft that never drafted is never a speed-up."""
    if not requested:
        return None, []
    if drafted is None:
        if status.active is None:
            return None, [Finding(Code.NO_DRAFT_COUNTERS, "the server reports no draft counters: acceptance unknown")]
        return status.active, []
    if drafted == 0 and model_free:
        return False, [Finding(Code.NEVER_DRAFTED, "the method never drafted a token (draft_n = 0 on every request): "
                               "this row is not a speed-up. Model-free methods only draft where the answer repeats "
                               "earlier text: try prompts that do (code-edit, rewrite), or shorter n-grams "
                               "(e.g. ngram_mod_n_min, ngram_simple_size_n in params)", "candidates[].params")]
    if drafted == 0:
        return False, [Finding(Code.NEVER_DRAFTED, "the draft never drafted a token (draft_n = 0 on every request): "
                               "this row is not a speed-up. Likely causes: incompatible vocabularies, a draft the "
                               "server dropped, or draft settings (p-min) that reject every draft")]
    return True, []




class EveryServerFails(ServerError):
    """The run's first server failed in a way every server of the run would (its binary cannot run on this
    machine: built for another CPU, or llama.cpp's AMX kernels): the run stops before measuring anything,
    with that one message, instead of a failed or skipped row per combination."""

    exit_code = 2

    def __init__(self, error: ServerError):
        super().__init__(f"{error.message} — every server of this run would fail the same way, so it stopped "
                         "before measuring anything", error.fix, log_tail=error.log_tail, log_path=error.log_path,
                         kind=error.kind)


@dataclass(frozen=True)
class RunnerIO:
    """Where a runner writes its servers' logs, and how it tells and times what it does."""

    logs_dir: Path
    reporter: Reporter | None = None
    clock: Callable[[], float] = time.perf_counter
    flags: dict[str, str] | None = None       # how warnings name the settings to change (bench.py: its flags)


@dataclass(frozen=True)
class Measured:
    """What one server answered for a combination, before its row is made."""

    status: SpeculationStatus
    info: dict
    notes: list[Finding]
    records: list[RequestRecord]
    load: dict | None


class CombinationRunner:
    """Runs combinations one at a time: check the models, start a server, measure, stop it."""

    def __init__(self, backend: Backend, backend_name: str, settings: Settings, prompts: list[Prompt],
                 options: MeasureOptions, io: RunnerIO):
        self.backend = backend
        self.backend_name = backend_name
        self.settings = settings
        self.prompts = prompts
        self.options = options
        self.logs_dir = io.logs_dir
        self.reporter = io.reporter or Reporter()
        self.clock = io.clock
        self.flags = io.flags
        self.started_any = False         # a server was started (or tried) by this runner

    # ------------------------------------------------------------------ rows
    def base_fields(self, combo: Combination) -> dict:
        if combo.role is Role.DRAFT_ALONE:
            return dict(target=combo.target.label, draft=None, role=combo.role.value, target_path=combo.target.path,
                        concurrency=combo.concurrency)
        cand = combo.candidate
        return dict(target=combo.target.label, draft=cand.label if cand else None, role=combo.role.value,
                    draft_max=combo.draft_max, target_path=combo.target.path,
                    draft_path=combo.draft.path if combo.draft else None, candidate=cand.to_dict() if cand else None,
                    started_at=now_iso(), speculation_active=None, concurrency=combo.concurrency,
                    synthetic=combo.synthetic, context_tokens=combo.context_tokens)

    def skipped_or_broken(self, combo: Combination, failed_baselines: dict[str, str]) -> Row | None:
        """A row for a combination that cannot start: its baseline failed, or a model is missing or broken."""
        base = self.base_fields(combo)
        if combo.role in (Role.SPECULATIVE, Role.CONTROL, Role.CEILING) and combo.target.label in failed_baselines:
            reason = f"skipped: the baseline of {combo.target.label} failed ({failed_baselines[combo.target.label]})"
            return Row(status=Status.SKIPPED, reason=reason.splitlines()[0], **base)
        found = combination_problem(self.backend, combo)     # the checks --dry-run makes (preflight.py)
        if found is None:
            return None
        problem, about_the_pair = found
        if about_the_pair:
            return Row(status=Status.SKIPPED, reason=str(problem), **dict(base, speculation_active=False))
        # A model that is not there yet is skipped (add it and resume); a broken one is an error.
        return Row(status=Status.SKIPPED if problem.missing else Status.ERROR, reason=str(problem), **base)

    def error_row(self, base: dict, exc: DraftbenchError, server: Server | None, log_path: Path, port: int,
                   started: float, records: tuple = ()) -> Row:
        tail, path = log_of(exc, server)
        fix = getattr(exc, "fix", None)
        self.reporter.failed(first_line(exc), fix, tail, path)
        return Row(status=Status.ERROR, reason=reason_of(exc),
                   requests=records, wall_time=rounded(self.clock() - started, 3),
                   topology=server.topology if server else None, server=ServerInfo.of(self.backend_name, server, log=str(log_path), port=port,
                                        log_tail=tail).to_dict(), **base)

    # ------------------------------------------------------------------ one combination
    def run(self, combo: Combination, index: int, failed_baselines: dict[str, str],
            schedule: Schedule | None = None, results: ResultsFile | None = None) -> Row:
        """Measure ``combo`` on a new server: every request, or those of ``schedule`` (whose earlier
        records are kept in the row, before the new ones). ``results``: the rows so far (a ceiling
        run reads its draft's measured acceptance there)."""
        early = self.skipped_or_broken(combo, failed_baselines)
        if early is not None:
            return early
        if combo.role is Role.CEILING:
            combo, why_not = resolve(combo, results)
            if why_not:
                return Row(status=Status.SKIPPED, reason=why_not, **self.base_fields(combo))
        base = self.base_fields(combo)
        answers, no_context = self._context(combo, results)
        if no_context:
            return Row(status=Status.ERROR, reason=no_context, **base)
        log_path = self.logs_dir / f"{index:03d}-{log_slug(combo.title(True))}.log"
        spec = self.launch_spec(combo, 0, log_path)
        spec = replace(spec, port=self.choose_port(spec.host))
        started = self.clock()
        server: Server | None = None
        self.reporter.server_starting()
        try:
            server = self.launch(spec)
            self.reporter.server_ready(server.load_time_s)
            if server.topology:
                self.reporter.note(f"topology: {describe_topology(server.topology)}")
            for note in server.notes:   # e.g. "attached to a running LM Studio server"
                self.reporter.note(note)
            notes = [Finding(Code.SERVER_NOTE, n) for n in server.notes]
            status = server.speculation_status(requested=combo.is_speculative)
            info = ServerInfo.of(self.backend_name, server, log=str(log_path), port=spec.port).to_dict()
            if combo.is_speculative and status.active is False:
                self.reporter.speculation_inactive(status.reason)
                return Row(status=Status.ERROR, reason=f"speculation not active: {status.reason}", server=info,
                           load_time_s=rounded(server.load_time_s, 3), topology=server.topology,
                           wall_time=rounded(self.clock() - started, 3),
                           warnings=tuple(notes), **dict(base, speculation_active=False))
            self.reporter.benchmarking()
            records, load = self._measure(server, combo.concurrency, schedule, answers)
            return self._row_of(combo, server, Measured(status, info, notes, records, load), base, started)
        except MeasurementFailed as failure:
            return self.error_row(base, failure.error, server, log_path, spec.port, started,
                                   (*(schedule.earlier if schedule else ()), *failure.records))
        except EveryServerFails:
            raise
        except DraftbenchError as exc:
            return self.error_row(base, exc, server, log_path, spec.port, started)
        finally:
            if server is not None:
                server.stop()
                self.reporter.server_stopped()

    def run_each(self, combos: list[Combination], store: RowStore, show_k: bool) -> None:
        """Other concurrency levels, drafts alone and ceiling runs: each on a server of its own, in plan order, its
        row recorded and shown as analysed against its target's rows."""
        failed: dict[str, str] = {}
        for index, combo in enumerate(combos, 1):
            row = store.row(combo.key)
            if row is not None and row.measured:
                continue
            self.reporter.combination_started(index, len(combos), combo.title(show_k))
            row = store.record(self.run(combo, index, failed, results=store.current()))
            if combo.role is Role.BASELINE and not row.ok:
                failed[combo.target.label] = row.reason or row.status
            self.reporter.row_recorded(analyze_rows(store.current(), [row.key])[0])

    def _row_of(self, combo: Combination, server: Server, measured: Measured, base: dict, started: float) -> Row:
        """The row of a measured combination (an error row when a baseline turns out to speculate)."""
        records, load, notes, info = measured.records, measured.load, list(measured.notes), measured.info
        fields = summarize_records(records, max_tokens=self.options.max_tokens, runs=self.options.runs,
                                   flags=self.flags)
        if load is not None:
            fields = level_fields(fields, load, speculative=combo.is_speculative)
        methods, memory = server.active_methods(), server.memory_use()
        if not combo.is_speculative and methods:
            # A build that speculates by default would make the baseline look fast: never compare to it.
            self.reporter.failed(f"the baseline speculated ({', '.join(methods)})", None)
            return Row(status=Status.ERROR, reason=f"the baseline is not plain decoding: the server ran "
                       f"{', '.join(methods)} ({server.methods_evidence})", server=info,
                       load_time_s=rounded(server.load_time_s, 3), topology=server.topology, requests=tuple(records),
                       wall_time=rounded(self.clock() - started, 3), active_methods=list(methods), **base)
        active, spec_findings = speculation_outcome(combo.is_speculative, measured.status, fields.get("draft_n"),
                                                    model_free=bool(combo.candidate and combo.candidate.model_free))
        self.reporter.measured(fields.get("mean_tps"), fields.get("acceptance_rate"),
                               combo.role in (Role.SPECULATIVE, Role.CEILING))
        if load is not None:
            self.reporter.streams_measured(combo.concurrency, load.get("aggregate_tps"), load.get("in_flight_max"))
        for note in server.notes[len(notes):]:   # learnt while measuring (LM Studio applying another k)
            self.reporter.note(note)
            notes.append(Finding(Code.SERVER_NOTE, note))
        warnings = (*notes, *fields.pop("warnings"), *spec_findings)
        return Row(status=Status.OK, warnings=warnings, server=info, load_time_s=rounded(server.load_time_s, 3),
                   topology=server.topology, memory=memory,
                   requests=tuple(records), wall_time=rounded(self.clock() - started, 3), load=load,
                   active_methods=list(methods) if methods is not None else None,
                   **{**base, **fields, "speculation_active": active})

    def _context(self, combo: Combination, results: ResultsFile | None) -> tuple[dict | None, str | None]:
        """Second turns' context (see measure.context): None for the servers that write it themselves
        (the one-stream baseline, a draft alone), else the target's baseline answers; and why a
        combination cannot run without them (checked before a server starts)."""
        if not needs_context(self.prompts) or combo.role is Role.DRAFT_ALONE or \
                (combo.role is Role.BASELINE and combo.concurrency == 1):
            return None, None
        baseline = results.baseline_for(combo.target.label) if results is not None else None
        answers = answers_of(baseline.requests) if baseline is not None else {}
        missing = [p.context_from for p in self.prompts if p.context_from and p.context_from not in answers]
        if missing:
            return None, (f"second turns are sent after the target's own first answers, and its one-stream baseline "
                          f"has no answer to {missing[0]}" + (f" (and {len(missing) - 1} more)" if len(missing) > 1
                                                               else ""))
        return answers, None

    def _measure(self, server: Server, streams: int, schedule: Schedule | None = None,
                 answers: dict | None = None) -> tuple[list, dict | None]:
        """The requests of one combination, and what its streams did together when there were several;
        with a ``schedule`` (adaptive search, one stream), its requests after its earlier records."""
        def on_request(done: int, total: int, _record) -> None:
            self.reporter.request_done(done, total)

        if streams > 1:
            level = run_streams(server, self.prompts, self.options, streams, on_request, answers=answers)
            return level.records, level.load
        if schedule is None:
            return run_prompts(server, self.prompts, self.options, on_request=on_request, answers=answers), None
        earlier, keep_going = schedule.earlier, schedule.keep_going
        return [*earlier, *run_prompts(server, self.prompts, self.options, on_request=on_request, order=schedule.order,
                                       keep_going=(lambda new: keep_going([*earlier, *new])) if keep_going else None,
                                       answers=answers)], None

    def launch_spec(self, combo: Combination, port: int, log_path: Path) -> LaunchSpec:
        cand = combo.candidate
        extra = (tuple(self.settings.extra_args) + combo.target.extra_args
                 + (combo.draft.extra_args if combo.draft else ()) + (cand.extra_args if cand else ()))
        host = bind_host(self.settings.host, extra)     # a --host in extra_args is where the server listens
        return LaunchSpec(target=combo.target.path, draft=combo.draft.path if combo.draft else None,
                          draft_max=combo.draft_max, method=cand.method if cand else (),
                          params=cand.settings_params if cand else {}, host=host, port=port,
                          ctx_size=self.ctx_size(combo), gpu_layers=self.settings.gpu_layers,
                          extra_args=extra, settings=self.settings,
                          startup_timeout_s=self.settings.startup_timeout_s, log_path=str(log_path),
                          concurrency=combo.concurrency, rpc=combo.target.rpc,
                          draft_placement=cand.draft_placement if cand else None, context_tokens=combo.context_tokens)

    def ctx_size(self, combo: Combination) -> int:
        """``-c`` per slot: ``settings.ctx_size``, or on the context axis the prompt, the answer and a draft's room."""
        if combo.context_tokens is None:
            return self.settings.ctx_size
        return server_context(combo.context_tokens, self.options.max_tokens, combo.draft_max)

    def launch(self, spec: LaunchSpec) -> Server:
        """Start a server (once more on another port if someone took ours); the first of the run failing in a way
        every server would (its binary cannot run here) stops the run: :class:`EveryServerFails`."""
        first, self.started_any = not self.started_any, True
        try:
            try:
                return self.backend.launch(spec)
            except ServerError as exc:
                if exc.kind is not ServerErrorKind.PORT_IN_USE or not self.backend.owns_port:
                    raise
            # Someone took the port between our check and the server's bind: once more elsewhere.
            retry = replace(spec, port=free_port(spec.host))
            self.reporter.port_retry(spec.port, retry.port)
            return self.backend.launch(retry)
        except ServerError as exc:
            if first and exc.kind is ServerErrorKind.BINARY:
                self.reporter.failed("the first server failed as every server of this run would: stopping (the "
                                     "error below)", None)
                raise EveryServerFails(exc) from None
            raise

    def choose_port(self, host: str) -> int:
        port = self.settings.port
        if not self.backend.owns_port:
            return port          # the backend reuses its own server and port (LM Studio)
        if port == 0:
            return free_port(host)
        # Our previous server has exited; its socket may linger for a moment.
        if port_is_free(host, port) or wait_port_free(host, port, timeout_s=3.0):
            return port
        check_no_leftovers()     # a server of ours that escaped is named as ours, never "another program"
        new = free_port(host)
        self.reporter.port_moved(port, new)
        return new
