"""One LM Studio prediction through its Python SDK, timed, and what its typed result says.

Needs the optional ``lmstudio`` package (``pip install 'draftbench[lmstudio]'``); only
:mod:`draftbench.backends.lmstudio.sdk` imports this module, and only when the SDK path is used.

* The request: ``LLM.respond_stream(chat, config=…)`` with ``maxTokens``, ``temperature`` and the
  speculative-decoding keys of ``LlmPredictionConfig``: ``draftModel``,
  ``speculativeDecodingNumDraftTokensExact`` (k), ``speculativeDecodingMinContinueDraftingProbability``
  (p-min), ``speculativeDecodingMinDraftLengthToConsider``. The SDK has no per-request seed.
* Timing: client clock at each streamed fragment (TTFT = first fragment); LM Studio's own
  ``timeToFirstTokenSec`` is kept beside it. The SDK's receive time-out
  (``set_sync_api_timeout``) is the stall limit; the overall limit is checked per fragment.
* Counts: ``LlmPredictionStats`` (``predictedTokensCount``, ``tokensPerSecond``, ``usedDraftModelKey``,
  ``accepted/rejected/ignored/totalDraftTokensCount``), read with the same rule as the REST path
  (:func:`lmstudio_rest.counts_from_stats`: ignored drafts are neither accepted nor rejected).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import cast

import lmstudio

from ...common.errors import RequestError
from ...results import fragments
from ..base import CountsSource, DraftCounts
from ..http.client import StreamedResponse
from ..http.server_values import server_count
from .rest import counts_from_stats

# LM Studio's stop reasons in the OpenAI words the rest of draftbench uses.
_FINISH = {"maxPredictedTokensReached": "length", "contextLengthReached": "length", "eosFound": "stop",
           "stopStringFound": "stop", "toolCalls": "tool_calls"}


class PredictionRefused(RequestError):
    """LM Studio answered the prediction with an error (e.g. a draft model it will not pair)."""

    def __init__(self, detail: str):
        super().__init__(f"LM Studio refused the prediction: {detail}", "see LM Studio's Developer log "
                         "(`lms log stream`)")
        self.detail = detail


@dataclass(frozen=True)
class DraftSettings:
    """What each request asks of LM Studio's speculative decoding (None = LM Studio's default)."""

    draft: str | None = None
    num_draft_tokens: int | None = None            # k
    min_continue_probability: float | None = None  # p-min
    min_draft_length: int | None = None

    def config(self, *, max_tokens: int, temperature: float) -> lmstudio.LlmPredictionConfigDict:
        """The ``LlmPredictionConfig`` (in its dict form) for one request."""
        config: lmstudio.LlmPredictionConfigDict = {"maxTokens": max_tokens, "temperature": temperature}
        if self.draft is not None:
            config["draftModel"] = self.draft
            if self.num_draft_tokens is not None:
                config["speculativeDecodingNumDraftTokensExact"] = self.num_draft_tokens
            if self.min_continue_probability is not None:
                config["speculativeDecodingMinContinueDraftingProbability"] = self.min_continue_probability
            if self.min_draft_length is not None:
                config["speculativeDecodingMinDraftLengthToConsider"] = self.min_draft_length
        return config


def server_error_text(exc: BaseException) -> str:
    """The first line of what LM Studio (or the SDK) said, without the SDK's framing."""
    if isinstance(exc, lmstudio.LMStudioServerError) and exc.server_error is not None:
        details = exc.server_error
        parts = [str(p) for p in (details.title, details.cause) if p]
        if parts:
            return ": ".join(parts)
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def predict(model: lmstudio.LLM, messages: list[dict], config: lmstudio.LlmPredictionConfigDict, *,
            record_fragments: bool, request_timeout_s: float, stall_timeout_s: float) -> StreamedResponse:
    """Stream one chat response and time it. Raises :class:`RequestError` with the cause."""
    # from_history takes the wire format, with plain strings accepted as text content
    chat = lmstudio.Chat.from_history(cast("lmstudio.ChatHistoryDataDict", {"messages": messages}))
    lmstudio.set_sync_api_timeout(stall_timeout_s)
    result = StreamedResponse(t_start=time.perf_counter())
    pieces: list[tuple[int, bool]] = []
    tokens_streamed = 0
    try:
        stream = model.respond_stream(chat, config=config)
        for fragment in stream:
            now = time.perf_counter()
            if now - result.t_start > request_timeout_s:
                stream.cancel()
                raise RequestError(f"request took longer than {request_timeout_s:g} s",
                                   "raise settings.request_timeout_s or lower max_tokens")
            result.n_events += 1
            tokens_streamed += fragment.tokens_count
            pieces.append((fragment.tokens_count, fragment.contains_drafted))
            if fragment.content or fragment.tokens_count:
                if result.t_first is None:
                    result.t_first = now
                result.t_last = now
            if fragment.reasoning_type == "none":
                result.text += fragment.content
            else:
                result.reasoning += fragment.content
        outcome = stream.result()
    except lmstudio.LMStudioTimeoutError:
        raise RequestError(f"the prediction stalled: nothing from LM Studio for {stall_timeout_s:g} s",
                           "raise settings.stall_timeout_s if LM Studio is just slow") from None
    except lmstudio.LMStudioWebsocketError as exc:
        raise RequestError(f"the connection to LM Studio broke mid-prediction ({server_error_text(exc)}); LM Studio "
                           "may have crashed or unloaded the model", "check LM Studio, then resume the sweep") from None
    except lmstudio.LMStudioChannelClosedError as exc:
        raise RequestError(f"LM Studio ended the prediction without a result ({server_error_text(exc)})",
                           "check LM Studio (did it unload the model?), then resume the sweep") from None
    except lmstudio.LMStudioServerError as exc:
        raise PredictionRefused(server_error_text(exc)) from None
    except lmstudio.LMStudioError as exc:
        raise RequestError(f"LM Studio's SDK failed during the prediction: {server_error_text(exc)}",
                           "check LM Studio, then resume the sweep") from None
    result.t_end = time.perf_counter()
    add_outcome(result, outcome, tokens_streamed, fragments.encode(pieces) if record_fragments else None)
    return result


