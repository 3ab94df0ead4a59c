"""Run the prompt set against a ready server: warm-up first, then ``runs`` repetitions.

The warm-up never uses a measured prompt (``config.prompt_sets.warmup_prompts``): a method that
remembers answers across requests (``ngram-mod``) would otherwise answer the first measured
request from memory. :func:`measure_one` and :func:`warm_up` are the pieces the sweep's design
(``sweep/run.py``) sends requests with.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..analysis.stats import rounded
from ..backends.base import DraftCounts, Server
from ..backends.http.client import StreamedResponse
from ..backends.http.server_values import FIX_SERVER_DATA, server_count
from ..common.errors import RequestError, ServerError, ServerErrorKind
from ..config.long_prompts import TOLERANCE
from ..config.prompt_sets import warmup_prompts
from ..config.prompts import Prompt
from ..config.settings import DEFAULTS, Settings
from ..results.file import RequestRecord
from .context import with_context


@dataclass(frozen=True)
class MeasureOptions:
    runs: int = DEFAULTS.runs
    warmup: int = DEFAULTS.warmup
    max_tokens: int = DEFAULTS.max_tokens
    temperature: float = DEFAULTS.temperature
    seed: int = DEFAULTS.seed
    request_timeout_s: float = DEFAULTS.request_timeout_s
    stall_timeout_s: float = DEFAULTS.stall_timeout_s

    @classmethod
    def from_settings(cls, settings: Settings) -> MeasureOptions:
        return cls(runs=settings.runs, warmup=settings.warmup, max_tokens=settings.max_tokens,
                   temperature=settings.temperature, seed=settings.seed, request_timeout_s=settings.request_timeout_s,
                   stall_timeout_s=settings.stall_timeout_s)


def warm_up(server: Server, prompts: Sequence[Prompt], options: MeasureOptions) -> list[Prompt]:
    """Send the warm-up requests (prompts outside the measured set); the prompts used."""
    used = warmup_prompts(prompts, options.warmup)
    for i, prompt in enumerate(used):
        measure_one(server, prompt, options, seed=request_seed(options.seed, -1, i), max_tokens=min(options.max_tokens, 64))
    return used


def request_seed(base_seed: int, run: int, prompt_index: int) -> int:
    """The same (prompt, repetition) gets the same seed on every server, so outputs can be compared."""
    return (base_seed + 1000 * run + prompt_index) % (2**31)


class MeasurementFailed(Exception):
    """A request failed; ``records`` holds what was measured before it (kept for the error row)."""

    def __init__(self, error: RequestError | ServerError, records: list[RequestRecord]):
        super().__init__(str(error))
        self.error = error
        self.records = records


@dataclass(frozen=True)
class Schedule:
    """Part of a combination's requests, for a search that measures in stages (the adaptive race):
    which (run, prompt index) pairs this server measures, the records an earlier server of the same
    combination measured (kept in the row), and whether to go on after each request."""

    order: tuple[tuple[int, int], ...]
    earlier: tuple[RequestRecord, ...] = ()
    keep_going: Callable[[list[RequestRecord]], bool] | None = None   # called with earlier + new records


def run_prompts(server: Server, prompts: list[Prompt], options: MeasureOptions,
                on_request: Callable[[int, int, RequestRecord], None] | None = None, *,
                order: Sequence[tuple[int, int]] | None = None,
                keep_going: Callable[[list[RequestRecord]], bool] | None = None,
                answers: Mapping[str, str] | None = None) -> list[RequestRecord]:
    """Warm up (on prompts outside the measured set), then measure every prompt ``runs`` times (or
    the (run, prompt index) pairs of ``order``, stopping early when ``keep_going`` says so). A second
    turn is sent after ``answers``' answer to its first turn, or, without ``answers`` (the baseline),
    after this server's first answer to it (see :mod:`.context`). Raises :class:`MeasurementFailed`."""
    records: list[RequestRecord] = []
    if order is None:
        order = [(run, index) for run in range(options.runs) for index in range(len(prompts))]
    known = dict(answers or {})
    try:
        warm_up(server, prompts, options)
        for run, index in order:
            record = measure_one(server, with_context(prompts[index], known), options,
                                 seed=request_seed(options.seed, run, index), max_tokens=options.max_tokens, run=run)
            if answers is None and record.text is not None:
                known.setdefault(record.prompt_id, record.text)
            records.append(record)
            if on_request:
                on_request(len(records), len(order), record)
            if keep_going is not None and not keep_going(records):
                break
    except (RequestError, ServerError) as exc:
        raise MeasurementFailed(explain_failure(server, exc), records) from None
    return records


