"""Stream one chat completion and time it.

Token counts always come from the server (``usage``/``timings``): servers may pack several
tokens into one SSE event (vLLM does), so counting events would be wrong. Times come from
``time.perf_counter`` on this side; the server's own timings are kept beside them.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import requests

from .errors import RequestError

# Top-level stream fields that are bookkeeping, not measurements.
_IGNORED_FIELDS = {"choices", "id", "object", "created", "model", "system_fingerprint", "service_tier"}


@dataclass
class StreamedResponse:
    """What one streamed request produced, before any interpretation."""

    t_start: float
    t_first: float | None = None     # first content *or* reasoning text
    t_last: float | None = None      # last content or reasoning text
    t_end: float | None = None
    text: str = ""
    reasoning: str = ""
    usage: dict | None = None
    timings: dict | None = None      # llama.cpp's per-request timings
    extras: dict = field(default_factory=dict)  # other top-level fields seen (vLLM metrics, LM Studio stats…)
    finish_reason: str | None = None
    n_events: int = 0
    server_ttft_s: float | None = None   # the server's own time to first token, where it reports one
    draft_fragments: str | None = None   # where accepted drafts landed (see draftbench.fragments), where known

    @property
    def ttft_s(self) -> float | None:
        return None if self.t_first is None else self.t_first - self.t_start

    @property
    def total_s(self) -> float | None:
        return None if self.t_end is None else self.t_end - self.t_start

    @property
    def completion_tokens(self) -> int | None:
        if self.usage and isinstance(self.usage.get("completion_tokens"), int):
            return self.usage["completion_tokens"]
        if self.timings and isinstance(self.timings.get("predicted_n"), int):
            return self.timings["predicted_n"]
        return None

    @property
    def prompt_tokens(self) -> int | None:
        if self.usage and isinstance(self.usage.get("prompt_tokens"), int):
            return self.usage["prompt_tokens"]
        if self.timings and isinstance(self.timings.get("prompt_n"), int):
            return self.timings["prompt_n"]
        return None

    @property
    def decode_tps(self) -> float | None:
        """Tokens after the first, over the time from first to last token (client clock)."""
        n = self.completion_tokens
        if n is None or n < 2 or self.t_first is None or self.t_last is None or self.t_last <= self.t_first:
            return None
        return (n - 1) / (self.t_last - self.t_first)


def normalise_base_url(url: str) -> str:
    """Accept ``http://host:port``, ``…/v1`` or ``…/v1/``; return the server root."""
    url = url.strip().rstrip("/")
    if url.endswith("/v1"):
        url = url[: -len("/v1")]
    if not url.startswith(("http://", "https://")):
        url = "http://" + url
    return url


def stream_chat(session: requests.Session, url: str, body: dict, *, headers: dict | None = None,
                request_timeout_s: float = 900.0, stall_timeout_s: float = 120.0,
                connect_timeout_s: float = 10.0) -> StreamedResponse:
    """POST ``body`` with ``stream: true`` to ``url`` and read the SSE stream to its end.

    Raises :class:`RequestError` on HTTP errors, error events, stalls and overall time-outs.
    """
    body = dict(body, stream=True)
    result = StreamedResponse(t_start=time.perf_counter())
    deadline = result.t_start + request_timeout_s
    try:
        response = session.post(url, json=body, headers=headers or {}, stream=True,
                                timeout=(connect_timeout_s, stall_timeout_s))
    except requests.ConnectionError as exc:
        raise RequestError(f"cannot reach {url}: {_short(exc)}", "is the server running?") from None
    except requests.Timeout:
        raise RequestError(f"{url} accepted the connection but sent nothing for {stall_timeout_s:g} s",
                           "raise settings.stall_timeout_s if the server is just slow") from None
    with response:
        if response.status_code != 200:
            detail = response.text[:300].strip()
            raise RequestError(f"{url} answered HTTP {response.status_code}: {detail or response.reason}")
        try:
            for raw in response.iter_lines(chunk_size=512):
                now = time.perf_counter()
                if now > deadline:
                    raise RequestError(f"request took longer than {request_timeout_s:g} s",
                                       "raise settings.request_timeout_s or lower max_tokens")
                if not raw or not raw.startswith(b"data:"):
                    continue
                data = raw[5:].strip()
                if data == b"[DONE]":
                    break
                try:
                    chunk = json.loads(data)
                except json.JSONDecodeError:
                    raise RequestError(f"malformed event in the stream: {data[:120]!r}") from None
                _absorb(result, chunk, now)
        except requests.exceptions.ConnectionError as exc:
            # urllib3 reports a read time-out inside a stream as a ConnectionError.
            if "timed out" in str(exc).lower():
                raise RequestError(f"the stream stalled: nothing for {stall_timeout_s:g} s",
                                   "raise settings.stall_timeout_s if the server is just slow") from None
            raise RequestError(f"the connection broke mid-stream ({_short(exc)}); the server may have "
                               "crashed") from None
        except requests.exceptions.ChunkedEncodingError as exc:
            raise RequestError(f"the connection broke mid-stream ({_short(exc)}); the server may have "
                               "crashed") from None
    result.t_end = time.perf_counter()
    return result


def _absorb(result: StreamedResponse, chunk: dict, now: float) -> None:
    if not isinstance(chunk, dict):
        return
    if "error" in chunk:
        err = chunk["error"]
        msg = err.get("message") if isinstance(err, dict) else str(err)
        raise RequestError(f"the server reported an error mid-stream: {msg}")
    result.n_events += 1
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        content = delta.get("content") or ""
        reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
        if content or reasoning:
            if result.t_first is None:
                result.t_first = now
            result.t_last = now
            result.text += content
            result.reasoning += reasoning
        if choice.get("finish_reason"):
            result.finish_reason = choice["finish_reason"]
    if isinstance(chunk.get("usage"), dict):
        result.usage = chunk["usage"]
    if isinstance(chunk.get("timings"), dict):
        result.timings = chunk["timings"]
    for key, value in chunk.items():
        if key not in _IGNORED_FIELDS and key not in ("usage", "timings") and value is not None:
            result.extras[key] = value


def _short(exc: Exception) -> str:
    text = str(exc)
    return text if len(text) < 200 else text[:200] + "…"
