"""Text helpers for the report: escaping for HTML and for Plotly, and number formatting.

The page and the figures make their text here; percentages come from :mod:`draftbench.common.percent`,
so the report, the verdict and the console say the same thing.
"""

from __future__ import annotations

import html
from datetime import datetime

from ..common.text_safety import any_string, map_strings, needs_escaping, safe_text
from ..results.file import ResultsFile


def displayable(results: ResultsFile) -> ResultsFile:
    """``results`` with every control character, bidi override or isolate and lone surrogate in its text
    shown as a visible escape (``\\x1b``, ``\\u202e``), as the console shows them: a label must not
    reorder or hide the page around it. Plotly decodes the figures' JSON in the browser, so escaping the
    finished page would be too late; the data is made safe before anything is rendered."""
    data = results.to_dict()
    if not any_string(data, needs_escaping):
        return results                  # the usual case: nothing to copy
    return ResultsFile.from_dict(map_strings(data, safe_text), source="<the report's copy>")


def esc(text: object) -> str:
    """Escape for HTML text and attribute values; ``None`` is the empty string."""
    return html.escape("" if text is None else str(text), quote=True)


def plotly_text(text: object) -> str:
    """Escape text for Plotly labels (it renders <b>, <a>, <br>… in names, ticks, text and hovers)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def num(x: float | None, fmt: str = ".2f", unit: str = "") -> str:
    """A number with a unit; 'n/a' when not measured."""
    return "n/a" if x is None else f"{x:{fmt}}{unit}"



def date_text(ts: str | None) -> str:
    """A results file's timestamp as people read it: '2026-03-01 12:00 UTC' ('unknown' when absent)."""
    if not ts:
        return "unknown"
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M %Z").strip()
    except ValueError:
        return ts
