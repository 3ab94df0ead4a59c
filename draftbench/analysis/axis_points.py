"""A results file one point of an axis at a time (a prompt length, a temperature): the rows' own values of the axis,
the file as if only one point had been measured, and the analysis of each point merged back. The context axis
(:mod:`context_length`) and the temperature axis (:mod:`temperature_axis`) cut files the same way; each reads
across its points on its own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..results.file import ResultsFile, Row


def values(results: ResultsFile, field: str, target: str | None = None) -> tuple:
    """The values of ``field`` the rows were measured at (for one target, or any), ascending; () off the axis."""
    rows = results.results if target is None else results.rows_of(target)
    return tuple(sorted({v for r in rows if (v := getattr(r, field)) is not None}))


def at(results: ResultsFile, field: str, value: Any) -> ResultsFile:
    """The file as if only ``value`` had been measured: its rows and the rows of no value (drafts alone)."""
    return replace(results, results=tuple(r for r in results.results if getattr(r, field) in (value, None)))


def each(results: ResultsFile, field: str) -> list[tuple[Any, ResultsFile]]:
    """The file one point at a time (as :func:`at` cuts it); ``[(None, results)]`` off the axis."""
    found = values(results, field)
    return [(v, at(results, field, v)) for v in found] if found else [(None, results)]


def first(results: ResultsFile, field: str) -> ResultsFile:
    """What the single-point views (grid, exports' speed-ups) show: the first point, or the file."""
    found = values(results, field)
    return at(results, field, found[0]) if found else results


def analyze_each(results: ResultsFile, field: str,
                 analyze_one: Callable[[ResultsFile], ResultsFile]) -> tuple[ResultsFile, dict[Any, ResultsFile]]:
    """``analyze_one`` on each point's rows, and the rows merged back in file order (a row of no point takes its
    analysis at the first point); with each point's analysed file, for the summary that reads across them."""
    found = values(results, field)
    analysed = {v: analyze_one(at(results, field, v)) for v in found}
    by_key: dict[tuple, Row] = {}
    for v in reversed(found):
        by_key.update({r.key: r for r in analysed[v].results})
    return replace(results, results=tuple(by_key.get(r.key, r) for r in results.results)), analysed
