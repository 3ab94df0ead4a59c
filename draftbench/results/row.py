"""A results row (one combination) and its requests, each field declared once with its JSON.

Rows are frozen dataclasses; a row read from a file keeps the keys it does not know in ``extra`` and
writes them back unchanged. Files and their loading are :mod:`draftbench.results.file`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from ..common.numbers import temperature_text
from .bounds import (
    FRACTION,
    MAX_STAGES,
    MAX_TOKENS,
    NON_NEGATIVE,
    RATE,
    RATE_SUMMARY,
    SECONDS,
    STEP_SUM,
    STEPS,
    TIME_SUMMARY,
    TOKEN_SUM,
    TOKENS,
)
from .findings import Finding
from .json_types import (
    BOOL,
    STR,
    Int,
    ListOf,
    MapOf,
    Num,
    OneOf,
    Spec,
    Str,
    check_fields,
    checked_instance,
    checked_values,
    declarations,
    declare,
    read_fields,
    spec_of,
    write_fields,
)
from .kinds import ROLES, STATUSES, Role, Status
from .memory import ServerMemory
from .speedup import Speedup
from .theory import Theory
from .value_shapes import (
    ACCEPTED_PER_POS,
    BY_CATEGORY,
    CANDIDATE,
    CEILING,
    COUNTER_BOUND,
    DEGENERATE,
    DESIGN,
    DRAFT_DETAILS,
    DRAFT_FRAGMENTS,
    EQUIVALENCE,
    K_PREDICTION,
    LOAD,
    MACHINE_LOAD,
    METHOD_STATS,
    OUTPUT_DISTRIBUTION,
    RACE,
    SERVER,
    SPEEDUP,
    SYNTHETIC,
    TOPOLOGY,
)


def combination_title(role: Role, target: str, draft: str | None, draft_max: int | None, *, show_k: bool,
                      concurrency: int = 1, synthetic: str | None = None, context_tokens: int | None = None,
                      temperature: float | None = None) -> str:
    """How a combination is named to people (console, report, log file names); ``synthetic`` is a
    ceiling run's level (see :mod:`draftbench.analysis.draft.ceiling`)."""
    streams = (f" [{concurrency} streams]" if concurrency != 1 else "") + \
        (f" [{context_tokens:,}-token prompts]" if context_tokens is not None else "") + \
        (f" [temperature {temperature_text(temperature)}]" if temperature is not None else "")
    if role is Role.BASELINE:
        return f"{target} (baseline){streams}"
    if role is Role.CONTROL:
        return f"{target} (baseline again, drift check){streams}"
    if role is Role.DRAFT_ALONE:
        return f"{target} (draft alone, for its cost ratio){streams}"
    k = f" (k={draft_max})" if show_k and draft_max is not None else ""
    if role is Role.CEILING:
        what = "full acceptance" if synthetic == "full" else "its measured acceptance"
        return f"{target} + {draft}{k}{streams} [synthetic: {what}]"
    return f"{target} + {draft}{k}{streams}"


# Each stored field is declared once, here: its JSON type, unit, and whether a file must hold it
# (see json_types.declare). The file's keys are written in this order; adding a field is one line
# (docs/architecture.md, "Adding a field").

