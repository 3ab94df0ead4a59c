"""The context-length charts: speed-up, time to first token and memory per server against the prompt's
length (log x axis). Drawn only for files measured at several lengths (``settings.context_tokens``).

Everything is read from each target's verdict's ``context`` (``analysis.context_length``): each length's
speed-ups are that length's own analysis (against the baseline at the same prompts).
"""

from __future__ import annotations

from typing import Any

from ..analysis.context_verdict import ContextAxis, LengthPoint
from ..analysis.summary import verdicts_of
from ..results.memory import ServerMemory
from . import theme
from .layout import base_layout
from .text import plotly_text
from .view import ReportData

Figure = dict[str, Any]


def has_lengths(data: ReportData) -> bool:
    return any(len(axis.lengths) > 1 for _, axis in _axes(data))


def _axes(data: ReportData) -> list[tuple[str, ContextAxis]]:
    """(target, its context axis: empty for a target not measured by prompt length) per target."""
    return [(v.target, v.context or ContextAxis((), None, ())) for v in verdicts_of(data.results)]


def _axis(lengths: list[int]) -> dict[str, Any]:
    return dict(type="log", tickvals=lengths, ticktext=[f"{n:,}" for n in lengths],
                title=dict(text="prompt length (tokens, log scale)"))


def _series(data: ReportData) -> list[tuple[str, dict[int, LengthPoint], str]]:
    """(name, {length: its point}, colour) per target and candidate, baseline first as its own series."""
    several = len(verdicts_of(data.results)) > 1
    out: list[tuple[str, dict[int, LengthPoint], str]] = []
    color = 0
    for target, context in _axes(data):
        per = context.per_length
        prefix = f"{target} + " if several else ""
        out.append((f"{target} alone" if several else "baseline (target alone)",
                    {p.context_tokens: p.baseline for p in per}, theme.BASELINE_COLOR))
        names = list(dict.fromkeys(c.candidate or "" for p in per for c in p.candidates))
        for name in names:
            points = {p.context_tokens: c for p in per for c in p.candidates if c.candidate == name}
            out.append((prefix + name, points, theme.CLASS_COLORS[color % len(theme.CLASS_COLORS)]))
            color += 1
    return out


def _lengths(data: ReportData) -> list[int]:
    return sorted({n for _, axis in _axes(data) for n in axis.lengths})


def speedup_lead(data: ReportData) -> str:
    return ("Each candidate's decode speed-up over the target alone at each prompt length (each length analysed "
            "on its own, as every verdict is). Whiskers: each candidate's own 95% interval, for it alone; hollow markers are not "
            "significant. Long prompts make a draft prefill them too and every verify step read a longer cache.")


def speedup_figure(data: ReportData) -> Figure:
    traces = []
    for name, points, color in _series(data):
        speeds = [c.speedup for _, c in sorted(points.items()) if c.speedup is not None]
        xs = [n for n, c in sorted(points.items()) if c.speedup is not None]
        if not xs:
            continue
        ys = [(s.ratio - 1) * 100 for s in speeds]
        plus = [((s.ci95_high or s.ratio) - s.ratio) * 100 for s in speeds]
        minus = [(s.ratio - (s.ci95_low or s.ratio)) * 100 for s in speeds]
        traces.append(dict(type="scatter", mode="lines+markers", name=plotly_text(name), x=xs, y=ys,
                           line=dict(color=color, width=2),
                           marker=dict(size=10, color=[color if s.significant else theme.CARD for s in speeds],
                                       line=dict(color=color, width=2)),
                           error_y=dict(type="data", symmetric=False, array=plus, arrayminus=minus, color=color),
                           hovertemplate="%{x:,} tokens: %{y:+.1f}%<extra>" + plotly_text(name) + "</extra>"))
    return dict(data=traces, layout=base_layout(height=440, xaxis=_axis(_lengths(data)),
                                                 yaxis=dict(title=dict(text="decode speed-up vs the target alone (%)"),
                                                            ticksuffix="%", zeroline=True,
                                                            zerolinecolor=theme.TEXT, zerolinewidth=1.5)))


def ttft_lead(data: ReportData) -> str:
    typical = next((axis.typical_output_tokens for _, axis in _axes(data)), None)
    return ("Median time to first token of each server at each length (the prompt's prefill: a draft model "
            "prefills it too, so its line sits above the baseline's), and dotted, a whole request of "
            f"{typical or 'max_tokens'} output tokens modelled from the measured first token and decode rate.")


def ttft_figure(data: ReportData) -> Figure:
    traces = []
    for name, points, color in _series(data):
        xs = sorted(points)
        traces.append(dict(type="scatter", mode="lines+markers", name=plotly_text(f"{name}: first token"), x=xs,
                           y=[points[n].timing.ttft_s for n in xs], line=dict(color=color, width=2),
                           hovertemplate="%{x:,} tokens: %{y:.2f} s<extra>" + plotly_text(name) + "</extra>"))
        traces.append(dict(type="scatter", mode="lines", name=plotly_text(f"{name}: whole request"), x=xs,
                           y=[points[n].timing.end_to_end_s for n in xs], line=dict(color=color, width=1, dash="dot"),
                           hovertemplate="%{x:,} tokens: %{y:.2f} s end to end<extra>" + plotly_text(name)
                           + "</extra>"))
    return dict(data=traces, layout=base_layout(height=440, xaxis=_axis(_lengths(data)),
                                                 yaxis=dict(title=dict(text="seconds (median)"), rangemode="tozero")))


def memory_lead(data: ReportData) -> str:
    return ("Peak resident memory of each server at each length (Linux VmHWM: the model's mapped weights it "
            "touched and its KV caches; a draft's server holds both models' caches). Dotted: the KV cache its log "
            "says it allocated.")


def memory_figure(data: ReportData) -> Figure:
    traces = []
    for name, points, color in _series(data):
        xs = sorted(points)
        memory = [points[n].memory or ServerMemory() for n in xs]
        traces.append(dict(type="scatter", mode="lines+markers", name=plotly_text(f"{name}: peak RSS"), x=xs,
                           y=[m.peak_rss_mib for m in memory], line=dict(color=color, width=2),
                           hovertemplate="%{x:,} tokens: %{y:,.0f} MiB<extra>" + plotly_text(name) + "</extra>"))
        traces.append(dict(type="scatter", mode="lines", name=plotly_text(f"{name}: KV cache"), x=xs,
                           y=[m.kv_mib for m in memory], line=dict(color=color, width=1, dash="dot"),
                           hovertemplate="%{x:,} tokens: %{y:,.0f} MiB KV<extra>" + plotly_text(name) + "</extra>"))
    return dict(data=traces, layout=base_layout(height=440, xaxis=_axis(_lengths(data)),
                                                 yaxis=dict(title=dict(text="MiB"), rangemode="tozero")))
