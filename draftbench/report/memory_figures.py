"""Speed-up against the memory a candidate adds: one point per candidate and target, the Pareto front marked.

Read from each target's verdict's ``memory`` (``analysis.memory_cost``: each candidate's server against the target
alone's, device by device as their logs named them, else in peak resident memory) and each row's speed-up. A
candidate over ``settings.memory_limit_gib`` is drawn as a cross: measured, never recommended.
"""

from __future__ import annotations

from typing import Any

from ..analysis.categories import candidate_name
from ..analysis.memory_cost import MemoryCost, pareto_front
from ..analysis.summary import verdicts_of
from ..results.memory import mib_text
from ..results.speedup import Speedup
from . import theme
from .layout import base_layout
from .text import plotly_text
from .view import ReportData

Figure = dict[str, Any]


def _points(data: ReportData) -> list[tuple[str, dict[str, tuple[MemoryCost, Speedup]]]]:
    """(target, {candidate: (its cost, its speed-up)}) for the candidates with both, per target."""
    out = []
    for verdict in verdicts_of(data.results):
        if verdict.memory is None:
            continue
        speeds = {candidate_name(r): r.speedup for r in data.results.rows_of(verdict.target)
                  if r.concurrency == data.level and r.counts_as_speedup() and r.speedup is not None}
        found = {name: (cost, speeds[name]) for name, cost in verdict.memory.costs.items()
                 if cost.extra_mib is not None and name in speeds}
        if found:
            out.append((verdict.target, found))
    return out


def lead(data: ReportData) -> str:
    limit = next((v.memory.limit_gib for v in verdicts_of(data.results) if v.memory and v.memory.limit_gib), None)
    return ("Each candidate's decode speed-up over the target alone against the memory its server adds to the target "
            "alone's: every device the servers' logs named, summed (hover for each device), else their peak resident "
            "memory. Whiskers: each candidate's own 95% interval, for it alone; hollow markers are not significant. The line joins the Pareto "
            "front: no other candidate is both faster and smaller."
            + (" A cross is over settings.memory_limit_gib (" + ", ".join(f"{d} {g:g} GiB" for d, g in limit.items())
               + "): measured, never recommended." if limit else ""))


def _hover(name: str, cost: MemoryCost, speed: Speedup) -> str:
    held = ", ".join(f"{d} {mib_text(mib)}" for d, mib in cost.held.items())
    return (f"{name}: {(speed.ratio - 1) * 100:+.1f}%, {cost.text()}" + (f" (its server: {held})" if held else "")
            + ("; " + "; ".join(o.text() for o in cost.over) if cost.over else ""))


def figure(data: ReportData) -> Figure:
    traces = []
    several = len(verdicts_of(data.results)) > 1
    for i, (target, found) in enumerate(_points(data)):
        color = theme.CLASS_COLORS[i % len(theme.CLASS_COLORS)]
        names = list(found)
        costs, speeds = [found[n][0] for n in names], [found[n][1] for n in names]
        prefix = f"{target}: " if several else ""
        traces.append(dict(
            type="scatter", mode="markers+text", name=plotly_text(f"{target}" if several else "candidates"),
            x=[c.extra_mib for c in costs], y=[(s.ratio - 1) * 100 for s in speeds],
            text=[plotly_text(n) for n in names], textposition="top center",
            marker=dict(size=12, color=[color if s.significant else theme.CARD for s in speeds],
                        symbol=["x" if c.over else "circle" for c in costs], line=dict(color=color, width=2)),
            error_y=dict(type="data", symmetric=False, color=color,
                         array=[((s.ci95_high or s.ratio) - s.ratio) * 100 for s in speeds],
                         arrayminus=[(s.ratio - (s.ci95_low or s.ratio)) * 100 for s in speeds]),
            hovertext=[plotly_text(prefix + _hover(n, c, s)) for n, c, s in zip(names, costs, speeds)],
            hoverinfo="text"))
        front = pareto_front({n: (found[n][0].extra_mib or 0.0, found[n][1].ratio) for n in names
                              if not found[n][0].over})
        traces.append(dict(type="scatter", mode="lines", name=plotly_text(f"{prefix}Pareto front"),
                           x=[found[n][0].extra_mib for n in front], y=[(found[n][1].ratio - 1) * 100 for n in front],
                           line=dict(color=color, width=1.5, dash="dash"), hoverinfo="skip"))
    return dict(data=traces, layout=base_layout(
        height=440, meta=dict(empty="no candidate has both a speed-up and what its server held beside the target "
                                    "alone's (files from before draftbench recorded memory, or a backend that reports "
                                    "none, say so in each row's memory)"), xaxis=dict(title=dict(text="memory added over the target alone (MiB)"), zeroline=True,
                               zerolinecolor=theme.GRID),
        yaxis=dict(title=dict(text="decode speed-up vs the target alone (%)"), ticksuffix="%", zeroline=True,
                   zerolinecolor=theme.TEXT, zerolinewidth=1.5)))