@dataclass(frozen=True)
class RequestRecord:
    """One measured request. Times in seconds on the client clock unless the name says otherwise."""

    prompt_id: str = declare(Str(nullable=False), required=True)
    category: str = declare(Str(nullable=False), required=True)
    run: int = declare(Int(nullable=False), required=True)
    ttft_s: float | None = declare(SECONDS, "s")
    total_s: float | None = declare(SECONDS, "s")
    decode_tps: float | None = declare(RATE, "tok/s")          # client: (completion_tokens - 1) / (t_last - t_first)
    server_decode_tps: float | None = declare(RATE, "tok/s")   # server's own figure (llama.cpp timings.predicted_per_second)
    server_ttft_s: float | None = declare(SECONDS, "s")        # server's own TTFT (LM Studio's SDK: timeToFirstTokenSec)
    prompt_tokens: int | None = declare(TOKENS, "tokens")
    completion_tokens: int | None = declare(TOKENS, "tokens")
    draft_n: int | None = declare(TOKENS, "tokens")
    draft_n_accepted: int | None = declare(TOKENS, "tokens")
    verify_steps: int | None = declare(STEPS, "steps")
    accepted_per_pos: list | None = declare(ListOf(Int(nullable=False, minimum=0, maximum=MAX_TOKENS, unit="tokens")),
                                            "tokens")  # accepted draft tokens by draft position (0 = first drafted token)
    draft_source: str | None = declare(STR)           # where the draft counts came from (backends.CountsSource)
    draft_details: dict | None = declare(DRAFT_DETAILS)   # backend-specific draft statistics, as reported
    draft_fragments: str | None = declare(STR)        # LM Studio SDK: fragment trace, see draftbench.results.fragments
    finish_reason: str | None = declare(STR)
    text: str | None = declare(STR)
    error: str | None = declare(STR)
    # where it was measured (schema 4; sweep/schedule.py), left out when None so older files write back as they were
    session: str | None = declare(STR, omit_when_none=True)       # the server session (one process) that answered
    block: int | None = declare(Int(minimum=0, maximum=MAX_STAGES), omit_when_none=True)   # the schedule's block, or the stage
    seen_before: bool | None = declare(BOOL, omit_when_none=True)  # the method's state could have seen this prompt
    compared_with: list | None = declare(ListOf(Str(nullable=False)), omit_when_none=True)  # its baseline sessions
    # a baseline request measured beside a candidate's server (a stage's baseline server is shared): its session
    beside: str | None = declare(STR, omit_when_none=True)
    # the server's own prompt processing (llama.cpp timings.prompt_ms, prompt_per_second): prefill apart from decode
    server_prefill_s: float | None = declare(SECONDS, "s", omit_when_none=True)
    server_prefill_tps: float | None = declare(RATE, "tok/s", omit_when_none=True)
    # other programs' share of every CPU while it ran (lifetime/machine_load.py): a burst says the request
    # measured the machine's contention, not the method (analysis/pairing.py leaves such a pair out)
    other_cpu_share: float | None = declare(FRACTION, omit_when_none=True)

    def to_dict(self) -> dict:
        return write_fields(self)

    @classmethod
    def from_dict(cls, data: dict) -> RequestRecord:
        return cls(**read_fields(cls, data))

    @classmethod
    def from_checked(cls, data: dict) -> RequestRecord:
        """A request from an object the results schema has accepted (see :func:`json_types.checked_instance`)."""
        return checked_instance(cls, checked_values(cls, data))


def row_key(role: Role, target: str, draft: str | None, draft_max: int | None, *, synthetic: dict | None,
            concurrency: int, context_tokens: int | None, temperature: float | None) -> tuple:
    """A row's identity for resume (:attr:`Row.key`), also what a planned row is matched on
    (``sweep.plan``): one definition, so a plan always finds its rows."""
    key: tuple = (role, target, draft, draft_max)
    if role is Role.CEILING:
        key += ((synthetic or {}).get("level"),)
    key = key if concurrency == 1 else (*key, concurrency)
    key = key if context_tokens is None else (*key, ("context", context_tokens))
    return key if temperature is None else (*key, ("temperature", temperature))


