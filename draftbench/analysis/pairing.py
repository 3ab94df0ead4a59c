"""A row's requests paired with its baseline's, the way the design measured them.

Every candidate request is compared with the baseline requests for the same prompt and
repetition. Which baseline requests: those of the sessions it records in ``compared_with``
(the baseline server that ran beside it, or the baseline blocks measured just before and just
after it: see ``sweep/schedule.py``); of a baseline server shared by a stage's candidates, the
request measured beside this candidate's server (``beside``); in files without those fields
(older files, the sequential design), every baseline request for the same prompt and
repetition. Several matches are averaged on the log scale (a bracket's two sides).

A request during which other programs took a burst of the machine measured the contention, not the method: on
two cores one busy process next to llama-server's threads slowed requests tenfold (make demo, 2026-11-27).
Its pair is left out (``contended``). "Other programs" are what neither side's server causes: the share is
read around each request from ``/proc``, less everything of ours — each server's whole process tree (vLLM's
engine subprocess too: ``lifetime/machine_load.py``). A burst is a share at least :data:`CONTENDED` above
the usual share of *its own side* in its stage (the lower quartile of the candidate's requests, or of the
target alone's), so a side's steady load — the candidate's own, or the machine's — leaves nothing out.

The rule must not condition on what the candidate does, and a candidate's helper may live outside its
server's process tree (then it reads as another program). Bursts of other programs hit both sides alike, so
the candidate's side meets them about as often as the target alone's; a candidate's side that meets more
than chance allows (:func:`loaded_more`, over the row's stages so far) is loaded by the candidate itself, and
its requests stay in: their speed is what the candidate costs (``own_load``). With few readings chance
allows much (one candidate: six a side per stage), so a burst on the candidate's side is left out only once
the target alone's side has met bursts too. A burst on the target alone's side is always left out: keeping
it could only flatter the candidate (if the candidate's load caused it, all the more). Each stage is judged
on the stages up to it only, so a look replayed from the file leaves out what it left out live.

No rule looks at a request's speed: a baseline request far slower than the same request on the same server
was once left out as "interrupted", but the candidate's side has no such repeat, so the rule dropped slow
baseline requests and kept slow candidate ones (every estimate ~1.1% low under the simulator's outliers,
issue 43). The pairs keep both sides' slow requests alike; the stages' spread carries them.

Each pair also carries what the server's own counters allow: a verify step costs at least one
target step, so a request that generated n tokens with ``accepted`` of them drafted cannot be
faster than (n − 1) / (n − 1 − accepted) times the target alone (its decode time covers the
n − 1 tokens after the first).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..results.file import RequestRecord, Row
from .replication import Unit


@dataclass(frozen=True)
class Pair:
    prompt_id: str
    category: str
    run: int
    session: str | None
    log_ratio: float                 # log(candidate tok/s / baseline tok/s)
    log_bound: float | None          # log of the most the counters allow (None: no counters)
    drafted: int | None              # tokens the method drafted on this request
    block: int | None = None         # the schedule's block, or the stage (sweep/schedule.py)
    order: int = 0                   # the last server session it used (s<N> of either side): when it was known


def _rate(r: RequestRecord) -> float | None:
    v = r.decode_tps
    if r.error is not None or not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    return float(v) if math.isfinite(v) and v > 0 else None


def request_bound(r: RequestRecord) -> float | None:
    """The largest speed-up this request's counters allow, (n − 1) / (n − 1 − accepted); None without counts."""
    n, accepted = r.completion_tokens, r.draft_n_accepted
    if n is None or accepted is None or n < 2:
        return None
    steps = n - 1 - accepted
    return (n - 1) / steps if steps >= 1 else None


def prompt_log_bounds(bounds: Iterable[tuple[str, float | None]]) -> dict[str, float]:
    """Each prompt's counters' bound on the log scale: the mean of its requests' (``(prompt_id, log bound)``, None:
    no counts), the scale every bound on a speed-up is stated on."""
    by_prompt: dict[str, list[float]] = {}
    for prompt_id, log_bound in bounds:
        if log_bound is not None:
            by_prompt.setdefault(prompt_id, []).append(log_bound)
    return {p: statistics.fmean(v) for p, v in by_prompt.items()}


