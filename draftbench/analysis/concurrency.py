"""Concurrency levels: what N streams at once measure, as pure functions of settings and rows.

A level N keeps N requests in flight (closed loop: each of N streams sends its next request as
soon as its last one ended), against a server started with N slots. One stream is today's
single-stream measurement; its rows carry no ``load`` and are summarised from their requests.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..common.errors import Problem
from ..config.settings import FROM_FILE, Origin, Settings
from ..results.file import ResultsFile, Row
from ..results.kinds import Role

PERCENTILES = (50, 90, 99)


def levels(settings: Settings) -> tuple[int, ...]:
    """``settings.concurrency`` as sorted levels (a single number or a list)."""
    value = settings.concurrency
    values = value if isinstance(value, (list, tuple)) else [value]
    clean = {v for v in values if isinstance(v, int) and not isinstance(v, bool) and v >= 1}
    return tuple(sorted(clean)) or (1,)


def settings_problems(settings: Settings, requests: int | None = None, origin: Origin = FROM_FILE) -> list[Problem]:
    """Settings that cannot go with several levels: the adaptive race measures one stream (its probes
    and eliminations pair each candidate with a single baseline per target); and a level of more
    streams than the ``requests`` it sends (prompts × runs) could never have them all in flight."""
    problems = []
    if settings.search == "adaptive" and levels(settings) != (1,):
        if origin.flag("search"):
            problems.append(Problem(origin.where("search"), f"races candidates at one stream; settings.concurrency "
                                    f"is {settings.concurrency}", "remove settings.concurrency (or set it to 1) for "
                                    "an adaptive search, or use --search exhaustive to measure several concurrency "
                                    "levels"))
        else:
            problems.append(Problem("$.settings.concurrency", f"is {settings.concurrency}, but search \"adaptive\" "
                                    "races candidates on one stream only", "use search \"exhaustive\" for "
                                    "concurrency levels, or concurrency [1] for an adaptive race"))
    too_many = [n for n in levels(settings) if requests is not None and n > requests]
    if too_many:
        problems.append(Problem("$.settings.concurrency", f"asks for {too_many[-1]} requests at once, but each level "
                                f"sends only {requests} (prompts × settings.runs), so at most {requests} could ever "
                                "be in flight (and the server would be started with that many slots for nothing)",
                                f"use levels of at most {requests}, or more prompts or runs"))
    return problems


def percentiles(values: Iterable[float | None]) -> dict | None:
    """``{n, p50, p90, p99}`` by nearest rank (p99 of fewer than 100 values is the largest); None if empty."""
    vals = sorted(v for v in values if v is not None and math.isfinite(v))
    if not vals:
        return None
    out: dict = {"n": len(vals)}
    for q in PERCENTILES:
        out[f"p{q}"] = round(vals[max(0, math.ceil(q / 100 * len(vals)) - 1)], 5)
    return out


def in_flight(intervals: list[tuple[float, float]]) -> tuple[int, float | None]:
    """The most intervals open at one moment, and the mean number open over their whole span."""
    if not intervals:
        return 0, None
    # ends sort before starts at the same instant: back-to-back requests do not overlap
    events = sorted([(end, -1) for _, end in intervals] + [(start, 1) for start, _ in intervals])
    open_now = most = 0
    for _, step in events:
        open_now += step
        most = max(most, open_now)
    span = max(end for _, end in intervals) - min(start for start, _ in intervals)
    busy = sum(end - start for start, end in intervals)
    return most, (round(busy / span, 3) if span > 0 else None)


def level_summary(row: Row) -> dict | None:
    """A row's level: aggregate output tok/s, mean per-stream decode tok/s, TTFT and end-to-end latency
    percentiles. From ``row.load`` when several streams ran; from the requests of a one-stream row
    (run one after another, so its aggregate is Σ tokens / Σ request time). None without requests."""
    ok = [r for r in row.requests if r.error is None]
    if not ok:
        return None
    load = row.load or {}
    aggregate = load.get("aggregate_tps")
    if aggregate is None and row.concurrency == 1:
        timed = [r for r in ok if r.completion_tokens is not None and r.total_s]
        seconds = sum(r.total_s or 0.0 for r in timed)
        aggregate = round(sum(r.completion_tokens or 0 for r in timed) / seconds, 3) if seconds > 0 else None
    return {"streams": row.concurrency, "aggregate_tps": aggregate, "stream_tps": row.mean_tps,
            "ttft_s": load.get("ttft_s") or percentiles(r.ttft_s for r in ok),
            "total_s": load.get("total_s") or percentiles(r.total_s for r in ok),
            "in_flight_max": load.get("in_flight_max", 1 if row.concurrency == 1 else None)}


def row_levels(results: ResultsFile, target: str | None = None) -> tuple[int, ...]:
    """The levels measured (for one target, or any), ascending; (1,) for files without any."""
    rows = results.results if target is None else results.rows_of(target)
    found = {r.concurrency for r in rows if r.role in (Role.BASELINE, Role.SPECULATIVE)}
    return tuple(sorted(found)) or (1,)


def primary_level(results: ResultsFile, target: str | None = None) -> int:
    """The level the single-stream verdict and charts use: the lowest measured (1 unless it was not)."""
    return row_levels(results, target)[0]