@dataclass(frozen=True)
class Row:
    """One combination: a target alone (baseline), with a draft, or a draft alone."""

    OTHER_KEYS: ClassVar[dict[str, Spec]] = {"error": STR}   # upstream's failure marker, read into status/reason

    # upstream's keys, first and in upstream's order
    target: str = declare(Str(nullable=False), required=True, upstream=True)
    draft: str | None = declare(STR, upstream=True)
    mean_tps: float | None = declare(RATE, "tok/s", upstream=True)
    median_tps: float | None = declare(RATE, "tok/s", upstream=True)
    mean_ttft: float | None = declare(SECONDS, "s", upstream=True)
    mean_total_time: float | None = declare(SECONDS, "s", upstream=True)
    wall_time: float | None = declare(SECONDS, "s", upstream=True)
    acceptance_rate: float | None = declare(FRACTION, "accepted/drafted", upstream=True)
    # draftbench additions
    status: Status = declare(Str(nullable=False, choices=STATUSES), default=Status.OK)
    reason: str | None = declare(STR)                 # why it errored or was skipped
    role: Role = declare(Str(nullable=False, choices=ROLES), default=Role.BASELINE)
    draft_max: int | None = declare(Int(minimum=0, maximum=MAX_TOKENS, unit="tokens"), "tokens")
    target_path: str | None = declare(STR)
    draft_path: str | None = declare(STR)
    speculation_active: bool | None = declare(BOOL)
    candidate: dict | None = declare(CANDIDATE)       # what was tried: {label, method, draft, params} (config.candidates)
    active_methods: list | None = declare(ListOf(Str(nullable=False)))  # speculative methods the server said it ran ([] = plain decoding)
    draft_n: int | None = declare(TOKEN_SUM, "tokens")
    draft_n_accepted: int | None = declare(TOKEN_SUM, "tokens")
    verify_steps: int | None = declare(STEP_SUM, "steps")
    mean_accepted_len: float | None = declare(Num(minimum=0, maximum=MAX_TOKENS), "tokens/step")  # 1 + accepted/steps (llama-server's "mean len")
    accepted_per_pos: list | None = declare(ACCEPTED_PER_POS, "tokens")    # Σ accepted draft tokens by draft position over the requests
    diagnosis: Finding | None = declare(spec_of(Finding, nullable=True))  # where the draft's tokens are rejected (analysis.draft.positions)
    k_prediction: dict | None = declare(K_PREDICTION)   # tok/s predicted for every k from this row (analysis.draft.best_k)
    synthetic: dict | None = declare(SYNTHETIC)       # ceiling rows: {level, synth_len, k, from_mean_accepted_len}
    ceiling: dict | None = declare(CEILING)           # speculative rows: this draft against its ceiling (analysis.draft.ceiling)
    draft_fragments: dict | None = declare(DRAFT_FRAGMENTS)   # LM Studio SDK: runs and placement of drafted fragments
    tps: dict | None = declare(RATE_SUMMARY, "tok/s")          # summary of per-request decode tok/s
    server_tps: dict | None = declare(RATE_SUMMARY, "tok/s")   # summary of the server's own decode tok/s
    ttft_s: dict | None = declare(TIME_SUMMARY, "s")
    total_s: dict | None = declare(TIME_SUMMARY, "s")
    load_time_s: float | None = declare(SECONDS, "s")
    run_to_run_cv: float | None = declare(NON_NEGATIVE, "stdev/mean")
    by_category: dict | None = declare(BY_CATEGORY)   # category -> {mean_tps, acceptance_rate, n}
    speedup: Speedup | None = declare(SPEEDUP)        # vs the target's baseline (analysis.stats.speedup)
    speedup_by_category: dict[str, Speedup] | None = declare(MapOf(SPEEDUP))  # category -> speed-up on its requests
    speedup_in_session: Speedup | None = declare(SPEEDUP)   # the session workload's, kept out of speedup (session.py)
    confirmed: Speedup | None = declare(SPEEDUP)      # on the confirmation block alone: fresh requests (decision.py)
    method_stats: dict | None = declare(METHOD_STATS)   # speculative implementation -> its counters (results.method_stats)
    degenerate_output: dict | None = declare(DEGENERATE)   # requests resting on the target's looping output
    equivalence: dict | None = declare(EQUIVALENCE)   # output vs the baseline's at temperature 0
    theory: Theory | None = declare(spec_of(Theory, nullable=True))   # the textbook model beside the measurement
    server: dict | None = declare(SERVER)             # backend, command, version, log, port
    topology: dict | None = declare(TOPOLOGY)         # where the models ran: RPC endpoints and buffers, vLLM parallelism
    started_at: str | None = declare(STR, "ISO 8601")
    race: dict | None = declare(RACE)                 # adaptive search: loads, requests planned, interval, decision
    design: dict | None = declare(DESIGN)             # how it was measured against its baseline (sweep/schedule.py)
    counter_bound: dict | None = declare(COUNTER_BOUND, "×")   # the most its counters allow (analysis.comparison)
    concurrency: int = declare(Int(nullable=False, minimum=1, maximum=MAX_TOKENS), "streams", default=1)  # requests in flight at once; 1 in older files
    load: dict | None = declare(LOAD)                 # N > 1: what the N streams did together (measure.concurrent)
    # the context axis (settings.context_tokens): the prompts' length; the key grows only when it is set
    context_tokens: int | None = declare(Int(minimum=1, maximum=MAX_TOKENS), "tokens", omit_when_none=True)
    memory: ServerMemory | None = declare(spec_of(ServerMemory, nullable=True), omit_when_none=True)  # what its server held
    machine_load: dict | None = declare(MACHINE_LOAD)   # other programs' CPU share while it was measured (sweep.session)
    # the temperature axis (settings.temperature as a list): its requests' temperature; the key grows only when set
    temperature: float | None = declare(Num(minimum=0, maximum=5), omit_when_none=True)
    # temperature > 0: the candidate's answers against the target alone's as distributions (analysis.output_distribution)
    output_distribution: dict | None = declare(OUTPUT_DISTRIBUTION, omit_when_none=True)
    # new fields go above this line: findings and requests end the row
    warnings: tuple[Finding, ...] = declare(ListOf(OneOf((Str(nullable=False), spec_of(Finding)), nullable=False)),
                                            factory=tuple)   # schema 1 files hold them as text
    requests: tuple[RequestRecord, ...] = declare(ListOf(spec_of(RequestRecord)), factory=tuple)
    extra: dict = field(default_factory=dict)  # unknown keys from the file, written back as they were

    def __post_init__(self) -> None:
        # only what identifies the row: a measured value is never refused (a NaN is saved as null)
        check_fields(self, "row", names=("role", "status", "concurrency"))
        _make_typed(self.__dict__, Speedup.from_dict, Theory.from_dict)   # a frozen dataclass: its own dict

    @property
    def key(self) -> tuple:
        """Identity for resume: what was measured, not how it turned out. One stream (and no context length)
        keeps the key it always had, so older files resume; a ceiling row is one of several levels for the same
        draft."""
        return row_key(self.role, self.target, self.draft, self.draft_max, synthetic=self.synthetic,
                       concurrency=self.concurrency, context_tokens=self.context_tokens, temperature=self.temperature)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def measured(self) -> bool:
        """It holds measurements: a finished row, or one an adaptive race eliminated after its probe."""
        return self.status in (Status.OK, Status.ELIMINATED)

    @property
    def is_speculative(self) -> bool:
        return self.role is Role.SPECULATIVE and self.draft is not None

    def counts_as_speedup(self) -> bool:
        """Only a measured, speculating row may ever be shown as a speed-up."""
        return self.ok and self.is_speculative and self.speculation_active is not False

    def to_dict(self) -> dict:
        out = write_fields(self)
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Row:
        """A row from its JSON object, every value checked by the constructors."""
        if not isinstance(data, dict) or not isinstance(data.get("target"), str):
            raise ValueError("a result row needs a string 'target'")
        values, extra = _read_row(data, dict(read_fields(cls, data)), RequestRecord.from_dict)
        return cls(extra=extra, **values)

    @classmethod
    def from_checked(cls, data: dict) -> Row:
        """A row from a JSON object that the results schema has accepted (``ResultsFile.from_dict`` walks
        the whole file first): made typed as the constructor does, its values not checked again (see
        :func:`json_types.checked_instance`)."""
        values, extra = _read_row(data, checked_values(cls, data), RequestRecord.from_checked)
        values["extra"] = extra
        _make_typed(values, Speedup.from_checked, Theory.from_checked)
        return checked_instance(cls, values)


