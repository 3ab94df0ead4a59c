"""Percentages, written one way everywhere: a fraction (an acceptance rate) and a ratio as a change
(a speed-up), as text for people or as a number for a chart or a results file."""

from __future__ import annotations

MAX_RATIO = 10**6      # a speed-up no measurement reaches: an interval's end beyond it bounds nothing


def percent(fraction: float | None, digits: int = 0) -> str:
    """A fraction as a percentage: 0.753 -> '75%'; 'n/a' when not measured."""
    return "n/a" if fraction is None else f"{fraction * 100:.{digits}f}%"


def percent_change(ratio: float) -> float:
    """A ratio as a change in percent, rounded for a results file or a chart: 1.1234 -> 12.34."""
    return round((ratio - 1) * 100, 2)


def signed_change(ratio: float, digits: int | None = None) -> str:
    """A ratio as a change in percent: 1.12 -> '+12%', 0.996 -> '−0.4%'. Without ``digits``, one decimal
    near zero (so a small slowdown never reads as '−0%') and none above; U+2212 minus for legibility."""
    change = (ratio - 1) * 100
    if digits is None:
        digits = 1 if abs(change) < 1 else 0
    return f"{change:+.{digits}f}%".replace("-", "\u2212")


def change_text(ratio: float | None) -> str:
    """A ratio as a change in percent with one decimal and an ASCII sign, as the verdict's sentences write it:
    1.123 -> '+12.3%', 0.98 -> '-2.0%'; 'n/a' when not measured; 'unbounded' for an interval's end that bounds
    nothing (infinite, or past :data:`MAX_RATIO`)."""
    if ratio is None:
        return "n/a"
    return "unbounded" if not ratio <= MAX_RATIO else f"{(ratio - 1) * 100:+.1f}%"
