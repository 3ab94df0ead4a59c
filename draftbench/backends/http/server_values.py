"""Numbers a server reports (token counts, draft counters, rates), checked in one place.

A server is outside our control: a counter may arrive as a string, negative, NaN, 1e30, or
with more tokens accepted than drafted. None of that may crash a sweep or reach a results file
as an impossible figure (−500% acceptance). Each check either returns a clean value, ``None``
when the server did not report it, or raises :class:`RequestError` naming the field and value;
the request then fails and its combination becomes an ``error`` row.
"""

from __future__ import annotations

import math
from typing import Any

from ...common.errors import RequestError

# No single request produces 100 million tokens, and even a batch of tiny models on a GPU decodes far
# below 10 million tok/s: beyond is a broken counter. Results files are held to the same bounds on load.
from ...results.bounds import MAX_TOKENS, MAX_TOKENS_PER_SECOND

FIX_SERVER_DATA = "the server sent an impossible value; check its version, or report it to the server's maintainers"


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "…"


def server_count(value: Any, where: str) -> int | None:
    """A token count the server reported at ``where`` (e.g. ``timings.draft_n``).

    ``None`` if absent; a non-negative whole number up to :data:`MAX_TOKENS` (``30.0`` is 30);
    anything else (``"30"``, ``-10``, ``NaN``, ``1e30``, ``true``) raises :class:`RequestError`.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RequestError(f"the server reported {where} = {_describe(value)} ({type(value).__name__}); "
                           "a token count must be a whole number", FIX_SERVER_DATA)
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise RequestError(f"the server reported {where} = {_describe(value)}; a token count must be a whole "
                               "number", FIX_SERVER_DATA)
        value = int(value)
    if value < 0 or value > MAX_TOKENS:
        raise RequestError(f"the server reported {where} = {_describe(value)}; a token count must be between 0 and "
                           f"{MAX_TOKENS:.0e}", FIX_SERVER_DATA)
    return value


def server_rate(value: Any, where: str) -> float | None:
    """A rate (tokens per second) the server reported: ``None`` if absent, else finite and in range."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RequestError(f"the server reported {where} = {_describe(value)} ({type(value).__name__}); "
                           "a rate must be a number", FIX_SERVER_DATA)
    if not math.isfinite(value) or value < 0 or value > MAX_TOKENS_PER_SECOND:
        raise RequestError(f"the server reported {where} = {_describe(value)}; a rate must be between 0 and "
                           f"{MAX_TOKENS_PER_SECOND:.0e} tokens/s", FIX_SERVER_DATA)
    return float(value)


def counter_difference(after: Any, before: Any, where: str) -> int | None:
    """How far a cumulative counter (Prometheus ``/metrics``) moved during one request.

    ``None`` when either reading is missing; a counter that went backwards (the server restarted
    or reset it) or is not a finite number raises :class:`RequestError`.
    """
    if after is None or before is None:
        return None
    for value in (after, before):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise RequestError(f"the server's counter {where} reads {_describe(value)}; a counter must be a "
                               "finite number", FIX_SERVER_DATA)
    moved = round(after - before)
    if moved < 0:
        raise RequestError(f"the server's counter {where} went backwards during the request ({before:g} → "
                           f"{after:g}); was the server restarted?", "run the combination again")
    return server_count(moved, f"the change of {where}")
