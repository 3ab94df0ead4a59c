"""Text helpers for the report: escaping for HTML and for Plotly, and number formatting.

The page and the figures make their text here; percentages come from :mod:`draftbench.common.percent`,
so the report, the verdict and the console say the same thing.
"""

from __future__ import annotations

import html


def esc(text: object) -> str:
    """Escape for HTML text and attribute values; ``None`` is the empty string."""
    return html.escape("" if text is None else str(text), quote=True)


def plotly_text(text: object) -> str:
    """Escape text for Plotly labels (it renders <b>, <a>, <br>… in names, ticks, text and hovers)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def num(x: float | None, fmt: str = ".2f", unit: str = "") -> str:
    """A number with a unit; 'n/a' when not measured."""
    return "n/a" if x is None else f"{x:{fmt}}{unit}"

