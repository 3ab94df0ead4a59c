"""The concurrency charts: speed-up, aggregate throughput and latency percentiles against the number of
concurrent streams. Drawn only for files with several levels (see ``figures.CHARTS``), so one-stream
reports stay as they were.

Every speed-up here is a row's own (vs the baseline at the same level); rows that are not valid
speed-ups (errors, inactive speculation) leave a gap in their line rather than a point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..analysis.stats import describe_speedup
from ..analysis.summary import verdicts_of
from ..analysis.verdict import level_summary
from ..common.percent import percent, percent_change
from ..results.file import Row
from ..results.kinds import Role
from . import theme
from .text import num, plotly_text
from .view import ReportData

Figure = dict[str, Any]


@dataclass(frozen=True)
class Series:
    """One line across the levels: a target alone, or a target with one candidate."""

    target: str
    name: str                      # as the legend shows it (already escaped for Plotly)
    rows: dict[int, Row]           # level -> row
    color: str
    speculative: bool


def has_levels(data: ReportData) -> bool:
    return len(data.levels) > 1


def _valid(row: Row | None) -> bool:
    return row is not None and row.counts_as_speedup() and bool(row.speedup)


def series(data: ReportData) -> list[Series]:
    """Per target: its baseline, then every candidate with a valid speed-up at some level."""
    rows = [r for r in data.results.results if r.target in data.targets]
    drafts_k = {(r.draft, r.draft_max) for r in rows if r.role is Role.SPECULATIVE}
    multi_k = len({d for d, _ in drafts_k}) < len(drafts_k)
    several = len(data.targets) > 1
    out: list[Series] = []
    color = 0
    for target in data.targets:
        base = {n: b for n in data.levels if (b := data.results.baseline_for(target, n)) is not None}
        out.append(Series(target, plotly_text(f"baseline ({target} alone)" if several else "baseline (target alone)"),
                          base, theme.BASELINE_COLOR, False))
        grouped: dict[tuple[str | None, int | None], dict[int, Row]] = {}
        for r in rows:
            if r.target == target and r.role is Role.SPECULATIVE and r.draft is not None:
                grouped.setdefault((r.draft, r.draft_max), {}).setdefault(r.concurrency, r)
        for (draft, k), by_level in grouped.items():
            if not any(_valid(r) for r in by_level.values()):
                continue
            label = f"{draft}" + (f" (k={k})" if multi_k and k is not None else "")
            out.append(Series(target, plotly_text(f"{target} + {label}" if several else label), by_level,
                              theme.CLASS_COLORS[color % len(theme.CLASS_COLORS)], True))
            color += 1
    return out


def _layout(**extra: Any) -> dict[str, Any]:
    axis = dict(gridcolor=theme.GRID, zerolinecolor=theme.GRID, linecolor=theme.GRID, automargin=True)
    layout: dict[str, Any] = dict(
        template="none", paper_bgcolor=theme.CARD, plot_bgcolor=theme.CARD,
        font=dict(family=theme.FONT, color=theme.TEXT, size=13), margin=dict(l=70, r=30, t=30, b=60),
        hoverlabel=dict(align="left", bgcolor=theme.HOVER_BG, font=dict(color=theme.TEXT)),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0, bgcolor="rgba(0,0,0,0)"),
        modebar=dict(orientation="v"))      # the toolbar down the right edge, off the legend (report/layout.py)
    for key, value in extra.items():
        layout[key] = {**axis, **value} if key.startswith(("xaxis", "yaxis")) else value
    return layout


def _streams_axis(data: ReportData, **extra: Any) -> dict[str, Any]:
    """Levels on a log-2 scale (1, 2, 4, 8 evenly spaced), ticks at the measured levels only."""
    return dict(type="log", tickvals=list(data.levels), ticktext=[str(n) for n in data.levels],
                title=dict(text="concurrent streams (N)"), **extra)


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


# --------------------------------------------------------------------------- speed-up vs N

def _crossovers(data: ReportData) -> dict[str, int]:
    """Target -> the crossover the verdict names (the most streams at which its candidate still pays)."""
    out = {}
    for verdict in verdicts_of(data.results):
        top = verdict.crossover.max_streams if verdict.crossover is not None else None
        if top is not None and verdict.target in data.targets:
            out[verdict.target] = top
    return out


def speedup_vs_streams_figure(data: ReportData) -> Figure:
    """One line per candidate (speed-up % at each level), its 95% CI as a band; faded markers are not
    significant; a dashed line at each target's crossover."""
    traces = []
    for s in (s for s in series(data) if s.speculative):
        points = [(n, r) for n, r in sorted(s.rows.items()) if _valid(r)]
        speeds = [r.speedup for _, r in points if r.speedup]      # _valid: every point has one
        xs = [n for n, _ in points]
        with_ci = [(n, sp.ci95_low, sp.ci95_high) for n, sp in zip(xs, speeds)
                   if sp.ci95_low is not None and sp.ci95_high is not None]
        if with_ci:
            upper = [percent_change(high) for _, _, high in with_ci]
            lower = [percent_change(low) for _, low, _ in with_ci]
            band_x = [n for n, _, _ in with_ci]
            traces.append(dict(type="scatter", mode="lines", name=f"{s.name} 95% CI", x=band_x + band_x[::-1],
                               y=upper + lower[::-1], fill="toself", fillcolor=_rgba(s.color, 0.18),
                               line=dict(width=0), hoverinfo="skip", showlegend=False, legendgroup=s.name))
        traces.append(dict(
            type="scatter", mode="lines+markers", name=s.name, x=xs, legendgroup=s.name,
            y=[percent_change(sp.ratio) for sp in speeds], line=dict(color=s.color, width=2.5),
            marker=dict(size=9, color=s.color, opacity=[0.4 if sp.significant is False else 1.0 for sp in speeds]),
            customdata=[[plotly_text(describe_speedup(sp)), num(r.mean_tps, ".1f", " tok/s"),
                         num((level_summary(r) or {}).get("aggregate_tps"), ".1f", " tok/s"), percent(r.acceptance_rate)]
                        for sp, (_, r) in zip(speeds, points)],
            hovertemplate="<b>%{fullData.name}</b> at %{x} streams<br>speed-up %{customdata[0]}<br>per stream "
                          "%{customdata[1]}, all streams %{customdata[2]}<br>acceptance %{customdata[3]}<extra></extra>"))
    shapes, notes = [], []
    for target, top in _crossovers(data).items():
        shapes.append(dict(type="line", x0=top, x1=top, yref="paper", y0=0, y1=1,
                           line=dict(color=theme.MUTED, width=1.5, dash="dash")))
        # on a log axis an annotation's x is the log of the value (a shape's is the value itself)
        notes.append(dict(x=math.log10(top), y=1, yref="paper", yanchor="bottom", showarrow=False,
                          font=dict(color=theme.MUTED),
                          text=plotly_text(f"crossover: ≤ {top}" + (f" ({target})" if len(data.targets) > 1 else ""))))
    layout = _layout(height=460, shapes=shapes, annotations=notes, xaxis=_streams_axis(data),
                     yaxis=dict(title=dict(text="speed-up vs the target alone at the same N (%)"), ticksuffix="%",
                                zeroline=True, zerolinecolor=theme.TEXT, zerolinewidth=1.5))
    return dict(data=traces, layout=layout)


