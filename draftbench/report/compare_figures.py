"""The comparison report's figures, as plain Plotly dicts built from the report's pieces (layout,
theme, text): each file's speed-up side by side, and heatmaps of the difference between files.

Only rows that are valid speed-ups in their own file (``compare.FileCell.speedup``) are drawn as
one; every other cell says why it has none.
"""

from __future__ import annotations

from typing import Any

from ..common.percent import percent_change, signed_change
from ..results.file import Speedup
from ..results.kinds import Role
from ..share.compare import CellState, ComparedRow, Comparison, FileCell
from . import theme
from .figures import Figure, ci_whiskers, dark_layout
from .layout import heatmap_height
from .text import plotly_text


def speculative_rows(comparison: Comparison) -> list[ComparedRow]:
    """Speculative combinations held by two files or more, with a valid speed-up in at least one."""
    return [r for r in comparison.rows if r.match.role is Role.SPECULATIVE and any(c.speedup for c in r.cells)]


def file_color(index: int) -> str:
    return theme.CLASS_COLORS[index % len(theme.CLASS_COLORS)]


def _speed_text(speed: Speedup | None) -> str:
    if not speed:
        return "no speed-up"
    text = signed_change(speed.ratio)
    return text + (" (n.s.)" if speed.significant is False else "")


def speedup_by_file_figure(comparison: Comparison) -> Figure:
    """Per combination, each file's speed-up over its own baseline; faded bars are not significant."""
    rows = speculative_rows(comparison)
    x = [plotly_text(r.title) for r in rows]
    traces = []
    names = legend_names(comparison)
    for i, f in enumerate(comparison.files):
        speeds = [r.cells[i].speedup for r in rows]
        whiskers = [ci_whiskers(s) for s in speeds]
        trace: dict[str, Any] = dict(
            type="bar", name=plotly_text(names[i]), x=x, y=[percent_change(s.ratio) if s else None for s in speeds],
            text=[_speed_text(s) if s else "" for s in speeds], textposition="inside", insidetextanchor="start",
            customdata=[[plotly_text(f.name), plotly_text(_speed_text(s)),
                         f"{r.cells[i].tps:.1f} tok/s" if r.cells[i].tps else "n/a"] for s, r in zip(speeds, rows)],
            marker=dict(color=file_color(i),
                        opacity=[0.45 if s and s.significant is False else 1.0 for s in speeds]),
            hovertemplate="<b>%{x}</b><br>%{customdata[0]}: speed-up %{customdata[1]}<br>%{customdata[2]}"
                          "<extra></extra>")
        if any(above is not None for above, _ in whiskers):
            trace["error_y"] = dict(type="data", array=[w[0] for w in whiskers],
                                    arrayminus=[w[1] for w in whiskers], visible=True, color=theme.MUTED,
                                    thickness=1.2)
        traces.append(trace)
    layout = dark_layout(barmode="group", height=480, uniformtext=dict(minsize=9, mode="hide"),
                         xaxis=dict(type="category", title=dict(text="combination")),
                         yaxis=dict(title=dict(text="speed-up vs the target alone, in each file (%)"),
                                    ticksuffix="%", zeroline=True, zerolinecolor=theme.TEXT, zerolinewidth=1.5))
    return dict(data=traces, layout=layout)


def legend_names(comparison: Comparison) -> list[str]:
    """Each file's name in a legend: its letter and hardware, or its file name where two files share one
    hardware name (two legends saying the same would tell nothing)."""
    hardware = [f.results.hardware for f in comparison.files]
    return [f"{f.letter}: {f.results.hardware}" if hardware.count(f.results.hardware) == 1
            else f"{f.letter}: {f.name} ({f.results.hardware})" for f in comparison.files]


def _why_no_difference(cell: FileCell, letter: str) -> str:
    if cell.state is CellState.ABSENT:
        return f"not in {letter}"
    if cell.state is not CellState.OK:
        return f"{cell.state.value} in {letter}"
    if cell.row is not None and cell.row.speculation_active is False:
        return f"inactive in {letter}"
    return f"no speed-up in {letter}"


