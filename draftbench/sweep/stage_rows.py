"""The rows a target's stages write: every request added to its side's row as it finishes (so nothing measured
is lost to a stop: a request measured is a request kept), a failure recorded with what it measured before it,
a candidate skipped when its target's baseline failed, and a candidate never measured before the budget ran
out ("not probed")."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..analysis.row_analysis import summary_behind
from ..analysis.stats import rounded
from ..analysis.verdict import summarize_records
from ..backends.base import SpeculationStatus
from ..results.file import RequestRecord, Row
from ..results.findings import Code, Finding
from ..results.kinds import Role, Status
from ..results.memory import ServerMemory
from .launcher import Session
from .plan import Combination
from .runner import CombinationRunner, ServerInfo, speculation_outcome
from .schedule import Design, is_stateful
from .store import RowStore


@dataclass(frozen=True)
class StagedDesign:
    """How a target is measured, as each of its rows records it (``Row.design``)."""

    design: Design
    horizon: int
    per_stage: int
    fixed: bool

    def of(self, combo: Combination, records: Sequence[RequestRecord]) -> dict:
        return {"name": self.design.value, "drift_prone": self.design.drift_prone, "horizon": self.horizon,
                "per_stage": self.per_stage, "fixed_prompts": self.fixed,
                "sessions": len({r.session for r in records if r.session}),
                "stateful": is_stateful(combo.candidate.method) if combo.candidate else False}


@dataclass(frozen=True)
class _Measured:
    """What a row measured on a server is made of, but its summarised fields (:meth:`RowWriter.measured`)."""

    combo: Combination
    status: Status
    common: dict
    notes: tuple[Finding, ...]
    speculation: SpeculationStatus
    methods: Sequence[str] | None


class RowWriter:
    """Adds each request to its row in ``store``; ``runner`` knows each row's base fields."""

    def __init__(self, store: RowStore, runner: CombinationRunner, design: StagedDesign):
        self.store, self.runner, self.design = store, runner, design
        self._pending: dict[tuple, _Measured] = {}     # rows with requests added since their fields were summarised

    def row(self, combo: Combination) -> Row | None:
        return self.store.row(combo.key)

    def measured(self, combo: Combination, session: Session, new: list[RequestRecord], wall: float,
                 summarise: bool = True) -> Row:
        """The row with ``new`` added (an error row when a baseline turns out to speculate). A request added to a row
        measured before keeps that row's fields as they were (saved at once, summarised when its step ends:
        :meth:`summarise`); a step's end (``new`` empty) or a row's first request summarises every request — but
        not with ``summarise`` off (the stage's baseline, whose every step adds to it: summarised as its stage
        ends, not once per candidate's step over all its stages' requests)."""
        prior = self.row(combo)
        records = [*(prior.requests if prior is not None else ()), *new]
        common = self._common(combo, prior, records, wall)
        common.update(server=session.info, load_time_s=rounded(session.server.load_time_s, 3),
                      topology=session.server.topology, memory=peak_memory(prior, session))
        methods = session.methods
        self._pending.pop(combo.key, None)
        if not combo.is_speculative and methods:
            reason = (f"the baseline is not plain decoding: the server ran {', '.join(methods)} "
                      f"({session.server.methods_evidence})")
            return self.store.record(Row(status=Status.ERROR, reason=reason, active_methods=list(methods), **common))
        status = prior.status if prior is not None and prior.status is Status.ELIMINATED else Status.OK
        made = _Measured(combo, status, common, tuple(session.notes), session.status, methods)
        if (new or not summarise) and prior is not None and prior.status is status:
            self._pending[combo.key] = made
            # its fields, warnings and whether it speculated stay as its last step left them
            kept = {k: v for k, v in common.items() if k != "speculation_active"}
            return self.store.record(replace(prior, status=status, reason=None, **kept,
                                             active_methods=list(methods) if methods is not None else None))
        return self.store.record(self._summarised(made))

    def summarise(self) -> None:
        """Every row a request was added to since its step began, summarised (a step's end, Ctrl-C included)."""
        for key in list(self._pending):
            self.store.record(self._summarised(self._pending.pop(key)))

    def resummarise(self, combos: Iterable[Combination]) -> None:
        """Rows a stopped sweep saved in the middle of a step (killed, a power cut: the step's requests kept, the
        row's fields not summarised on them yet), summarised on every request they hold (a resumed sweep)."""
        for combo in combos:
            row = self.row(combo)
            if row is not None and row.status in (Status.OK, Status.ELIMINATED) and summary_behind(row) != 0:
                notes = tuple(w for w in row.warnings if w.code is Code.SERVER_NOTE)
                self.store.record(replace(row, **self._fields(combo, row.requests, notes,
                                                              SpeculationStatus(row.speculation_active))))

    def _summarised(self, made: _Measured) -> Row:
        """The row of ``made``, its fields summarised from every request."""
        fields = self._fields(made.combo, made.common["requests"], made.notes, made.speculation)
        return Row(status=made.status, active_methods=list(made.methods) if made.methods is not None else None,
                   **{**made.common, **fields})

    def _fields(self, combo: Combination, records: Sequence[RequestRecord], notes: Sequence[Finding],
                speculation: SpeculationStatus) -> dict:
        """A row's fields summarised from its requests, with its warnings (its server's notes first) and whether
        it speculated."""
        options = self.runner.options
        fields = summarize_records(list(records), max_tokens=options.max_tokens, runs=options.runs,
                                   flags=self.runner.flags)
        active, findings = speculation_outcome(combo.is_speculative, speculation, fields.get("draft_n"),
                                               model_free=bool(combo.candidate and combo.candidate.model_free))
        fields["warnings"] = (*notes, *fields.pop("warnings"), *findings)
        fields["speculation_active"] = active
        return fields

    def failed(self, combo: Combination, reason: str, session: Session | None, new: Sequence[RequestRecord],
               wall: float, inactive: bool = False) -> Row:
        """An error row keeping every request measured before (and in) the failed step."""
        prior = self.row(combo)
        self._pending.pop(combo.key, None)
        records = (*(prior.requests if prior is not None else ()), *new)
        server = session.server if session is not None else None
        tail = server.log_tail(20) if server is not None else ""
        info = ServerInfo.of(self.runner.backend_name, server, log=session.info.get("log") if session else None,
                             port=session.info.get("port") if session else None, log_tail=tail).to_dict()
        common = self._common(combo, prior, records, wall)
        if inactive:
            common["speculation_active"] = False
        topology = server.topology if server is not None else (prior.topology if prior is not None else None)
        return self.store.record(Row(status=Status.ERROR, reason=reason, server=info, topology=topology, **common))

    def skipped(self, combo: Combination, why: str) -> Row:
        """Its target's baseline failed: 'skipped', keeping what it measured (as upstream)."""
        prior = self.row(combo)
        self._pending.pop(combo.key, None)
        records = prior.requests if prior is not None else ()
        return self.store.record(Row(status=Status.SKIPPED, reason=why, **self._common(combo, prior, records, 0.0)))

    def skip_unmeasured(self, baseline: Combination, candidates: Iterable[Combination], reason: str | None) -> list[Row]:
        """The baseline failed: its candidates not measured yet are skipped, with why (as upstream) — all of them
        when it failed before measuring anything; a candidate's own error row is kept."""
        row = self.row(baseline)
        measured_before = row is not None and bool(row.requests)
        reason = reason or (row.reason if row is not None else None) or "not measured"
        why = f"skipped: the baseline of {baseline.target.label} failed ({reason.splitlines()[0]})"
        return [self.skipped(combo, why) for combo in candidates
                if (mine := self.row(combo)) is None or (not measured_before and mine.status is Status.OK)]

    def not_probed(self, candidates: Iterable[Combination], why: str) -> list[Row]:
        """The candidates never measured (the budget ran out first)."""
        return [self.store.record(Row(status=Status.NOT_PROBED, reason=why, **self._common(combo, None, (), 0.0)))
                for combo in candidates if self.row(combo) is None]

    def eliminated(self, why: dict[Combination, str]) -> None:
        """The candidates a look left behind (the race), marked so with why; their measurements kept."""
        self.summarise()
        for combo, reason in why.items():
            row = self.row(combo)
            if row is not None and row.status is Status.OK:
                self.store.record(replace(row, status=Status.ELIMINATED, reason=f"eliminated: {reason}"))

    def bracket(self, combo: Combination, stage: int, session: str) -> None:
        """A bracketed candidate's requests of ``stage`` are compared with the baseline server after them too."""
        self.summarise()
        row = self.row(combo)
        if row is None:
            return
        requests = tuple(replace(r, compared_with=[*r.compared_with, session])
                         if r.block == stage and r.compared_with is not None and session not in r.compared_with
                         else r for r in row.requests)
        self.store.record(replace(row, requests=requests))

    def _common(self, combo: Combination, prior: Row | None, records: Sequence[RequestRecord], wall: float) -> dict:
        base: dict[str, Any] = self.runner.base_fields(combo)
        if prior is not None and prior.started_at:
            base["started_at"] = prior.started_at          # a row measured over stages started with its first
        return {**base, "requests": tuple(records), "design": self.design.of(combo, records),
                "wall_time": rounded((prior.wall_time or 0.0 if prior else 0.0) + wall, 3),
                "race": prior.race if prior else None,
                # the check samples the candidate's own servers, not a stage: a stage more (--more) keeps it
                "output_distribution": prior.output_distribution if prior else None}


def peak_memory(prior: Row | None, session: Session) -> ServerMemory | None:
    """The most any of a row's server sessions held (each stage starts new servers), and how many said."""
    earlier = prior.memory if prior is not None else None
    if session.memory is None:
        return earlier
    counted, session.memory_counted = session.memory_counted, True
    return (earlier or ServerMemory()).most(session.memory, new_session=not counted)


def in_stages(combo: Combination) -> bool:
    """Measured in a target's stages (one stream): the baseline, the candidates and the A/A control."""
    return combo.concurrency == 1 and combo.role in (Role.BASELINE, Role.SPECULATIVE, Role.CONTROL)

