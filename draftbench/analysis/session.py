"""Carried state as a workload: a session's speed-up, kept apart from the fresh-prompt figure.

The ``session`` workload sends one conversation whose turns build on each other, in order, on one
server: methods that learn across requests (``ngram-mod``, ``ngram-cache``, the ``ngram-map-*``
pools) see the earlier turns and their answers, which is the point of measuring it. What it
shows is the gain *within a session*; a user's next, fresh prompt sees none of that state. So a
row's ``speedup`` (and every verdict built on it) is computed on the other requests only, and the
session's requests get their own ``speedup_in_session``, named as such wherever it is shown.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..config.workloads import SESSION_CATEGORY
from ..results.file import RequestRecord, ResultsFile, Row
from ..results.speedup import Speedup
from .stats import describe_speedup, speedup

WITHIN_A_SESSION = "within a session"


def in_session(record: RequestRecord) -> bool:
    return record.category == SESSION_CATEGORY


def category_label(category: str) -> str:
    """How a category is named to people: the session's says that its figure is within a session."""
    return f"{category} ({WITHIN_A_SESSION})" if category == SESSION_CATEGORY else category


def tps_by_key(requests: Iterable[RequestRecord], *, session: bool) -> dict[tuple[str, int], float]:
    """(prompt id, run) -> decode tok/s of the measured requests, of the session (``session``) or not."""
    return {(r.prompt_id, r.run): r.decode_tps for r in requests
            if r.error is None and r.decode_tps and in_session(r) == session}


def session_speedup(row: Row, baseline: Row, *, noise_floor: float) -> Speedup | None:
    """The speed-up on the session's requests alone; None when the row measured none."""
    if not any(in_session(r) for r in row.requests):
        return None
    return speedup(tps_by_key(baseline.requests, session=True), tps_by_key(row.requests, session=True),
                   noise_floor=noise_floor)


def _name(row: Row) -> str:
    return (row.draft or "") + (f" (k={row.draft_max})" if row.draft_max else "")


@dataclass(frozen=True)
class SessionBest:
    """The best configuration within a session (a figure apart from the fresh-prompt verdict)."""

    candidate: str
    speedup: Speedup
    significant_gain: bool
    fresh_measured: bool                 # some row also has a fresh-prompt figure

    def to_dict(self) -> dict[str, Any]:
        return {"candidate": self.candidate, "speedup": self.speedup.to_dict(),
                "significant_gain": self.significant_gain, "fresh_measured": self.fresh_measured}


def session_summary(results: ResultsFile, target: str, level: int) -> SessionBest | None:
    """The best configuration within a session for ``target`` at ``level`` streams; None when no session was
    measured."""
    rows = [r for r in results.rows_of(target) if r.concurrency == level and r.counts_as_speedup()
            and r.speedup_in_session is not None]
    if not rows:
        return None
    best = max(rows, key=lambda r: ((r.speedup_in_session.ci95_low or r.speedup_in_session.ratio)
                                    if r.speedup_in_session else 0.0))
    speed = best.speedup_in_session
    assert speed is not None
    return SessionBest(_name(best), speed, bool(speed.significant and speed.ratio > 1),
                       any(r.speedup is not None for r in rows))


def session_sentence(summary: SessionBest) -> str:
    """'Within a session (…): best ngram-mod, +40% […]; not a fresh prompt's figure.'"""
    what = (f"best {summary.candidate}, {describe_speedup(summary.speedup)}" if summary.significant_gain
            else f"nothing significantly faster (best measured: {summary.candidate}, "
                 f"{describe_speedup(summary.speedup)})")
    return (f"Within a session (the {SESSION_CATEGORY} workload: turns that build on earlier ones on the same server, "
            f"where a method may reuse what it saw): {what}; this is not the figure for a user's next, fresh prompt.")


def no_fresh_sentence(target: str) -> str:
    return (f"{target}: only the {SESSION_CATEGORY} workload was measured, so there is no figure for a user's next, "
            "fresh prompt (add other categories to settings.prompts).")
