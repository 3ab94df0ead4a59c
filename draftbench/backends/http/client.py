"""Stream one chat completion and time it.

Token counts always come from the server (``usage``/``timings``): servers may pack several
tokens into one SSE event (vLLM does), so counting events would be wrong. Times come from
``time.perf_counter`` on this side; the server's own timings are kept beside them.

Nothing the server sends may crash us or hold us past the request's limits: the body is read
in bounded pieces under a deadline (:mod:`.sse_reader`), every event's shape is checked, and
numbers are read through :mod:`.server_values`. Whatever is wrong becomes a
:class:`RequestError` naming it. Redirects are never followed: we measure the server we were
pointed at, or nothing.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests

from ...common.errors import RequestError
from .server_values import server_count, server_rate
from .sse_reader import Limits, iter_lines, read_prefix

# Top-level stream fields that are bookkeeping, not measurements.
_IGNORED_FIELDS = {"choices", "id", "object", "created", "model", "system_fingerprint", "service_tier"}
# Longest request_timeout_s / stall_timeout_s the client accepts (socket and thread time-outs overflow far above).
MAX_LIMIT_S = 10**6
_REDIRECT_FIX = "give the address the server itself answers on (draftbench never follows redirects)"


@dataclass
class StreamedResponse:
    """What one streamed request produced, before any interpretation.

    Read numbers through the accessors (:meth:`usage_count`, :meth:`timing_count`,
    :meth:`timing_rate`, :meth:`section`): they check what the server sent and raise
    :class:`RequestError` for impossible values.
    """

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
    draft_fragments: str | None = None   # where accepted drafts landed (see draftbench.results.fragments), where known

    @property
    def ttft_s(self) -> float | None:
        return None if self.t_first is None else self.t_first - self.t_start

    @property
    def total_s(self) -> float | None:
        return None if self.t_end is None else self.t_end - self.t_start

    def usage_count(self, key: str) -> int | None:
        return server_count(self.usage.get(key), f"usage.{key}") if isinstance(self.usage, dict) else None

    def timing_count(self, key: str) -> int | None:
        return server_count(self.timings.get(key), f"timings.{key}") if isinstance(self.timings, dict) else None

    def timing_rate(self, key: str) -> float | None:
        return server_rate(self.timings.get(key), f"timings.{key}") if isinstance(self.timings, dict) else None

    def section(self, *path: str) -> dict | None:
        """The object at ``extras[path[0]][path[1]]…``; None if absent or not an object."""
        node: Any = self.extras
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        return node if isinstance(node, dict) else None

    @property
    def completion_tokens(self) -> int | None:
        n = self.usage_count("completion_tokens")
        return n if n is not None else self.timing_count("predicted_n")

    @property
    def prompt_tokens(self) -> int | None:
        n = self.usage_count("prompt_tokens")
        return n if n is not None else self.timing_count("prompt_n")

    @property
    def decode_tps(self) -> float | None:
        """Tokens after the first, over the time from first to last token (client clock)."""
        n = self.completion_tokens
        if n is None or n < 2 or self.t_first is None or self.t_last is None or self.t_last <= self.t_first:
            return None
        return (n - 1) / (self.t_last - self.t_first)


# --------------------------------------------------------------------------- redirects

class RedirectRefused(requests.RequestException):
    """The server answered with a redirect. Probes that treat any RequestException as "no
    answer" then see no answer, rather than an answer from wherever the redirect pointed."""


def describe_redirect(url: str, status: int, location: str | None) -> str:
    if not location:
        return f"{url} answered HTTP {status} (a redirect without a target)"
    target = urljoin(url, location)
    elsewhere = " on another host" if urlsplit(target).netloc != urlsplit(url).netloc else ""
    return f"{url} answered HTTP {status}, a redirect to {_printable(target)}{elsewhere}; redirects are not followed"


def refuse_redirects(response: requests.Response, *args, **kwargs) -> None:
    """A ``requests`` response hook: raise :class:`RedirectRefused` instead of following a redirect."""
    if response.is_redirect:
        message = describe_redirect(response.url, response.status_code, response.headers.get("location"))
        response.close()
        raise RedirectRefused(message, response=response)


def new_session() -> requests.Session:
    """A session for talking to one server: it refuses redirects (for probes and requests alike)."""
    session = requests.Session()
    session.hooks["response"].append(refuse_redirects)
    return session


def probe_json(session: requests.Session, url: str, *, headers: dict | None = None, timeout_s: float = 5.0,
               max_bytes: int = 2**20) -> tuple[int, Any]:
    """``GET url``: its status and JSON body (None if the body is not JSON or exceeds ``max_bytes``).

    Bounded like a streamed request (``timeout_s`` overall). Raises :class:`RedirectRefused` for
    a redirect and other ``requests.RequestException`` when the server cannot be reached.
    """
    start = time.perf_counter()
    response = session.get(url, headers=headers or {}, stream=True, allow_redirects=False,
                           timeout=(timeout_s, timeout_s))
    with response:
        if response.is_redirect:
            raise RedirectRefused(describe_redirect(url, response.status_code, response.headers.get("location")),
                                  response=response)
        body = read_prefix(response.raw, Limits(start, timeout_s, timeout_s), max_bytes + 1)
    if len(body) > max_bytes:
        return response.status_code, None
    try:
        return response.status_code, json.loads(body)
    except (ValueError, RecursionError):
        return response.status_code, None


