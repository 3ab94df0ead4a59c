"""Checks across values of a loaded results file that a per-value type check cannot make.

:mod:`draftbench.results.schema` holds every value to its type and physical bounds; here, what
only makes sense between values: a combination that appears twice (shown twice in the report,
kept twice on resume) and more draft tokens accepted than drafted. One pass over the rows and
their requests (O(size)).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class _Counts(Protocol):
    @property
    def draft_n(self) -> int | None: ...

    @property
    def draft_n_accepted(self) -> int | None: ...


class RowLike(_Counts, Protocol):
    """A :class:`draftbench.results.file.Row` (declared here: file.py calls this module)."""

    @property
    def role(self) -> str: ...

    @property
    def target(self) -> str: ...

    @property
    def draft(self) -> str | None: ...

    @property
    def draft_max(self) -> int | None: ...

    @property
    def concurrency(self) -> int: ...

    @property
    def key(self) -> tuple: ...

    @property
    def requests(self) -> Sequence[_Counts]: ...


def _title(row: RowLike) -> str:
    parts = [f"target {row.target!r}"]
    if row.draft is not None:
        parts.append(f"draft {row.draft!r}")
    if row.draft_max is not None:
        parts.append(f"k={row.draft_max}")
    if row.concurrency != 1:
        parts.append(f"{row.concurrency} streams")
    return f"{row.role} {', '.join(parts)}"


def _over_accepted(drafted: int | None, accepted: int | None) -> bool:
    return drafted is not None and accepted is not None and accepted > drafted


def rows_problem(rows: Sequence[RowLike]) -> tuple[str, str, str] | None:
    """``(json path, what is wrong, fix)`` for the first inconsistent row, or None."""
    first_at: dict[tuple, int] = {}
    for i, row in enumerate(rows):
        where = f"$.results[{i}]"
        if row.key in first_at:
            return (where, f"measures the same combination as $.results[{first_at[row.key]}] ({_title(row)}): "
                    "a row appears twice, and the report would show it twice",
                    "delete the copy you do not trust (or restore the file from a backup)")
        first_at[row.key] = i
        if _over_accepted(row.draft_n, row.draft_n_accepted):
            return (f"{where}.draft_n_accepted", f"is {row.draft_n_accepted}, more than the {row.draft_n} tokens "
                    "drafted (draft_n): no draft has more tokens accepted than it drafted",
                    "restore the file from a backup")
        for j, request in enumerate(row.requests):
            if _over_accepted(request.draft_n, request.draft_n_accepted):
                return (f"{where}.requests[{j}].draft_n_accepted", f"is {request.draft_n_accepted}, more than the "
                        f"{request.draft_n} tokens drafted (draft_n): no draft has more tokens accepted than it "
                        "drafted", "restore the file from a backup")
    return None