def _read_row(data: dict, values: dict, request_of: Callable[[dict], RequestRecord]) -> tuple[dict, dict]:
    """A row's field values from its JSON object ``data`` (``values``: its declared keys, changed here)
    and the keys it does not declare; upstream's markers become fields."""
    declared = declarations(Row)
    extra = {} if declared.keys() >= data.keys() else {k: v for k, v in data.items() if k not in declared}
    if "error" in data and "status" not in data:
        # upstream marks failed runs with {"error": "server_failed"}
        values["status"] = Status.ERROR
        values["reason"] = str(data["error"])
        extra.pop("error", None)
    if "role" not in data:
        values["role"] = Role.BASELINE if data.get("draft") is None else Role.SPECULATIVE
    if values.get("role") == Role.SPECULATIVE and "speculation_active" not in data:
        values["speculation_active"] = None  # upstream never checked
    values["warnings"] = tuple(Finding.from_value(w) for w in data.get("warnings") or ())
    values["requests"] = tuple(request_of(r) for r in data.get("requests") or () if isinstance(r, dict))
    return values, extra


def _make_typed(values: dict, speedup_of: Callable[[dict], Speedup], theory_of: Callable[[dict], Theory]) -> None:
    """A row's values as the code reads them, in place: a file's (or a caller's) text becomes the member,
    so that code compares members, never strings; findings, speed-ups and the theory become their classes."""
    values["role"] = Role(values["role"])
    values["status"] = Status(values["status"])
    warnings = values["warnings"]
    if not all(isinstance(w, Finding) for w in warnings):
        values["warnings"] = tuple(w if isinstance(w, Finding) else Finding.from_value(w) for w in warnings)
    diagnosis = values["diagnosis"]
    if diagnosis is not None and not isinstance(diagnosis, Finding):
        values["diagnosis"] = Finding.from_value(diagnosis)
    for name in ("speedup", "speedup_in_session", "confirmed"):
        speed = values[name]
        if speed is not None and not isinstance(speed, Speedup):
            values[name] = speedup_of(speed)
    by_category = values["speedup_by_category"]
    if by_category is not None:
        if not isinstance(by_category, dict):
            raise ValueError("speedup_by_category is not an object")
        values["speedup_by_category"] = {category: speed if isinstance(speed, Speedup) else speedup_of(speed)
                                         for category, speed in by_category.items()}
    theory = values["theory"]
    if theory is not None and not isinstance(theory, Theory):
        values["theory"] = theory_of(theory)
    memory = values["memory"]
    if memory is not None and not isinstance(memory, ServerMemory):
        values["memory"] = ServerMemory.from_dict(memory)


UPSTREAM_ROW_KEYS = tuple(name for name, declared in declarations(Row).items() if declared.upstream)