def most_per_prompt(row: Row) -> float | None:
    """The most the counters allowed on any one prompt of ``row``; None where no request has counts, or one
    accepted every drafted token (it bounds nothing)."""
    counted = [r for r in row.requests if r.error is None and r.completion_tokens is not None
               and r.draft_n_accepted is not None and r.completion_tokens >= 2]
    bounds = [(r.prompt_id, request_bound(r)) for r in counted]
    if any(b is None for _, b in bounds):
        return None
    found = prompt_log_bounds((p, math.log(b)) for p, b in bounds if b is not None)
    return math.exp(max(found.values())) if found else None


# A baseline's requests by (prompt, repetition), for the last few baseline rows seen: a target's every
# candidate is paired with the same baseline row (rows are immutable; identity says it is the same).
_INDEXED: dict[int, tuple[Row, dict[tuple, list[RequestRecord]], dict[int | None, list[RequestRecord]]]] = {}


def _index(baseline: Row) -> dict[tuple, list[RequestRecord]]:
    return _indexed(baseline)[0]


def _stage_shares(baseline: Row) -> dict[int | None, list[RequestRecord]]:
    """The baseline's requests that record other programs' CPU share, by stage."""
    return _indexed(baseline)[1]


def _indexed(baseline: Row) -> tuple[dict[tuple, list[RequestRecord]], dict[int | None, list[RequestRecord]]]:
    kept = _INDEXED.get(id(baseline))
    if kept is not None and kept[0] is baseline:
        return kept[1], kept[2]
    by_key: dict[tuple, list[RequestRecord]] = {}
    by_stage: dict[int | None, list[RequestRecord]] = {}
    for b in baseline.requests:
        if _rate(b) is not None:
            by_key.setdefault((b.prompt_id, b.run), []).append(b)
        if b.other_cpu_share is not None:
            by_stage.setdefault(b.block, []).append(b)
    if len(_INDEXED) >= 16:
        _INDEXED.pop(next(iter(_INDEXED)))
    _INDEXED[id(baseline)] = (baseline, by_key, by_stage)
    return by_key, by_stage


CONTENDED = 0.10        # other programs' CPU share during a request this far above its side's usual in its stage
MIN_READINGS = 3        # a side's usual share needs this many readings in the stage
LOADED_MORE = 0.01      # the candidate's side meets more bursts than the target alone's, beyond chance at this level


@dataclass(frozen=True)
class Contention:
    """What the share readings say about one row against its baseline: the requests (by ``id``, either side)
    measured during a burst of other programs' load, and the stages where the candidate's side met more bursts
    than chance allows (its own load: its requests there are kept)."""

    busy: frozenset[int]
    own_load: frozenset[int | None]


@dataclass(frozen=True)
class LeftOut:
    """How many of a row's measured requests the pairing leaves out, and how many it keeps as the candidate's
    own load."""

    contended: int                         # a burst of other programs' load on one side of its pair
    own_load: int                          # requests of stages where its side met more bursts than chance allows


def _bursts(requests: list[RequestRecord]) -> set[int]:
    """The requests (by ``id``) of one side in one stage whose share is :data:`CONTENDED` above the side's usual
    — its lower quartile: a load on every request is the side's own, a burst however frequent is not (none
    below :data:`MIN_READINGS` readings)."""
    if len(requests) < MIN_READINGS:
        return set()
    usual = statistics.quantiles([r.other_cpu_share or 0.0 for r in requests], n=4, method="inclusive")[0]
    return {id(r) for r in requests if (r.other_cpu_share or 0.0) - usual >= CONTENDED}