def speedup_lead(data: ReportData) -> str:
    return ("Each candidate against the target alone at the same number of concurrent streams, paired by prompt "
            "and repetition. Band: 95% confidence interval; faded markers are not significant. Dashed line: the "
            "crossover — the most streams at which the recommended candidate is still significantly faster.")


# --------------------------------------------------------------------------- aggregate throughput vs N

def throughput_vs_streams_figure(data: ReportData) -> Figure:
    """Output tok/s of all streams together at each level, per series."""
    traces = []
    for s in series(data):
        points = [(n, summary) for n, r in sorted(s.rows.items())
                  if (not s.speculative or _valid(r)) and (summary := level_summary(r)) and summary["aggregate_tps"]]
        traces.append(dict(type="scatter", mode="lines+markers", name=s.name, x=[n for n, _ in points],
                           y=[p["aggregate_tps"] for _, p in points],
                           line=dict(color=s.color, width=2.5, dash="dash" if not s.speculative else "solid"),
                           marker=dict(size=8, color=s.color),
                           customdata=[[num(p["stream_tps"], ".1f", " tok/s")] for _, p in points],
                           hovertemplate="<b>%{fullData.name}</b> at %{x} streams<br>%{y:.1f} tok/s in total<br>"
                                         "%{customdata[0]} per stream<extra></extra>"))
    layout = _layout(height=440, xaxis=_streams_axis(data),
                     yaxis=dict(title=dict(text="output tok/s, all streams together"), rangemode="tozero"))
    return dict(data=traces, layout=layout)


