"""Text helpers for the report: escaping for HTML and for Plotly, and number formatting.

The one place where values become strings, so the page and the figures say the same thing.
"""

from __future__ import annotations

import html
from datetime import datetime


def esc(text: object) -> str:
    """Escape for HTML text and attribute values; ``None`` is the empty string."""
    return html.escape("" if text is None else str(text), quote=True)


def plotly_text(text: object) -> str:
    """Escape text for Plotly labels (it renders <b>, <a>, <br>… in names, ticks, text and hovers)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def pct(x: float | None, digits: int = 0) -> str:
    """A fraction as a percentage: 0.753 -> '75%'; 'n/a' when not measured."""
    return "n/a" if x is None else f"{x * 100:.{digits}f}%"


def num(x: float | None, fmt: str = ".2f", unit: str = "") -> str:
    """A number with a unit; 'n/a' when not measured."""
    return "n/a" if x is None else f"{x:{fmt}}{unit}"


def signed_pct(p: float) -> str:
    """A change in percent: '+12%', '−0.4%'."""
    # One decimal near zero so a small slowdown never reads as "-0%"; U+2212 minus for legibility.
    return (f"{p:+.1f}%" if abs(p) < 1 else f"{p:+.0f}%").replace("-", "\u2212")


def date_text(ts: str | None) -> str:
    """A results file's timestamp as people read it: '2026-03-01 12:00 UTC' ('unknown' when absent)."""
    if not ts:
        return "unknown"
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M %Z").strip()
    except ValueError:
        return ts
