"""Read a streamed HTTP body line by line in bounded pieces, under a stall limit and a deadline.

Why not ``requests``' ``iter_lines``: it reads fixed-size blocks, so a body sent without chunked
encoding is only seen once a block has filled (a late first token, an inflated TTFT); a line
without a newline grows without bound; and its only clock is the socket's per-read time-out,
which any trickle of bytes (keep-alive comments) restarts forever.

Here each read returns whatever has arrived (``read1``), one line is capped at
:data:`MAX_LINE_BYTES`, the whole body at :data:`MAX_BODY_BYTES`, and a watchdog thread ends a
read that blocks past the next limit by shutting the connection for reading (urllib3's
``HTTPResponse.shutdown``), so every request ends within its limits plus a read's latency.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Generator
from typing import Any

import urllib3

from ...common.errors import RequestError

MAX_LINE_BYTES = 16 * 2**20    # one SSE event; a real one is a few hundred bytes
MAX_BODY_BYTES = 256 * 2**20   # one response; 128k tokens of llama.cpp events are ~50 MB
READ_SIZE = 64 * 2**10

_STALL_FIX = "raise stall_timeout_s (bench.py: --stall-timeout) if the server is just slow"
_DEADLINE_FIX = "raise request_timeout_s (bench.py: --request-timeout) or lower max_tokens"


class Limits:
    """The time limits of one request on the ``perf_counter`` clock.

    The deadline is fixed; the stall limit moves forward only when the caller reports progress
    (a data event), so keep-alive comments and a line that never ends do not hold it off.
    """

    def __init__(self, start: float, request_timeout_s: float, stall_timeout_s: float):
        self.request_timeout_s = request_timeout_s
        self.stall_timeout_s = stall_timeout_s
        self.deadline = start + request_timeout_s
        self.stall_at = start + stall_timeout_s

    def progress(self, now: float) -> None:
        self.stall_at = now + self.stall_timeout_s

    def next_limit(self) -> float:
        return min(self.deadline, self.stall_at)

    def seconds_left(self) -> float:
        return self.next_limit() - time.perf_counter()

    def passed(self, now: float) -> RequestError | None:
        """The error for the limit that has passed at ``now``, or None."""
        if now >= self.deadline:
            return RequestError(f"the request took longer than {self.request_timeout_s:g} s (request_timeout_s)",
                                _DEADLINE_FIX)
        if now >= self.stall_at:
            return self.stall_error()
        return None

    def stall_error(self) -> RequestError:
        return RequestError(f"the stream stalled: no data event for {self.stall_timeout_s:g} s (stall_timeout_s)",
                            _STALL_FIX)


class Watchdog:
    """Shuts a response's connection for reading once the next limit passes, ending a blocked read."""

    def __init__(self, raw: Any, limits: Limits):
        self._raw = raw
        self._limits = limits
        self._done = threading.Event()
        self._lock = threading.Lock()
        self.fired = False
        self._thread = threading.Thread(target=self._watch, name="draftbench-request-watchdog", daemon=True)

    def __enter__(self) -> Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._done.set()
        self._thread.join(timeout=1.0)

    def _watch(self) -> None:
        # The stall limit moves while we wait: sleep to the current limit, then look again.
        while not self._done.wait(max(0.0, self._limits.seconds_left())):
            if self._limits.seconds_left() <= 0:
                with self._lock:
                    if self._done.is_set():
                        return
                    self.fired = True
                    shutdown = getattr(self._raw, "shutdown", None)   # urllib3 >= 2.3
                    if shutdown is not None:
                        try:
                            shutdown()
                        except (OSError, RuntimeError, ValueError):
                            pass   # already closed or released: the read has ended anyway
                return


def iter_lines(raw: Any, limits: Limits) -> Generator[tuple[bytes, float], None, None]:
    """Yield ``(line, arrival time)`` from the urllib3 response ``raw`` until the body ends.

    Lines end at LF, CRLF or CR (as in SSE). The caller calls ``limits.progress`` for lines that
    count as progress. Raises :class:`RequestError` when a limit passes, a line or the body is
    too big, or the connection breaks.
    """
    pending = bytearray()
    total = 0
    with Watchdog(raw, limits) as watchdog:
        while True:
            try:
                data = raw.read1(READ_SIZE, decode_content=True)
            except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError, ValueError) as exc:
                now = time.perf_counter()
                if watchdog.fired or isinstance(exc, urllib3.exceptions.ReadTimeoutError):
                    raise (limits.passed(now) or limits.stall_error()) from None
                raise RequestError(f"the connection broke mid-stream ({_short(exc)}); the server may have crashed") \
                    from None
            now = time.perf_counter()
            if watchdog.fired:
                raise limits.passed(now) or limits.stall_error()
            if not data:
                if pending:
                    yield bytes(pending), now
                return
            total += len(data)
            if total > MAX_BODY_BYTES:
                raise RequestError(f"the response exceeded {MAX_BODY_BYTES // 2**20} MB; the server is sending "
                                   "far more than any completion", "lower max_tokens, or check the server")
            # \r\n split across two reads becomes two line ends: an empty line, which SSE ignores.
            pending += data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if b"\n" in data or b"\r" in data:
                *lines, rest = pending.split(b"\n")
                pending = bytearray(rest)
                for line in lines:
                    if len(line) > MAX_LINE_BYTES:
                        raise _line_too_long()
                    yield bytes(line), now
            if len(pending) > MAX_LINE_BYTES:
                raise _line_too_long()
            # Bytes that keep arriving must not hold off the limits.
            error = limits.passed(time.perf_counter())
            if error:
                raise error


def read_prefix(raw: Any, limits: Limits, max_bytes: int = 4096) -> bytes:
    """Up to ``max_bytes`` of a body (an error page) within ``limits``; whatever came if they pass."""
    out = bytearray()
    with Watchdog(raw, limits) as watchdog:
        while len(out) < max_bytes and not watchdog.fired:
            try:
                data = raw.read1(max_bytes - len(out), decode_content=True)
            except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError, ValueError):
                break
            if not data or limits.passed(time.perf_counter()):
                out += data or b""
                break
            out += data
    return bytes(out[:max_bytes])


def _line_too_long() -> RequestError:
    return RequestError(f"one line of the stream exceeded {MAX_LINE_BYTES // 2**20} MB without ending; the server is "
                        "not sending server-sent events", "check the URL and the server")


def _short(exc: BaseException) -> str:
    if isinstance(exc, urllib3.exceptions.ProtocolError) and exc.args:
        exc = exc.args[0] if isinstance(exc.args[0], BaseException) else Exception(str(exc.args[0]))
    text = str(exc) or type(exc).__name__
    return text if len(text) < 200 else text[:200] + "…"