def throughput_lead(data: ReportData) -> str:
    return ("Generated tokens per second of all streams together, over each level's wall time (one stream: its "
            "requests one after another). Dashed: the target alone.")


# --------------------------------------------------------------------------- latency percentiles vs N

def _latency_trace(s: Series, key: str, what: str, axis: str) -> dict[str, Any]:
    points = [(n, p) for n, r in sorted(s.rows.items())
              if (not s.speculative or _valid(r)) and (summary := level_summary(r)) and (p := summary[key])]
    # One legend for both panels (shown with the right one): it names the series, not a panel's measure.
    return dict(type="scatter", mode="lines+markers", name=f"{s.name} (p50, whisker to p99)", x=[n for n, _ in points],
                y=[p["p50"] for _, p in points], xaxis=f"x{axis}", yaxis=f"y{axis}", legendgroup=s.name,
                showlegend=axis == "2", line=dict(color=s.color, width=2, dash="dash" if not s.speculative else "solid"),
                marker=dict(size=8, color=s.color),
                error_y=dict(type="data", symmetric=False, array=[round(p["p99"] - p["p50"], 5) for _, p in points],
                             arrayminus=[0] * len(points), visible=True, color=s.color, thickness=1.2),
                customdata=[[p["p50"], p["p90"], p["p99"], p["n"]] for _, p in points],
                hovertemplate=f"<b>{s.name}</b> at %{{x}} streams<br>{what}: p50 %{{customdata[0]:.3f}} s, p90 "
                              "%{customdata[1]:.3f} s, p99 %{customdata[2]:.3f} s (%{customdata[3]} requests)"
                              "<extra></extra>")


def latency_vs_streams_figure(data: ReportData) -> Figure:
    """Left: time to first token; right: end-to-end request time. Marker at p50, whisker to p99."""
    traces = []
    for s in series(data):
        traces += [_latency_trace(s, "ttft_s", "TTFT", ""), _latency_trace(s, "total_s", "end-to-end", "2")]
    layout = _layout(height=460, margin=dict(l=70, r=30, t=60, b=60),
                     xaxis=_streams_axis(data, domain=[0, 0.46]), xaxis2=_streams_axis(data, domain=[0.54, 1]),
                     yaxis=dict(title=dict(text="time to first token (s)"), rangemode="tozero"),
                     yaxis2=dict(title=dict(text="end-to-end request time (s)"), rangemode="tozero", anchor="x2"))
    return dict(data=traces, layout=layout)


def latency_lead(data: ReportData) -> str:
    return ("Time to first token (left) and whole-request time (right) at each level: the marker is the median, "
            "the whisker reaches p99; hover for p50, p90 and p99.")