def post_json(session: requests.Session, url: str, body: dict, *, headers: dict | None = None,
              timeout_s: float, stall_timeout_s: float | None = None,
              max_bytes: int = 16 * 2**20) -> tuple[int, Any, str]:
    """``POST url`` with a JSON body, for an answer that is not streamed: its status, its JSON body
    (None if not JSON or over ``max_bytes``) and the start of its text (for error messages).

    Bounded like a streamed request: ``timeout_s`` overall (and ``stall_timeout_s`` for the headers
    and each read, by default the same: an unstreamed answer sends nothing until it is done), so a
    server that trickles its answer cannot hold the caller. Raises :class:`RedirectRefused` for a
    redirect, ``requests.Timeout`` when the answer is not complete within ``timeout_s``, and other
    ``requests.RequestException`` when the server cannot be reached."""
    start = time.perf_counter()
    stall_timeout_s = min(stall_timeout_s or timeout_s, timeout_s)
    response = session.post(url, json=body, headers=headers or {}, stream=True, allow_redirects=False,
                            timeout=(min(10.0, timeout_s), stall_timeout_s))
    with response:
        if response.is_redirect:
            raise RedirectRefused(describe_redirect(url, response.status_code, response.headers.get("location")),
                                  response=response)
        limits = Limits(start, timeout_s, stall_timeout_s)
        data = read_prefix(response.raw, limits, max_bytes + 1)
        late = limits.passed(time.perf_counter())
        if late and len(data) <= max_bytes and not _complete(response, data):
            raise requests.Timeout(f"{url}: {late}")
    text = data[:300].decode("utf-8", "replace")
    if len(data) > max_bytes:
        return response.status_code, None, text
    try:
        return response.status_code, json.loads(data), text
    except (ValueError, RecursionError):
        return response.status_code, None, text


def _complete(response: requests.Response, data: bytes) -> bool:
    """Whether ``data`` is the whole body (by Content-Length where the server sent one)."""
    length = response.headers.get("content-length")
    return length is not None and length.isdigit() and len(data) >= int(length)


# --------------------------------------------------------------------------- streaming

