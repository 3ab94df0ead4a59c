"""The HTML report: a pure function of a results file.

- :mod:`.model`: what the report shows — size classes, the targets × drafts grid with each
  cell's state, the best draft per size class, problems;
- :mod:`.figures`: the Plotly figures as plain dicts, and the registry of charts (a new chart
  plugs in there);
- :mod:`.page`: the HTML page around them, and writing it atomically;
- :mod:`.text`: escaping and number formatting; :mod:`.theme`: colours and CSS.

Only the CLIs and the sweep import this package, when they write a report.
"""

from __future__ import annotations

from .figures import CHART_IDS, CHARTS, Chart, build_figures
from .page import render_report, write_report
from .text import plotly_text
from .view import UNKNOWN_SIZE, build_data, size_class

__all__ = [
    "CHARTS",
    "CHART_IDS",
    "UNKNOWN_SIZE",
    "Chart",
    "build_data",
    "build_figures",
    "plotly_text",
    "render_report",
    "size_class",
    "write_report",
]
