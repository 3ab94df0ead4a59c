"""Numbers in messages: whole numbers with thousands separators, a huge integer by its length, a temperature;
durations."""

from __future__ import annotations


def number_text(value: float) -> str:
    if isinstance(value, int) and abs(value) >= 10**18:
        return f"a {len(str(abs(value)))}-digit number"
    whole = isinstance(value, int) or (float(value).is_integer() and abs(value) < 1e16)
    return (f"{value:,}" if whole else f"{value:g}").removesuffix(".0")


def above_what_is_measured(value: float, maximum: float, unit: str = "") -> str:
    """Why a loaded value is refused: 'is 1e+308 tok/s, more than 10,000,000 tok/s, which no measurement reaches …'."""
    unit = f" {unit}" if unit else ""
    shown = number_text(value) + ("" if number_text(value).startswith("a ") else unit)
    return (f"is {shown}, more than {number_text(maximum)}{unit}, which no measurement reaches (the file was "
            "edited, or a broken figure was saved)")


def duration_text(seconds: float) -> str:
    """'1h05m', '4m07s', '12s': a duration as the console and the verdict's next command say it."""
    seconds = round(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def temperature_text(t: float) -> str:
    """A sampling temperature as every view writes it: 0, 0.7, 1.0 (a whole temperature above 0 keeps its ``.0``)."""
    return f"{t:.1f}" if t and float(t).is_integer() else f"{t:g}"