def add_outcome(result: StreamedResponse, outcome: lmstudio.PredictionResult, tokens_streamed: int,
                draft_fragments: str | None) -> None:
    """What LM Studio reports once the prediction ended: token counts, why it stopped, its own TTFT, its
    statistics and the draft settings it applied."""
    stats = outcome.stats
    completion = stats.predicted_tokens_count if stats.predicted_tokens_count is not None else tokens_streamed
    result.usage = {"prompt_tokens": stats.prompt_tokens_count, "completion_tokens": completion}
    result.finish_reason = _FINISH.get(stats.stop_reason, stats.stop_reason)
    ttft = stats.time_to_first_token_sec
    # LM Studio's own figure, kept beside the client's; a value that cannot be a time is not recorded
    result.server_ttft_s = ttft if isinstance(ttft, (int, float)) and math.isfinite(ttft) and ttft >= 0 else None
    if draft_fragments is not None:
        result.draft_fragments = draft_fragments
    result.extras["sdk_stats"] = stats
    applied = outcome.prediction_config
    result.extras["applied"] = {
        "num_draft_tokens_exact": applied.speculative_decoding_num_draft_tokens_exact,
        "min_continue_drafting_probability": applied.speculative_decoding_min_continue_drafting_probability,
        "min_draft_length_to_consider": applied.speculative_decoding_min_draft_length_to_consider,
    }


def draft_counts(stats: lmstudio.LlmPredictionStats, applied: dict, *, draft_requested: bool) -> DraftCounts:
    """Draft counters from the typed statistics, with LM Studio's extras (ignored, total, the
    draft it used, the k and p-min it reports having applied) kept in ``details``."""
    as_rest = {"accepted_draft_tokens_count": stats.accepted_draft_tokens_count,
               "rejected_draft_tokens_count": stats.rejected_draft_tokens_count,
               "ignored_draft_tokens_count": stats.ignored_draft_tokens_count,
               "total_draft_tokens_count": stats.total_draft_tokens_count}
    counts = counts_from_stats(as_rest, draft_requested=draft_requested)
    details = {"ignored": server_count(stats.ignored_draft_tokens_count, "stats.ignoredDraftTokensCount"),
               "total": server_count(stats.total_draft_tokens_count, "stats.totalDraftTokensCount"),
               "draft_model": stats.used_draft_model_key, **applied}
    source = counts.source
    if source is CountsSource.STATS:
        source = CountsSource.SDK_STATS
    elif source is CountsSource.STATS_WITHOUT_DRAFT:
        source = CountsSource.SDK_STATS_WITHOUT_DRAFT
    return replace(counts, details={k: v for k, v in details.items() if v is not None}, source=source)