def explain_failure(server: Server, exc: RequestError | ServerError) -> RequestError | ServerError:
    """A failed request, or the server's death when that is what it was."""
    if server.died():
        cause = server.death_cause()
        if cause is not None:
            return ServerError(f"the server died during the benchmark (exit code {server.returncode}): {cause.message}",
                               cause.fix, log_tail=server.log_tail(20), log_path=server.log_path, kind=cause.kind)
        return ServerError(f"the server died during the benchmark (exit code {server.returncode}): {exc.message}",
                           "see the log lines below (out of memory? killed?)", log_tail=server.log_tail(20),
                           log_path=server.log_path, kind=ServerErrorKind.DIED)
    return exc


def measure_one(server: Server, prompt: Prompt, options: MeasureOptions, *, seed: int, max_tokens: int,
                run: int = -1) -> RequestRecord:
    """One streamed request, as the results file records it."""
    body = server.request_body([dict(m) for m in prompt.messages], max_tokens=max_tokens,
                               temperature=options.temperature, seed=seed)
    before = server.before_request()
    machine = server.machine_reading()
    response = server.send(body, request_timeout_s=options.request_timeout_s, stall_timeout_s=options.stall_timeout_s)
    others = server.others_share(machine)
    check_prompt_tokens(prompt, response.prompt_tokens)
    record = request_record(server, prompt, run, response, server.draft_counts(response, before))
    return replace(record, other_cpu_share=rounded(others, 3))


def check_prompt_tokens(prompt: Prompt, reported: int | None) -> None:
    """A long prompt's length as the server counted it, against the count its own tokenizer gave when it was cut
    (``Prompt.tokens``): a server or a tokenizer that disagrees would have the row judged at a length it was not."""
    if prompt.tokens is None or reported is None or abs(reported - prompt.tokens) <= TOLERANCE:
        return
    raise RequestError(f"the server counted {reported:,} prompt tokens for {prompt.id} (usage.prompt_tokens), which "
                       f"its own tokenizer counted as {prompt.tokens:,} when it was cut: the row would be judged at a "
                       "length it was not", "check that the server is the llama-server draftbench starts, unchanged "
                       "(its /tokenize and its completions must count alike)")


def request_record(server: Server, prompt: Prompt, run: int, response: StreamedResponse,
                   counts: DraftCounts) -> RequestRecord:
    """One measured request as the results file records it."""
    counts = check_draft_counts(counts)   # accepted ≤ drafted, whole numbers
    prefill_s, prefill_tps = server.server_prefill(response)
    return RequestRecord(
        prompt_id=prompt.id, category=prompt.category, run=run,
        ttft_s=rounded(response.ttft_s, 5), total_s=rounded(response.total_s, 5), decode_tps=rounded(response.decode_tps, 5),
        server_decode_tps=rounded(server.server_decode_tps(response), 5),
        server_ttft_s=rounded(response.server_ttft_s, 5),
        prompt_tokens=response.prompt_tokens, completion_tokens=response.completion_tokens,
        draft_n=counts.drafted, draft_n_accepted=counts.accepted, verify_steps=counts.steps,
        accepted_per_pos=list(counts.accepted_per_pos) if counts.accepted_per_pos is not None else None,
        draft_source=counts.source.value if counts.source else None, draft_details=counts.details or None,
        draft_fragments=response.draft_fragments,
        finish_reason=response.finish_reason, text=response.text,
        server_prefill_s=rounded(prefill_s, 5), server_prefill_tps=rounded(prefill_tps, 3),
    )


def check_draft_counts(counts: DraftCounts) -> DraftCounts:
    """``counts`` with whole-number counters; refuses counters that cannot be true (accepted > drafted).

    Acceptance is accepted / drafted, so this keeps it inside [0, 1]; a server claiming more
    accepted than drafted tokens is reported, never printed as an acceptance above 100%.
    """
    where = f" (from {counts.source.value})" if counts.source else ""
    drafted = server_count(counts.drafted, f"drafted tokens{where}")
    accepted = server_count(counts.accepted, f"accepted draft tokens{where}")
    steps = server_count(counts.steps, f"verify steps{where}")
    if drafted is not None and accepted is not None and accepted > drafted:
        raise RequestError(f"the server reported {accepted} accepted of {drafted} drafted tokens{where}; "
                           "acceptance cannot exceed 100%", FIX_SERVER_DATA)
    return replace(counts, drafted=drafted, accepted=accepted, steps=steps)
