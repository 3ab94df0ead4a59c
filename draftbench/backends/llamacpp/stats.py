"""llama-server's per-method statistics: parse its ``statistics <impl>: …`` log lines and turn them
into per-request figures.

At trace verbosity (``-lv 4``) llama-server logs, after every request, one line per speculative
implementation (``common_speculative_print_stats`` in common/speculative.cpp, build 11434)::

    statistics     ngram-simple: #calls(b,g,a) =    1     39     12, #gen drafts =     12, #acc drafts =     9,
    #gen tokens =     96, #acc tokens =    61, #mean acc len = 6.08, #acc rate/pos = (0.750, 0.667, …),
    dur(b,g,a) = 0.002, 0.059, 0.011 ms

The counters are *cumulative* over the server's life (the warm-up included), so a request's own
figures are the difference between the lines after it and the lines before it. ``#acc rate/pos``
is accepted tokens at each draft position per accept call, printed with three decimals: per-request
values are reconstructed from it and are therefore approximate (documented in docs/candidates.md, "Per-method statistics").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...lifetime.polling import poll
from ...results.method_stats import COUNTERS, DURATIONS, with_derived

# One line; the mean/rate part appears only once something was accepted, the durations only when
# the build times its implementations. Older builds print ``#calls = N`` (one number).
STAT_LINE = re.compile(
    r"statistics\s+(?P<impl>[\w-]+):\s*#calls(?:\(b,g,a\))?\s*=\s*(?P<calls>\d+(?:\s+\d+)*)\s*,"
    r"\s*#gen drafts\s*=\s*(?P<gen_drafts>\d+)\s*,\s*#acc drafts\s*=\s*(?P<acc_drafts>\d+)\s*,"
    r"\s*#gen tokens\s*=\s*(?P<gen_tokens>\d+)\s*,\s*#acc tokens\s*=\s*(?P<acc_tokens>\d+)"
    r"(?:\s*,\s*#mean acc len\s*=\s*(?P<mean_len>[\d.]+)\s*,\s*#acc rate/pos\s*=\s*\((?P<per_pos>[^)]*)\))?"
    r"(?:\s*,\s*dur\(b,g,a\)\s*=\s*(?P<dur>[\d.]+\s*,\s*[\d.]+\s*,\s*[\d.]+)\s*ms)?")

@dataclass(frozen=True)
class MethodTotals:
    """One implementation's cumulative counters, as one ``statistics`` line says them."""

    impl: str
    calls_begin: int | None
    calls_draft: int | None
    calls_accept: int | None
    gen_drafts: int
    acc_drafts: int
    gen_tokens: int
    acc_tokens: int
    acc_rate_per_pos: tuple[float, ...] = ()
    begin_ms: float | None = None
    draft_ms: float | None = None
    accept_ms: float | None = None

    def accepted_per_pos(self) -> list[float]:
        """Accepted tokens at each draft position (rate × accept calls; approximate, see the module)."""
        return [rate * (self.calls_accept or 0) for rate in self.acc_rate_per_pos]


def parse_line(line: str) -> MethodTotals | None:
    m = STAT_LINE.search(line)
    if m is None:
        return None
    calls = [int(c) for c in m.group("calls").split()]
    begin, draft, accept = calls if len(calls) == 3 else (None, calls[0], None)
    per_pos = tuple(float(x) for x in m.group("per_pos").split(",") if x.strip()) if m.group("per_pos") else ()
    durs = [float(x) for x in m.group("dur").split(",")] if m.group("dur") else [None, None, None]
    return MethodTotals(impl=m.group("impl"), calls_begin=begin, calls_draft=draft, calls_accept=accept,
                        gen_drafts=int(m.group("gen_drafts")), acc_drafts=int(m.group("acc_drafts")),
                        gen_tokens=int(m.group("gen_tokens")), acc_tokens=int(m.group("acc_tokens")),
                        acc_rate_per_pos=per_pos, begin_ms=durs[0], draft_ms=durs[1], accept_ms=durs[2])


def parse_lines(text: str) -> list[MethodTotals]:
    """Every statistics line in ``text``, in order."""
    return [t for t in (parse_line(line) for line in text.splitlines() if "statistics" in line) if t is not None]


def _diff(after: float | None, before: float | None) -> float | None:
    if after is None:
        return None
    return after - (before or 0)


def request_figures(after: MethodTotals, before: MethodTotals | None) -> dict:
    """One request's figures for one implementation: counters since ``before`` (None: since start),
    its acceptance, mean accepted length and per-position acceptance, and the time it spent."""
    out: dict = {}
    for name in COUNTERS:
        value = _diff(getattr(after, name), getattr(before, name) if before else None)
        out[name] = None if value is None else int(value)
    for name in DURATIONS:
        value = _diff(getattr(after, name), getattr(before, name) if before else None)
        out[name] = None if value is None else round(value, 3)
    return with_derived(out, _per_pos_delta(after, before))


def _per_pos_delta(after: MethodTotals, before: MethodTotals | None) -> list[float]:
    now = after.accepted_per_pos()
    then = before.accepted_per_pos() if before else []
    return [max(0.0, a - (then[i] if i < len(then) else 0.0)) for i, a in enumerate(now)]


def per_request(lines: list[MethodTotals], previous: dict[str, MethodTotals]) -> dict[str, dict]:
    """Figures per implementation for the lines read after one request, against the last totals seen
    (``previous``, updated in place so the next request counts from here). Of several lines of one
    implementation (a late line of the request before) the last counts, so nothing is counted twice
    or lost."""
    last = {t.impl: t for t in lines}
    out = {impl: request_figures(totals, previous.get(impl)) for impl, totals in last.items()}
    previous.update(last)
    return out


# --------------------------------------------------------------------------- reading the server's log

TRACE_VERBOSITY = 4          # llama-server's "trace" level (`--help`: 4: trace (more info)); default is 3
VERBOSITY_FLAGS = ("-lv", "--log-verbosity", "--verbosity")
WAIT_FOR_LINES_S = 5.0       # the server logs through a background thread: the lines may trail the response
LOG_READ_MAX_BYTES = 8 * 2**20


class StatsLog:
    """Follows one server's log file and returns, after each request, the per-method figures of the
    lines that request printed (``expected`` lines: one per speculative implementation)."""

    def __init__(self, path: str, start_offset: int, expected: int):
        self.path = path
        self.offset = start_offset
        self.expected = expected
        self.totals: dict[str, MethodTotals] = {}

    def _read_new(self) -> list[MethodTotals]:
        try:      # at most LOG_READ_MAX_BYTES at a time: a server printing without end cannot fill our memory
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read(LOG_READ_MAX_BYTES)
        except OSError:
            return []
        complete = chunk[: chunk.rfind(b"\n") + 1]      # a line still being written waits for the next read
        if not complete and len(chunk) == LOG_READ_MAX_BYTES:
            complete = chunk                            # one line longer than the cap: not a stats line, skipped
        self.offset += len(complete)
        return parse_lines(complete.decode("utf-8", errors="replace"))

    def after_request(self) -> dict[str, dict] | None:
        """This request's figures per implementation; None when its lines did not appear in time
        (they are then counted with the next request: the counters are cumulative)."""
        if self.expected <= 0:
            return None
        seen: list[MethodTotals] = []

        def enough() -> bool | None:
            seen.extend(self._read_new())
            return True if len({t.impl for t in seen}) >= self.expected else None

        poll(enough, WAIT_FOR_LINES_S)
        return per_request(seen, self.totals) if seen else None
