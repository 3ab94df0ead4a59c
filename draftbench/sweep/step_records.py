"""Small facts the steps (``sweep/steps.py``) read from what they recorded: session ids, and the
figures shown after a step."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..results.file import RequestRecord, ResultsFile, Row


def next_session_number(results: ResultsFile) -> int:
    """Session ids are ``s<N>``, unique in a results file: the next free N."""
    numbers = [int(m.group(1)) for row in results.results for r in row.requests
               if r.session and (m := re.fullmatch(r"s(\d+)", r.session))]
    return max(numbers, default=0) + 1


def mean_of(values) -> float | None:
    vals = [v for v in values if v]
    return sum(vals) / len(vals) if vals else None


def acceptance_of(records: Sequence[RequestRecord]) -> float | None:
    drafted = sum(r.draft_n or 0 for r in records)
    return sum(r.draft_n_accepted or 0 for r in records) / drafted if drafted else None


def last_session(row: Row, block: int | None) -> str | None:
    sessions = [r.session for r in row.requests if r.block == block and r.session]
    return sessions[-1] if sessions else None


def steps_measured(rows: Iterable[Row | None], paired: bool) -> int:
    """How many steps these rows' requests were measured in: their server sessions, two a step where a
    baseline and a candidate server ran together (``paired``). A resumed race numbers its steps on from
    there, not from 1."""
    sessions = {r.session for row in rows if row is not None for r in row.requests if r.session}
    return len(sessions) // (2 if paired else 1)


def peak_memory(prior: Row | None, memory: dict | None) -> dict | None:
    """The most any of a row's server sessions held (each block is a new server), and how many said."""
    earlier = (prior.memory if prior is not None else None) or {}
    if memory is None:
        return prior.memory if prior is not None else None
    out = {k: max(v, earlier.get(k) or 0) for k, v in memory.items()}
    return {**out, "servers": (earlier.get("servers") or 0) + 1}
