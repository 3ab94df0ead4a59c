"""Run the prompt set against a ready server: warm-up first, then ``runs`` repetitions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .backends.base import Server
from .errors import RequestError, ServerError
from .prompts import Prompt
from .results import RequestRecord


@dataclass(frozen=True)
class MeasureOptions:
    runs: int = 1
    warmup: int = 1
    max_tokens: int = 512
    temperature: float = 0.0
    seed: int = 42
    request_timeout_s: float = 900.0
    stall_timeout_s: float = 120.0

    @classmethod
    def from_settings(cls, settings: dict) -> MeasureOptions:
        return cls(**{k: settings[k] for k in cls.__dataclass_fields__ if settings.get(k) is not None})


def request_seed(base_seed: int, run: int, prompt_index: int) -> int:
    """The same (prompt, repetition) gets the same seed on every server, so outputs can be compared."""
    return (base_seed + 1000 * run + prompt_index) % (2**31)


class MeasurementFailed(Exception):
    """A request failed; ``records`` holds what was measured before it (kept for the error row)."""

    def __init__(self, error: Exception, records: list[RequestRecord]):
        super().__init__(str(error))
        self.error = error
        self.records = records


def run_prompts(server: Server, prompts: list[Prompt], options: MeasureOptions,
                on_request: Callable[[int, int, RequestRecord], None] | None = None) -> list[RequestRecord]:
    """Warm up, then measure every prompt ``runs`` times. Raises :class:`MeasurementFailed`."""
    records: list[RequestRecord] = []
    try:
        for i in range(options.warmup):
            prompt = prompts[i % len(prompts)]
            _one(server, prompt, options, seed=request_seed(options.seed, -1, i),
                 max_tokens=min(options.max_tokens, 64))
        total = options.runs * len(prompts)
        for run in range(options.runs):
            for index, prompt in enumerate(prompts):
                record = _one(server, prompt, options, seed=request_seed(options.seed, run, index),
                              max_tokens=options.max_tokens, run=run)
                records.append(record)
                if on_request:
                    on_request(len(records), total, record)
    except (RequestError, ServerError) as exc:
        if server.died():
            exc = ServerError(f"the server died during the benchmark (exit code {server.process.returncode}): "
                              f"{exc.message}", "see the log lines below (out of memory? killed?)",
                              log_tail=server.log_tail(20), log_path=server.log_path, kind="died")
        raise MeasurementFailed(exc, records) from None
    return records


def _one(server: Server, prompt: Prompt, options: MeasureOptions, *, seed: int, max_tokens: int,
         run: int = -1) -> RequestRecord:
    body = server.request_body([dict(m) for m in prompt.messages], max_tokens=max_tokens,
                               temperature=options.temperature, seed=seed)
    before = server.before_request()
    response = server.send(body, request_timeout_s=options.request_timeout_s, stall_timeout_s=options.stall_timeout_s)
    counts = server.draft_counts(response, before)
    return RequestRecord(
        prompt_id=prompt.id, category=prompt.category, run=run,
        ttft_s=_r(response.ttft_s), total_s=_r(response.total_s), decode_tps=_r(response.decode_tps),
        server_decode_tps=_r(server.server_decode_tps(response)), server_ttft_s=_r(response.server_ttft_s),
        prompt_tokens=response.prompt_tokens, completion_tokens=response.completion_tokens,
        draft_n=counts.drafted, draft_n_accepted=counts.accepted, verify_steps=counts.steps,
        draft_detail={k: v for k, v in counts.extra.items() if v is not None} or None,
        draft_fragments=response.draft_fragments,
        finish_reason=response.finish_reason, text=response.text,
    )


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 5)