def difference_cell(row: ComparedRow | None, index: int, ref: int,
                    letters: tuple[str, ...]) -> tuple[float | None, str, list[str]]:
    """(difference in percentage points, cell text, hover lines) of file ``index`` minus file ``ref``."""
    if row is None:
        return None, "", []
    a, b = row.cells[ref].speedup, row.cells[index].speedup
    if a and b:
        diff = round((b.ratio - a.ratio) * 100, 2)
        text = f"{diff:+.1f} pp".replace("-", "\u2212")
        return diff, text, [f"{letters[ref]}: {_speed_text(a)}", f"{letters[index]}: {_speed_text(b)}",
                            f"difference {text}"]
    why = ", ".join(_why_no_difference(row.cells[i], letters[i]) for i in (ref, index) if not row.cells[i].speedup)
    return None, why, [why]


def candidate_name(row: ComparedRow) -> str:
    """The row's title without its target: the heatmap's row label."""
    title, target = row.title, row.match.target
    return (title[len(target):].lstrip(" +") if title.startswith(target) else title) or title


def difference_heatmap_figure(comparison: Comparison, index: int, ref: int = 0) -> Figure:
    """Speed-up in file ``index`` minus speed-up in file ``ref``, in percentage points: candidates down,
    targets across. Blue: the pair pays more in ``index``; grey cells have no valid speed-up in one file."""
    letters = comparison.letters
    spec = [r for r in comparison.rows if r.match.role is Role.SPECULATIVE]
    targets = list(dict.fromkeys(r.match.target for r in spec))
    names = list(dict.fromkeys(candidate_name(r) for r in spec))
    by_cell = {(r.match.target, candidate_name(r)): r for r in spec}
    grid = [[difference_cell(by_cell.get((t, name)), index, ref, letters) for t in targets] for name in names]
    z = [[c[0] for c in row] for row in grid]
    grey = [[1 if c[0] is None and c[1] else None for c in row] for row in grid]
    hovers = [["<br>".join(plotly_text(line) for line in c[2]) for c in row] for row in grid]
    max_abs = max([abs(v) for zr in z for v in zr if v is not None] or [1.0])
    x = [plotly_text(t) for t in targets]
    y = [plotly_text(n) for n in names]
    hover = "<b>%{x}</b> + <b>%{y}</b><br>%{customdata}<extra></extra>"
    traces = [
        dict(type="heatmap", name="difference", x=x, y=y, z=z,
             text=[[plotly_text(c[1]) if c[0] is not None else "" for c in row] for row in grid],
             customdata=hovers, texttemplate="%{text}", zmid=0, zmin=-max_abs, zmax=max_abs,
             colorscale=theme.DIVERGING, hoverongaps=False, xgap=2, ygap=2, textfont=dict(size=12),
             hovertemplate=hover,
             colorbar=dict(title=dict(text=f"{letters[index]} − {letters[ref]}", side="right"), ticksuffix=" pp",
                           outlinewidth=0, tickfont=dict(color=theme.TEXT))),
        dict(type="heatmap", name="no difference measured", x=x, y=y, z=grey,
             text=[[plotly_text(c[1]) if c[0] is None else "" for c in row] for row in grid],
             customdata=hovers, texttemplate="%{text}", zmin=0, zmax=1, showscale=False, hoverongaps=False,
             colorscale=[[0, theme.PROBLEM_COLOR], [1, theme.PROBLEM_COLOR]], xgap=2, ygap=2,
             hovertemplate=hover, textfont=dict(size=12, color=theme.PROBLEM_TEXT)),
    ]
    layout = dark_layout(height=heatmap_height([[c[1] for c in row] for row in grid]), margin=dict(l=70, r=30, t=70, b=30),
                         xaxis=dict(type="category", side="top", showgrid=False),
                         yaxis=dict(type="category", autorange="reversed", showgrid=False))
    return dict(data=traces, layout=layout)
