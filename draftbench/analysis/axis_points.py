"""A results file one point of an axis at a time (a prompt length, a temperature): the rows' own values of the axis,
the file as if only one point had been measured, and the analysis of each point merged back. The context axis
(:mod:`context_length`) and the temperature axis (:mod:`temperature_axis`) cut files the same way; each reads
across its points on its own. A sweep measures and decides each target once per :class:`Point`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..common.numbers import temperature_text
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


@dataclass(frozen=True)
class Point:
    """One point of a sweep's axes, where a target is measured and decided on its own: a prompt length (the context
    axis) or a temperature (the temperature axis); both None off the axes (the two never go together)."""

    context_tokens: int | None = None
    temperature: float | None = None

    def of(self, results: ResultsFile) -> ResultsFile:
        """The file as if only this point had been measured: its rows and the rows of no point (drafts alone)."""
        part = at(results, "context_tokens", self.context_tokens) if self.context_tokens is not None else results
        return at(part, "temperature", self.temperature) if self.temperature is not None else part

    def holds(self, item: Any) -> bool:
        """Whether a row or a combination (anything with both fields) is measured at this point."""
        return item.context_tokens == self.context_tokens and item.temperature == self.temperature

    def name(self, target: str) -> str:
        """A target at this point, as its verdict is keyed: "big", "big at 2048 tokens", "big at temperature 0.7"."""
        return target + (f" at {self.context_tokens} tokens" if self.context_tokens is not None else "") + \
            (f" at temperature {temperature_text(self.temperature)}" if self.temperature is not None else "")


def each_point(results: ResultsFile) -> list[tuple[Point, ResultsFile]]:
    """The file one point of its axes at a time (as :meth:`Point.of` cuts it); ``[(Point(), results)]`` off them."""
    return [(Point(n, t), part) for t, hot in each(results, "temperature") for n, part in each(hot, "context_tokens")]
