"""A row's requests paired with its baseline's, the way the design measured them.

Every candidate request is compared with the baseline requests for the same prompt and
repetition. Which baseline requests: those of the sessions it records in ``compared_with``
(the baseline server that ran beside it, or the baseline blocks measured just before and just
after it: see ``sweep/schedule.py``); of a baseline server shared by a stage's candidates, the
request measured beside this candidate's server (``beside``); in files without those fields
(older files, the sequential design), every baseline request for the same prompt and
repetition. Several matches are averaged on the log scale (a bracket's two sides).

A stage's baseline server answers each prompt once beside every candidate's server: the same request
(prompt, seed, answer) several times on one server. One of them far slower than the others (below
:data:`INTERRUPTED` of their median) was interrupted — another program took the machine — and says
nothing about the candidate beside it: that pair is left out (``interrupted``). The test looks at the
target alone only, so it cannot favour a candidate; with fewer than three such requests nothing is left out.

A request during which other programs took a burst of the machine (their CPU share, measured around each
request from ``/proc``, at least :data:`CONTENDED` above the usual share of its stage's requests on both
sides) measured the contention, not the method: on two cores one busy process next to llama-server's
threads slowed requests tenfold (make demo, 2026-11-27). Its pair is left out (``contended``). The share is
read from the machine, not from the speed, so the rule treats the target alone and the candidate alike;
a steadily busy machine shifts the stage's usual share and leaves nothing out (that is a session effect).

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


INTERRUPTED = 0.75      # a repeat of the same request on the same server below this share of their median


def interrupted(request: RequestRecord, repeats: list[RequestRecord]) -> bool:
    """The baseline ``request`` ran far slower than the same request on the same server (three or more)."""
    same = [_rate(b) or 0.0 for b in repeats if b.session == request.session]
    rate = _rate(request)
    return len(same) >= 3 and rate is not None and rate < INTERRUPTED * statistics.median(same)


CONTENDED = 0.10        # other programs' CPU share during a request this far above its stage's median


def contended(row: Row, baseline: Row) -> set[int]:
    """The requests of ``row`` and ``baseline`` (by ``id``) measured during a burst of other programs' load:
    a share at least :data:`CONTENDED` above the median of the same stage's requests of both (four or more
    readings; files without the share leave nothing out)."""
    by_stage: dict[int | None, list[RequestRecord]] = {}
    for r in row.requests:
        if r.other_cpu_share is not None:
            by_stage.setdefault(r.block, []).append(r)
    out: set[int] = set()
    for stage, mine in by_stage.items():
        group = mine + _stage_shares(baseline).get(stage, [])
        if len(group) >= 4:
            usual = statistics.median(r.other_cpu_share or 0.0 for r in group)
            out.update(id(r) for r in group if (r.other_cpu_share or 0.0) - usual >= CONTENDED)
    return out


def left_out(row: Row, baseline: Row) -> tuple[int, int]:
    """How many of ``row``'s measured requests the pairing leaves out: (their baseline request beside them was
    interrupted, one side ran during a burst of other programs' load)."""
    busy, by_key = contended(row, baseline), _index(baseline)
    why = [_left_out(r, by_key.get((r.prompt_id, r.run), []), busy)[1] for r in row.requests if _rate(r) is not None]
    return why.count("interrupted"), why.count("contended")


def pairs(row: Row, baseline: Row) -> list[Pair]:
    """Every measured request of ``row`` with its baseline counterpart(s)."""
    by_key, busy = _index(baseline), contended(row, baseline)
    out = []
    for r in row.requests:
        rate = _rate(r)
        matches, why = _left_out(r, by_key.get((r.prompt_id, r.run), []), busy)
        if rate is None or why is not None or not matches:
            continue
        base = statistics.fmean(math.log(_rate(b) or 1.0) for b in matches)
        bound = request_bound(r) if row.role != "ceiling" else None
        out.append(Pair(r.prompt_id, r.category, r.run, r.session, math.log(rate) - base,
                        math.log(bound) if bound is not None else None, r.draft_n, r.block,
                        session_order(r.session, *(b.session for b in matches))))
    return out


def _left_out(r: RequestRecord, matches: list[RequestRecord], busy: set[int]) -> tuple[list[RequestRecord], str | None]:
    """The baseline requests ``r`` is compared with, and why the pair is left out (None: it is kept)."""
    if r.compared_with is not None:
        wanted = set(r.compared_with)
        repeats = [b for b in matches if b.session in wanted]
        beside = [b for b in repeats if b.beside == r.session]
        matches = beside or [b for b in repeats if b.beside is None]   # the request measured beside it
        if beside and any(interrupted(b, repeats) for b in beside):
            return matches, "interrupted"
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