def loaded_more(hits: int, readings: int, other_hits: int, other_readings: int) -> bool:
    """Whether one side met more bursts (``hits`` of ``readings``) than the other (``other_hits`` of
    ``other_readings``) beyond chance: the hypergeometric upper tail below :data:`LOADED_MORE`."""
    total, drawn = hits + other_hits, readings + other_readings
    if hits == 0 or other_readings == 0:
        return False
    tail = sum(math.exp(_log_comb(total, k) + _log_comb(drawn - total, readings - k) - _log_comb(drawn, readings))
               for k in range(hits, min(total, readings) + 1))
    return tail < LOADED_MORE


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def contended(row: Row, baseline: Row) -> Contention:
    """Bursts of other programs' load on either side of ``row``'s pairs, stage by stage (files without the
    share leave nothing out)."""
    by_stage: dict[int | None, list[RequestRecord]] = {}
    for r in row.requests:
        if r.other_cpu_share is not None:
            by_stage.setdefault(r.block, []).append(r)
    busy: set[int] = set()
    own: set[int | None] = set()
    counts = [0, 0, 0, 0]          # bursts and readings so far: the candidate's side, the target alone's
    for stage in sorted(by_stage, key=lambda b: -1 if b is None else b):
        mine, theirs = by_stage[stage], _stage_shares(baseline).get(stage, [])
        hit, other = _bursts(mine), _bursts(theirs)
        counts = [counts[0] + len(hit), counts[1] + len(mine), counts[2] + len(other), counts[3] + len(theirs)]
        busy |= other
        if loaded_more(*counts):
            own.add(stage)
        elif counts[2]:            # the candidate's bursts are others' only once the target alone met some too
            busy |= hit
    return Contention(frozenset(busy), frozenset(own))


def left_out(row: Row, baseline: Row) -> LeftOut:
    """How many of ``row``'s measured requests the pairing leaves out (a burst of other programs' load on one
    side), and how many it keeps because their stage's bursts were the candidate's own load."""
    found, by_key = contended(row, baseline), _index(baseline)
    measured = [r for r in row.requests if _rate(r) is not None]
    out = sum(1 for r in measured if _left_out(r, by_key.get((r.prompt_id, r.run), []), found.busy)[1])
    return LeftOut(out, sum(1 for r in measured if r.block in found.own_load))


def pairs(row: Row, baseline: Row) -> list[Pair]:
    """Every measured request of ``row`` with its baseline counterpart(s)."""
    by_key, busy = _index(baseline), contended(row, baseline).busy
    out = []
    for r in row.requests:
        rate = _rate(r)
        matches, why = _left_out(r, by_key.get((r.prompt_id, r.run), []), busy)
        if rate is None or why is not None or not matches:
            continue
        logs = [math.log(_rate(b) or 1.0) for b in matches]
        base = math.fsum(logs) / len(logs)          # statistics.fmean's own sum, without its generator wrapper
        bound = request_bound(r) if row.role != "ceiling" else None
        out.append(Pair(r.prompt_id, r.category, r.run, r.session, math.log(rate) - base,
                        math.log(bound) if bound is not None else None, r.draft_n, r.block,
                        session_order(r.session, *(b.session for b in matches))))
    return out


def _left_out(r: RequestRecord, matches: list[RequestRecord], busy: frozenset[int]) -> tuple[list[RequestRecord], str | None]:
    """The baseline requests ``r`` is compared with, and why the pair is left out (None: it is kept)."""
    if r.compared_with is not None:
        wanted = set(r.compared_with)
        repeats = [b for b in matches if b.session in wanted]
        beside = [b for b in repeats if b.beside == r.session]
        matches = beside or [b for b in repeats if b.beside is None]   # the request measured beside it
    if busy and (id(r) in busy or any(id(b) in busy for b in matches)):
        return matches, "contended"
    return matches, None


def session_order(*sessions: str | None) -> int:
    """The latest of some server sessions (``s<N>``: numbered in the order they started; 0 for none)."""
    numbers = [int(s[1:]) for s in sessions if s and s[:1] == "s" and s[1:].isdigit()]
    return max(numbers, default=0)


def units(items: Iterable[Pair], value: Callable[[Pair], float | None] = lambda p: p.log_ratio) -> list[Unit]:
    """The replication units of some pairs (see :mod:`replication`), valued by ``value``."""
    out = []
    for p in items:
        v = value(p)
        if v is not None:
            out.append(Unit(p.prompt_id, v, p.session, p.category))
    return out
