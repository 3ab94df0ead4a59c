"""The temperature chart: each candidate's speed-up (top) and acceptance (bottom) against the sampling temperature.
Drawn only for files measured at several temperatures (``settings.temperature`` as a list).

Everything is read from each target's verdict's ``temperature`` (``analysis.temperature_axis``): each temperature's
speed-ups are that temperature's own analysis, against the target alone at the same temperature.
"""

from __future__ import annotations

from typing import Any

from ..analysis.crossover import LevelOutcome
from ..analysis.summary import verdicts_of
from ..analysis.temperature_verdict import HeatPoint, TemperatureAxis, heat
from . import theme
from .layout import base_layout
from .text import plotly_text
from .view import ReportData

Figure = dict[str, Any]


def _axes(data: ReportData) -> list[tuple[str, TemperatureAxis]]:
    return [(v.target, v.temperature) for v in verdicts_of(data.results) if v.temperature is not None]


def has_temperatures(data: ReportData) -> bool:
    return any(len(axis.temperatures) > 1 for _, axis in _axes(data))


def _series(data: ReportData) -> list[tuple[str, dict[float, HeatPoint], str]]:
    """(name, {temperature: its point}, colour) per target and candidate."""
    several = len(_axes(data)) > 1
    out: list[tuple[str, dict[float, HeatPoint], str]] = []
    for target, axis in _axes(data):
        names = list(dict.fromkeys(c.candidate for p in axis.per_temperature for c in p.candidates))
        for name in names:
            points = {p.temperature: c for p in axis.per_temperature for c in p.candidates if c.candidate == name}
            color = theme.CLASS_COLORS[len(out) % len(theme.CLASS_COLORS)]
            out.append(((f"{target} + " if several else "") + name, points, color))
    return out


def lead(data: ReportData) -> str:
    return ("Top: each candidate's decode speed-up over the target alone at each sampling temperature (each "
            "temperature analysed on its own, against the target alone at that temperature). Whiskers: 95% "
            "confidence interval for that candidate alone; hollow markers are not significant. Bottom: its acceptance "
            "(accepted / drafted tokens). Sampling spreads the target's choices, so acceptance falls as the temperature "
            "rises; probabilistic drafting samples the draft and verifies by rejection, greedy proposes its argmax.")


def figure(data: ReportData) -> Figure:
    traces: list[dict[str, Any]] = []
    temps = sorted({t for _, axis in _axes(data) for t in axis.temperatures})
    for name, points, color in _series(data):
        # a row that is no speed-up (speculation never ran, a failed row) is no point, as on every other chart
        xs = [t for t in sorted(points) if points[t].speedup is not None
              and points[t].outcome is not LevelOutcome.NO_MEASUREMENT]
        speeds = [points[t].speedup for t in xs]
        if xs:
            traces.append(dict(
                type="scatter", mode="lines+markers", name=plotly_text(name), legendgroup=plotly_text(name), x=xs,
                y=[(s.ratio - 1) * 100 for s in speeds if s], line=dict(color=color, width=2),
                marker=dict(size=10, color=[color if s and s.significant else theme.CARD for s in speeds],
                            line=dict(color=color, width=2)),
                error_y=dict(type="data", symmetric=False, color=color,
                             array=[((s.ci95_high or s.ratio) - s.ratio) * 100 for s in speeds if s],
                             arrayminus=[(s.ratio - (s.ci95_low or s.ratio)) * 100 for s in speeds if s]),
                hovertemplate="temperature %{x}: %{y:+.1f}%<extra>" + plotly_text(name) + "</extra>"))
        accepted = [t for t in sorted(points) if points[t].acceptance_rate is not None]
        traces.append(dict(
            type="scatter", mode="lines+markers", name=plotly_text(f"{name}: acceptance"),
            legendgroup=plotly_text(name), showlegend=False, x=accepted, xaxis="x", yaxis="y2",
            y=[(points[t].acceptance_rate or 0) * 100 for t in accepted], line=dict(color=color, width=2, dash="dot"),
            hovertemplate="temperature %{x}: %{y:.0f}% accepted<extra>" + plotly_text(name) + "</extra>"))
    # one x axis for both panels, along the bottom one (the acceptance's), so its title sits under everything
    ticks = dict(tickvals=temps, ticktext=[heat(t) for t in temps], title=dict(text="sampling temperature"),
                 anchor="y2")
    axis = dict(gridcolor=theme.GRID, zerolinecolor=theme.GRID, linecolor=theme.GRID, automargin=True)
    return dict(data=traces, layout=base_layout(
        height=560, xaxis=ticks,
        yaxis=dict(domain=[0.38, 1.0], title=dict(text="decode speed-up vs the target alone (%)"), ticksuffix="%",
                   zeroline=True, zerolinecolor=theme.TEXT, zerolinewidth=1.5),
        yaxis2=dict(axis, domain=[0.0, 0.32], anchor="x", range=[0, 100], ticksuffix="%",
                    title=dict(text="acceptance"))))