def stream_chat(session: requests.Session, url: str, body: dict, *, headers: dict | None = None,
                request_timeout_s: float = 900.0, stall_timeout_s: float = 120.0,
                connect_timeout_s: float = 10.0) -> StreamedResponse:
    """POST ``body`` with ``stream: true`` to ``url`` and read the SSE stream to its end.

    Ends within ``request_timeout_s`` overall, and within ``stall_timeout_s`` of the last data
    event (keep-alive comments and partial lines are not progress), whatever the server sends.
    Raises :class:`RequestError` on HTTP errors, redirects, error events, malformed or
    oversized events, stalls, time-outs and streams that end without finishing.
    """
    for name, value in (("request_timeout_s", request_timeout_s), ("stall_timeout_s", stall_timeout_s)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_LIMIT_S:
            raise RequestError(f"{name} is {value!r}; it must be a number of seconds above 0 and at most "
                               f"{MAX_LIMIT_S:g}")
    body = dict(body, stream=True)
    # Compressed streams would be held back by the decompressor; ask for the bytes as sent.
    headers = {"Accept-Encoding": "identity", **(headers or {})}
    result = StreamedResponse(t_start=time.perf_counter())
    limits = Limits(result.t_start, request_timeout_s, stall_timeout_s)
    try:
        # The read time-out bounds each wait for the response headers; the body has its own clock.
        response = session.post(url, json=body, headers=headers, stream=True, allow_redirects=False,
                                timeout=(connect_timeout_s, min(request_timeout_s, stall_timeout_s)))
    except RedirectRefused as exc:
        raise RequestError(str(exc), _REDIRECT_FIX) from None
    except requests.ConnectionError as exc:
        raise RequestError(f"cannot reach {url}: {_short(exc)}", "is the server running?") from None
    except requests.Timeout:
        waited = min(request_timeout_s, stall_timeout_s)
        which = "request_timeout_s" if request_timeout_s <= stall_timeout_s else "stall_timeout_s"
        raise RequestError(f"{url} accepted the connection but sent no response within {waited:g} s ({which})",
                           (limits.passed(time.perf_counter()) or limits.stall_error()).fix) from None
    except requests.RequestException as exc:
        raise RequestError(f"the request to {url} failed: {_short(exc)}") from None
    with response:
        status = response.status_code
        if 300 <= status < 400:
            raise RequestError(describe_redirect(url, status, response.headers.get("location")), _REDIRECT_FIX)
        if status != 200:
            now = time.perf_counter()
            page = read_prefix(response.raw, Limits(now, min(5.0, request_timeout_s), min(5.0, stall_timeout_s)))
            detail = _printable(page.decode("utf-8", "replace"))[:300].strip()
            raise RequestError(f"{url} answered HTTP {status}: {detail or _printable(str(response.reason))}")
        late = limits.passed(time.perf_counter())
        if late:
            raise late
        _read_events(response.raw, limits, result)
    result.t_end = time.perf_counter()
    return result


def _read_events(raw: Any, limits: Limits, result: StreamedResponse) -> None:
    text: list[str] = []
    reasoning: list[str] = []
    done = False
    with contextlib.closing(iter_lines(raw, limits)) as lines:
        for line, now in lines:
            if not line.startswith(b"data:"):
                continue   # comments (": ping"), event:, id:, retry:, blank separators
            data = line[5:].strip()
            if not data:
                continue
            if data == b"[DONE]":
                done = True
                break
            chunk = _parse_event(data, result.n_events + 1)
            limits.progress(now)
            _absorb(result, chunk, now, text, reasoning)
    result.text = _valid_text("".join(text))
    result.reasoning = _valid_text("".join(reasoning))
    if not done and result.finish_reason is None:
        raise RequestError(f"the stream ended after {result.n_events} events without a finish reason or [DONE]; "
                           "the server cut the response short (crashed, or a proxy closed it)",
                           "see the server's log")


def _parse_event(data: bytes, number: int) -> dict:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(f"event {number} of the stream is not UTF-8 text (byte {data[exc.start]:#04x} at "
                           f"position {exc.start}): {data[:80]!r}") from None
    try:
        chunk = json.loads(text, parse_constant=lambda name: math.nan)
    except (ValueError, RecursionError):
        # ValueError covers JSON errors and integers too long to convert; RecursionError deep nesting.
        raise RequestError(f"event {number} of the stream is not valid JSON: {_printable(text[:120])!r}") from None
    if not isinstance(chunk, dict):
        raise RequestError(f"event {number} of the stream is a JSON {type(chunk).__name__}, not an object: "
                           f"{_printable(text[:80])!r}")
    return chunk


def _absorb(result: StreamedResponse, chunk: dict, now: float, text: list[str], reasoning: list[str]) -> None:
    number = result.n_events + 1
    if chunk.get("error") is not None:
        err = chunk["error"]
        msg = err.get("message") if isinstance(err, dict) else err
        raise RequestError(f"the server reported an error mid-stream: {_printable(str(msg))[:300]}")
    result.n_events = number

    def field_of(value: Any, kind: type, where: str) -> Any:
        return expect_type(value, kind, where, f" in event {number} of the stream")

    for i, choice in enumerate(field_of(chunk.get("choices"), list, "choices") or []):
        choice = field_of(choice, dict, f"choices[{i}]") or {}
        delta = field_of(choice.get("delta"), dict, f"choices[{i}].delta") or {}
        content = field_of(delta.get("content"), str, f"choices[{i}].delta.content") or ""
        thought = (field_of(delta.get("reasoning_content"), str, f"choices[{i}].delta.reasoning_content")
                   or field_of(delta.get("reasoning"), str, f"choices[{i}].delta.reasoning") or "")
        if content or thought:
            if result.t_first is None:
                result.t_first = now
            result.t_last = now
            text.append(content)
            reasoning.append(thought)
        finish = field_of(choice.get("finish_reason"), str, f"choices[{i}].finish_reason")
        if finish:
            result.finish_reason = finish
    usage = field_of(chunk.get("usage"), dict, "usage")
    if usage is not None:
        result.usage = usage
    timings = field_of(chunk.get("timings"), dict, "timings")
    if timings is not None:
        result.timings = timings
    for key, value in chunk.items():
        if key not in _IGNORED_FIELDS and key not in ("usage", "timings") and value is not None:
            result.extras[key] = value


_TYPE_NAMES: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}


def expect_type(value: Any, kind: type, where: str, context: str = "") -> Any:
    """``value`` if it is ``None`` or a ``kind``; otherwise a :class:`RequestError` naming ``where``."""
    if value is None or isinstance(value, kind):
        return value
    shown = _printable(json.dumps(value, default=str)[:60])
    raise RequestError(f"the server sent {where} = {shown} ({type(value).__name__}){context}; expected "
                       f"{_TYPE_NAMES.get(kind, kind.__name__)}", "the server does not speak the OpenAI chat format; "
                       "check the URL and the backend")


def _valid_text(text: str) -> str:
    """Join surrogate pairs split across events; replace lone surrogates (they cannot be saved as UTF-8)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _printable(text: str) -> str:
    """Server text for a message: control characters (terminal escapes) become spaces."""
    return "".join(c if c.isprintable() else " " for c in text)


def _short(exc: Exception) -> str:
    text = _printable(str(exc)) or type(exc).__name__
    return text if len(text) < 200 else text[:200] + "…"
