"""Run the schedule's steps (``sweep/schedule.py``) on real servers and record what they measured.

A step starts one server (a baseline or a candidate block alone) or two (the interleaved design:
baseline and candidate up together), warms each up on a prompt outside the measured set, sends
the step's requests in the schedule's order, stops its servers, and records the rows of both
sides. Every request records its server ``session``, its ``block``, whether the method's state
could have seen the prompt before on that server (``seen_before``), and, for a candidate, the
baseline sessions it is compared with (``compared_with``). Rows accumulate their requests over
steps, so an interrupted or failed sweep resumes at the first block not measured.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..analysis.comparison import describe_with_bound
from ..analysis.stats import rounded
from ..analysis.verdict import summarize_records
from ..backends.base import Server, SpeculationStatus
from ..common.errors import DraftbenchError, RequestError, ServerError
from ..config.prompts import Prompt
from ..lifetime.process import free_port
from ..measure.context import answers_of, with_context
from ..measure.sequential import MeasureOptions, explain_failure, measure_one, request_seed, warm_up
from ..results.file import RequestRecord, ResultsFile, Row
from ..results.findings import Code, Finding
from ..results.kinds import Role, Status
from ..results.topology import describe as describe_topology
from .ceilings import resolve
from .console import Reporter
from .plan import Combination
from .runner import CombinationRunner, ServerInfo, first_line, log_slug, speculation_outcome
from .schedule import Design, Kind, Side, Step, block_of, complete_blocks, confirmation_pairs, is_stateful
from .step_records import acceptance_of, last_session, mean_of, next_session_number, peak_memory


class RowStore(Protocol):
    """Where rows go: the session analyses and saves the file after every row."""

    def current(self) -> ResultsFile: ...
    def record(self, row: Row) -> Row: ...


@dataclass
class _Open:
    """A started server session for one side of a step."""

    combo: Combination
    server: Server
    session: str
    info: dict
    notes: list[Finding]
    status: SpeculationStatus
    stateful: bool
    started: float
    seen: set[str] = field(default_factory=set)
    methods: tuple[str, ...] | None = None      # what /slots said it ran, asked before the server stops
    memory: dict | None = None                  # what it held (Server.memory_use), asked before it stops


class StepFailed(Exception):
    """A step could not measure: ``side`` failed, with what each side measured before."""

    def __init__(self, side: Side, error: DraftbenchError, records: dict[Side, list[RequestRecord]],
                 opened: _Open | None = None, inactive: bool = False):
        super().__init__(str(error))
        self.side, self.error, self.records, self.opened, self.inactive = side, error, records, opened, inactive


class StepRunner:
    """Runs steps for one target: its baseline combination and its candidates, by name."""

    def __init__(self, runner: CombinationRunner, store: RowStore, reporter: Reporter, design: Design,
                 prompts: list[Prompt], options: MeasureOptions, block_pairs: list[list[tuple[int, int]]],
                 baseline: Combination, candidates: dict[str, Combination], failed_baselines: dict[str, str],
                 clock: Callable[[], float] = time.perf_counter, show_k: bool = True):
        self.runner, self.store, self.reporter, self.design = runner, store, reporter, design
        self.prompts, self.options, self.block_pairs = prompts, options, block_pairs
        self.baseline, self.candidates, self.failed_baselines, self.clock = baseline, candidates, failed_baselines, clock
        self.index = {p.id: i for i, p in enumerate(prompts)}
        # a confirmation repeats every prompt once more (repetition ``runs``) as the block after the last
        self.confirmation = confirmation_pairs(block_pairs)
        self.block = block_of([*block_pairs, self.confirmation])
        self.dead: dict[str, str] = {}                  # candidates not measured further in this sweep, and why
        self.sessions = itertools.count(next_session_number(store.current()))
        self.step_number = 0
        self.at_most = False          # a race numbers its steps out of the most it may run
        self.show_k = show_k

    # ------------------------------------------------------------------ what is left
    def row(self, combo: Combination) -> Row | None:
        return self.store.current().row(combo.key)

    def measured_pairs(self, combo: Combination) -> set[tuple[int, int]]:
        row = self.row(combo)
        if row is None or row.status not in (Status.OK, Status.ERROR, Status.ELIMINATED):
            return set()
        return {(r.run, self.index[r.prompt_id]) for r in row.requests
                if r.error is None and r.decode_tps and r.prompt_id in self.index}

    def pending(self, step: Step) -> bool:
        """Whether a candidate step still has requests to measure (baseline steps: see :meth:`run`)."""
        if self.baseline.target.label in self.failed_baselines:
            return False
        if step.candidate is not None and step.candidate in self.dead:
            return False
        combo = self.baseline if step.candidate is None else self.candidates[step.candidate]
        measured = self.measured_pairs(combo)
        wanted = {(r.run, r.prompt) for r in step.requests}
        return not wanted <= measured

    def _baseline_lacks(self, step: Step, later: Sequence[Step]) -> bool:
        """A paired step whose baseline side measured none of its requests, and no later pair of that block
        will (the baseline not failed): its baseline side is then measured alone."""
        return step.kind is Kind.PAIRED and self.baseline.target.label not in self.failed_baselines and \
            not {(r.run, r.prompt) for r in step.requests} & self.measured_pairs(self.baseline) and \
            not any(s.kind is Kind.PAIRED and s.block == step.block and self.pending(s) for s in later)

    def blocks_done(self, name: str) -> set[int]:
        return complete_blocks(self.measured_pairs(self.candidates[name]), self.block_pairs)

    # ------------------------------------------------------------------ running steps
    def run(self, steps: Sequence[Step], total: int | None = None,
            after_step: Callable[[Step, bool], None] | None = None,
            stop: Callable[[], bool] | None = None) -> None:
        """Run what is pending of ``steps``: a bracketed design's baseline blocks only where a candidate
        block next to them runs, and the candidate then compared with the baselines on both sides.
        ``stop``: asked before every candidate step (a race's budget); a pending bracket is still closed."""
        before: str | None = None            # the baseline session just measured, in this block
        waiting: tuple[str, int | None] | None = None   # a candidate block waiting for its after-baseline
        for position, step in enumerate(steps):
            if self.failed_baselines.get(self.baseline.target.label):
                self._skip_the_rest(steps)
                return
            if stop is not None and step.kind is not Kind.BASELINE and stop():
                return
            ran, later = False, steps[position + 1:]
            if step.kind is Kind.BASELINE:
                if self.design is Design.BRACKETED:     # only as the bracket of a candidate block that runs
                    needed = waiting is not None or any(
                        self.pending(s) for s in steps[position + 1: position + 2] if s.kind is Kind.CANDIDATE)
                else:
                    needed = self.pending(step)
                session = self._run_step(step, total, before=None) if needed else None
                if waiting is not None and session is not None:
                    self._close_bracket(*waiting, session)
                waiting, before, ran = None, session, needed
            elif self.pending(step):
                self._run_step(step, total, before=before)
                if self.design is Design.BRACKETED and step.candidate not in self.dead:
                    waiting = (step.candidate or "", step.block)
                if step.candidate in self.dead and self._baseline_lacks(step, later):   # it died before any
                    self.step_number -= 1           # baseline request: the same step, its baseline side alone
                    self._run_step(step.baseline_alone(), total, before=None)
                before, ran = None, True
            elif self._baseline_lacks(step, later):        # a dead candidate's pair: its baseline side is still due
                before, ran = None, self._run_step(step.baseline_alone(), total, before=None) is not None
            else:
                before = None
                self.step_number += 1
            if after_step:
                after_step(step, ran)

    def _skip_the_rest(self, steps: Sequence[Step]) -> None:
        """The baseline failed: every candidate still to measure gets its 'skipped' row (as upstream)."""
        for name in dict.fromkeys(s.candidate for s in steps if s.candidate is not None):
            combo = self.candidates[name]
            row = self.row(combo)
            if name not in self.dead and (row is None or not row.requests):
                self._may_start(combo)

    def _title(self, step: Step) -> str:
        combo = self.baseline if step.candidate is None else self.candidates[step.candidate]
        title = combo.title(self.show_k)
        if step.block is None:
            return title                  # the sequential design: upstream's titles
        blocks = (f"block {step.block + 1}/{len(self.block_pairs)}" if step.block < len(self.block_pairs) else
                  "confirmation on fresh requests")
        return f"{title} [{blocks}" + (", alternating with a baseline server]" if step.kind is Kind.PAIRED else "]")

    def _run_step(self, step: Step, total: int | None, before: str | None) -> str | None:
        """Measure one step and record its rows; the baseline session it measured (None: none)."""
        self.step_number += 1
        if self.at_most and total:
            self.reporter.combination_started(self.step_number, total, self._title(step), at_most=True)
        else:
            self.reporter.combination_started(self.step_number, total or self.step_number, self._title(step))
        candidate = self.candidates[step.candidate] if step.candidate is not None else None
        if step.kind is not Kind.CANDIDATE and not self._may_start(self.baseline):
            return None
        if candidate is not None and not self._may_start(candidate):
            return None
        if step.candidate is not None:
            candidate = self.candidates[step.candidate]     # a ceiling run resolved by _may_start
        records: dict[Side, list[RequestRecord]] = {Side.BASELINE: [], Side.CANDIDATE: []}
        opened: dict[Side, _Open] = {}
        started = self.clock()
        try:
            if step.kind in (Kind.PAIRED, Kind.BASELINE):
                opened[Side.BASELINE] = self._open(self.baseline, step, Side.BASELINE, records)
            if candidate is not None:
                opened[Side.CANDIDATE] = self._open(candidate, step, Side.CANDIDATE, records)
            self.reporter.benchmarking()
            for side, o in opened.items():          # a warm-up that fails names its own side's server
                try:
                    o.seen.update(w.id for w in warm_up(o.server, self.prompts, self.options))
                except (RequestError, ServerError) as exc:
                    raise StepFailed(side, explain_failure(o.server, exc), records) from None
            self._send(step, opened, records, before)
            for o in opened.values():
                o.methods, o.memory = o.server.active_methods(), o.server.memory_use()
                for note in o.server.notes[len(o.notes):]:      # learnt while measuring (LM Studio's k)
                    self.reporter.note(note)
                    o.notes.append(Finding(Code.SERVER_NOTE, note))
            shown = records[Side.CANDIDATE] or records[Side.BASELINE]
            self.reporter.measured(mean_of(r.decode_tps for r in shown), acceptance_of(shown), candidate is not None
                                   and candidate.is_speculative)
        except StepFailed as failure:
            self._failed(step, failure, opened, started)
            return None
        finally:
            for o in opened.values():
                o.server.stop()
                self.reporter.server_stopped()
        wall = self.clock() - started
        if Side.BASELINE in opened:
            self._record(self.baseline, records[Side.BASELINE], opened[Side.BASELINE], wall)
        if candidate is not None and self.baseline.target.label in self.failed_baselines:
            self._skipped(candidate, records[Side.CANDIDATE])
        elif candidate is not None:
            row = self._record(candidate, records[Side.CANDIDATE], opened[Side.CANDIDATE], wall)
            if self.measured_pairs(candidate) >= {pair for pairs in self.block_pairs for pair in pairs}:
                self.reporter.row_recorded(row)        # complete: everything about it
            elif row.speedup:
                self.reporter.note(f"so far ({len(row.requests)} requests): {describe_with_bound(row)}")
        return opened[Side.BASELINE].session if Side.BASELINE in opened else None

    def _may_start(self, combo: Combination) -> bool:
        """Checks before any server starts (missing or broken models, a failed baseline, a ceiling's inputs)."""
        early = self.runner.skipped_or_broken(combo, self.failed_baselines)
        if early is None and combo.role == Role.CEILING:
            resolved, why_not = resolve(combo, self.store.current())
            if why_not:
                early = Row(status=Status.SKIPPED, reason=why_not, **self.runner.base_fields(resolved))
            else:
                self.candidates = {n: (resolved if c.key == combo.key else c) for n, c in self.candidates.items()}
        if early is None:
            return True
        prior = self.row(combo)
        self.reporter.row_recorded(self.store.record(replace(early, requests=prior.requests if prior else ())))
        self._give_up(combo, early.reason or early.status)
        return False

    def _give_up(self, combo: Combination, reason: str) -> None:
        if combo.role == Role.BASELINE:
            self.failed_baselines[combo.target.label] = reason
        else:
            self.dead[next(n for n, c in self.candidates.items() if c.key == combo.key)] = reason

    def _open(self, combo: Combination, step: Step, side: Side, records: dict[Side, list[RequestRecord]]) -> _Open:
        session = f"s{next(self.sessions)}"
        log_path = self.runner.logs_dir / f"{session}-{log_slug(combo.title(True))}.log"
        spec = self.runner.launch_spec(combo, 0, log_path)
        if side is Side.CANDIDATE and step.kind is Kind.PAIRED and self.runner.backend.owns_port:
            port = free_port(spec.host)        # the baseline server holds the configured port
        else:
            port = self.runner.choose_port(spec.host)
        spec = replace(spec, port=port)
        self.reporter.server_starting()
        started = self.clock()
        try:
            server = self.runner.launch(spec)
        except DraftbenchError as exc:
            raise StepFailed(side, exc, records) from None
        self.reporter.server_ready(server.load_time_s)
        if server.topology:
            self.reporter.note(f"topology: {describe_topology(server.topology)}")
        for note in server.notes:
            self.reporter.note(note)
        status = server.speculation_status(requested=combo.is_speculative)
        info = ServerInfo.of(self.runner.backend_name, server, log=str(log_path), port=spec.port).to_dict()
        methods = combo.candidate.method if combo.candidate else ()
        opened = _Open(combo, server, session, info, [Finding(Code.SERVER_NOTE, n) for n in server.notes], status,
                       is_stateful(methods), started)
        if combo.is_speculative and status.active is False:
            server.stop()
            self.reporter.speculation_inactive(status.reason)
            raise StepFailed(side, ServerError(f"speculation not active: {status.reason}", ""), records, opened,
                             inactive=True)
        return opened

    def _send(self, step: Step, opened: dict[Side, _Open], records: dict[Side, list[RequestRecord]],
              before: str | None) -> None:
        baseline = opened.get(Side.BASELINE)
        compared = [baseline.session] if step.kind is Kind.PAIRED and baseline else ([before] if before else None)
        planned = len(step.requests)
        base_row = self.row(self.baseline)
        known = answers_of(base_row.requests) if base_row is not None else {}    # second turns' context
        for done, request in enumerate(step.requests, 1):
            o = opened[request.side]
            prompt = self.prompts[request.prompt]
            try:
                record = measure_one(o.server, with_context(prompt, known), self.options,
                                     max_tokens=self.options.max_tokens,
                                     seed=request_seed(self.options.seed, request.run, request.prompt), run=request.run)
            except (RequestError, ServerError) as exc:
                raise StepFailed(request.side, explain_failure(o.server, exc), records) from None
            is_candidate = request.side is Side.CANDIDATE
            records[request.side].append(replace(
                record, session=o.session, block=self.block.get((request.run, request.prompt)),
                seen_before=o.stateful and prompt.id in o.seen,
                compared_with=(compared if self.design is not Design.SEQUENTIAL else None) if is_candidate else None))
            o.seen.add(prompt.id)
            if request.side is Side.BASELINE and record.text is not None:
                known.setdefault(record.prompt_id, record.text)     # the target's own first answer
            self.reporter.request_done(done, planned)

    # ------------------------------------------------------------------ rows
    def _design(self, combo: Combination, records: Sequence[RequestRecord]) -> dict:
        stateful = is_stateful(combo.candidate.method) if combo.candidate else False
        return {"name": self.design.value, "drift_prone": self.design.drift_prone, "blocks": len(self.block_pairs),
                "planned": sum(len(b) for b in self.block_pairs),
                "sessions": len({r.session for r in records if r.session}), "stateful": stateful,
                "confirmation_block": len(self.block_pairs)}

    def _record(self, combo: Combination, new: list[RequestRecord], o: _Open, wall: float) -> Row:
        prior = self.row(combo)
        records = [*(prior.requests if prior is not None else ()), *new]
        fields = summarize_records(records, max_tokens=self.options.max_tokens, runs=self.options.runs,
                                   flags=self.runner.flags)
        # a row measured in blocks started with its first block (and keeps that time on resume)
        base = {**self.runner.base_fields(combo), **({"started_at": prior.started_at} if prior else {})}
        wall_time = rounded((prior.wall_time or 0.0 if prior else 0.0) + wall, 3)
        common: dict[str, Any] = dict(server=o.info, load_time_s=rounded(o.server.load_time_s, 3),
                                      topology=o.server.topology, requests=tuple(records), memory=peak_memory(prior, o.memory),
                      wall_time=wall_time, design=self._design(combo, records), race=prior.race if prior else None)
        methods = o.methods
        if not combo.is_speculative and methods:
            reason = (f"the baseline is not plain decoding: the server ran {', '.join(methods)} "
                      f"({o.server.methods_evidence})")
            self.reporter.failed(f"the baseline speculated ({', '.join(methods)})", None)
            self._give_up(combo, reason)
            return self.store.record(Row(status=Status.ERROR, reason=reason, active_methods=list(methods),
                                         **common, **base))
        active, findings = speculation_outcome(combo.is_speculative, o.status, fields.get("draft_n"),
                                               model_free=bool(combo.candidate and combo.candidate.model_free))
        warnings = (*o.notes, *fields.pop("warnings"), *findings)
        status = prior.status if prior is not None and prior.status == Status.ELIMINATED else Status.OK
        row = Row(status=status, warnings=warnings, active_methods=list(methods) if methods is not None else None,
                  **common, **{**base, **fields, "speculation_active": active})
        return self.store.record(row)

    def _close_bracket(self, name: str, block: int | None, after: str) -> None:
        """A bracketed candidate block is compared with the baseline blocks before and after it."""
        combo = self.candidates[name]
        row = self.row(combo)
        if row is None:
            return
        requests = tuple(replace(r, compared_with=[*(r.compared_with or []), after])
                         if r.block == block and r.compared_with is not None and after not in r.compared_with
                         and r.session == last_session(row, block) else r for r in row.requests)
        self.store.record(replace(row, requests=requests))

    def _failed(self, step: Step, failure: StepFailed, opened: dict[Side, _Open], started: float) -> None:
        """Record what a failed step measured and why it failed; the failing side is not measured further."""
        wall = self.clock() - started
        candidate = self.candidates[step.candidate] if step.candidate is not None else None
        if failure.records[Side.BASELINE] and Side.BASELINE in opened:
            self._record(self.baseline, failure.records[Side.BASELINE], opened[Side.BASELINE], wall)
        exc = failure.error
        fix = getattr(exc, "fix", None)
        self.reporter.failed(first_line(exc), fix or None)
        reason = first_line(exc) + (f" — {fix}" if fix else "")
        baseline = self.row(self.baseline)
        if failure.side is Side.BASELINE and not (baseline is not None and baseline.ok and baseline.requests):
            # no baseline to compare with: the target's candidates are skipped (as in upstream)
            self._error(self.baseline, reason, failure, opened.get(Side.BASELINE), wall)
            self._give_up(self.baseline, reason)
        if candidate is None:
            return
        if self.baseline.target.label in self.failed_baselines:     # nothing to compare it with: skipped, as
            self._skipped(candidate, failure.records[Side.CANDIDATE])   # upstream (whichever side failed first)
            self._give_up(candidate, reason)
            return
        if failure.side is Side.BASELINE:
            reason = f"the baseline server beside it failed: {reason}"
        self._error(candidate, reason, failure, opened.get(Side.CANDIDATE) or failure.opened, wall,
                    inactive=failure.inactive)
        self._give_up(candidate, reason)

    def _skipped(self, candidate: Combination, new: Sequence[RequestRecord]) -> None:
        """The baseline of the candidate's target failed: its row is 'skipped', keeping what it measured."""
        prior = self.row(candidate)
        records = (*(prior.requests if prior else ()), *new)
        row = Row(status=Status.SKIPPED, reason=f"skipped: the baseline of {candidate.target.label} failed "
                  f"({self.failed_baselines[self.baseline.target.label]})", requests=records,
                  design=self._design(candidate, records), **self.runner.base_fields(candidate))
        self.reporter.row_recorded(self.store.record(row))

    def _error(self, combo: Combination, reason: str, failure: StepFailed, o: _Open | None, wall: float,
               inactive: bool = False) -> None:
        prior = self.row(combo)
        side = Side.BASELINE if combo.role == Role.BASELINE else Side.CANDIDATE
        records = (*(prior.requests if prior is not None else ()), *failure.records[side])
        server = o.server if o is not None else None
        tail = getattr(failure.error, "log_tail", "") or (server.log_tail(20) if server else "")
        info = ServerInfo.of(self.runner.backend_name, server, log=o.info.get("log") if o else None,
                             port=o.info.get("port") if o else None, log_tail=tail).to_dict()
        base = {**self.runner.base_fields(combo), **({"started_at": prior.started_at} if prior else {}),
                **({"speculation_active": False} if inactive else {})}
        topology = server.topology if server is not None else (prior.topology if prior is not None else None)  # split
        self.store.record(Row(status=Status.ERROR, reason=reason, requests=records, server=info, topology=topology,
                              wall_time=rounded((prior.wall_time or 0.0 if prior else 0.0) + wall, 3),
                              design=self._design(combo, records), **base))
