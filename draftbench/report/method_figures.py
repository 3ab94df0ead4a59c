"""Charts for comparing speculative methods: speed-up per prompt category × configuration, and tok/s
against a swept parameter (``draft_max``, ``ngram_mod_n_match``…).

Both draw only rows that count as speed-ups (see :class:`model.CellState`); an empty chart says why
it is empty.
"""

from __future__ import annotations

from typing import Any

from ..analysis.session import category_label
from ..analysis.stats import describe_subset, too_few_to_tell
from ..common.percent import percent, signed_change
from ..results.file import Row
from . import theme
from .layout import base_layout, heatmap_height
from .text import num, plotly_text
from .view import Cell, ReportData

Figure = dict[str, Any]


def _empty(message: str, height: int = 220) -> Figure:
    layout = base_layout(height=height, xaxis=dict(visible=False), yaxis=dict(visible=False),
                         annotations=[dict(text=plotly_text(message), showarrow=False, xref="paper", yref="paper",
                                           x=0.5, y=0.5, font=dict(color=theme.MUTED, size=14))],
                         meta={"empty": message})     # the page says this instead of drawing empty axes
    return dict(data=[], layout=layout)


def _valid_cells(data: ReportData) -> list[Cell]:
    return [data.cell(t, col) for t in data.targets for col in data.columns if data.cell(t, col).shows_speedup]


def _looping_categories(row: Row) -> set[str]:
    prompts = set((row.degenerate_output or {}).get("prompts") or ())
    return {r.category for r in row.requests if r.prompt_id in prompts}


# --------------------------------------------------------------------------- category × configuration

CATEGORY_HOVER = ("<b>%{customdata[0]}</b> on <b>%{x}</b><br>speed-up %{customdata[1]}<br>%{customdata[2]}<br>"
                  "acceptance %{customdata[3]}%{customdata[4]}<extra></extra>")


def _category_cell(row: Row, category: str, loops: set[str]) -> tuple[float | None, str, list[str], str]:
    """(colour value or None, cell text, hover fields, state: "significant", "not significant", "too few", "")."""
    speed = (row.speedup_by_category or {}).get(category)
    if not speed:
        return None, "", ["", "n/a", "", "", ""], ""
    stats = (row.by_category or {}).get(category) or {}
    looping = category in loops
    note = "<br>the target's own output loops here: flattered" if looping else ""
    hover = ["", "", num(stats.get("mean_tps"), ".1f", " tok/s"), percent(stats.get("acceptance_rate")), note]
    if too_few_to_tell(speed):
        hover[1] = plotly_text(describe_subset(speed))
        return None, "too few" + ("<br>loops" if looping else ""), hover, "too few"
    text = signed_change(speed.ratio)
    state = "not significant" if speed.significant is False else "significant"
    if speed.significant is False:
        text += " n.s."
    if looping:
        text += "<br>loops"
    hover[1] = signed_change(speed.ratio) + (
        f" [{signed_change(speed.ci95_low)}, "
        f"{signed_change(speed.ci95_high) if speed.ci95_high is not None else 'unbounded'}]"
        if speed.has_interval and speed.ci95_low is not None else "") + (
        " (not significant: shown grey)" if speed.significant is False else "")
    return theme.speedup_colour(speed.ratio), text, hover, state


def category_heatmap_figure(data: ReportData) -> Figure:
    """Configurations down, prompt categories across; each cell the speed-up on that category's requests,
    coloured on a fixed diverging scale centred on 1.0×; cells that are not significant, or rest on too
    few requests, are grey and say so."""
    cells = [c for c in _valid_cells(data) if c.measured.speedup_by_category]
    if not cells:
        return _empty("No per-category speed-ups in this results file (they need per-request data).")
    categories = list(dict.fromkeys(cat for c in cells for cat in (c.measured.speedup_by_category or {})))
    several = len(data.targets) > 1
    y: list[str] = []
    z: list[list[float | None]] = []
    grey: list[list[float | None]] = []
    text: list[list[str]] = []
    custom: list[list[list[str]]] = []
    for cell in cells:
        name = (f"{cell.target} · " if several else "") + cell.col.label
        loops = _looping_categories(cell.measured)
        row_z, row_grey, row_text, row_custom = [], [], [], []
        for category in categories:
            value, label, hover, state = _category_cell(cell.measured, category, loops)
            hover[0] = plotly_text(name)
            row_z.append(value if state == "significant" else None)
            row_grey.append(0.0 if state in ("not significant", "too few") else None)
            row_text.append(label)
            row_custom.append(hover)
        y.append(plotly_text(name))
        z.append(row_z)
        grey.append(row_grey)
        text.append(row_text)
        custom.append(row_custom)
    x = [plotly_text(category_label(c)) for c in categories]
    shared = dict(x=x, y=y, customdata=custom, texttemplate="%{text}", hoverongaps=False, xgap=2, ygap=2,
                  hovertemplate=CATEGORY_HOVER, textfont=dict(size=12))

    def only(grid: list[list[float | None]]) -> list[list[str]]:      # each cell's text in the trace that draws it
        return [[t if v is not None else "" for t, v in zip(tr, zr)] for tr, zr in zip(text, grid)]
    colour = dict(type="heatmap", name="speed-up by category", z=z, text=only(z), **theme.speedup_scale(), **shared)
    neutral = dict(type="heatmap", name="not significant or too few requests", z=grey, text=only(grey), zmin=-1, zmax=1,
                   colorscale=[[0, theme.NEUTRAL_COLOR], [1, theme.NEUTRAL_COLOR]], showscale=False, **shared)
    layout = base_layout(height=heatmap_height(text, floor=300), margin=dict(l=70, r=30, t=70, b=30),
                         xaxis=dict(type="category", side="top", showgrid=False),
                         yaxis=dict(type="category", autorange="reversed", showgrid=False))
    return dict(data=[colour, neutral], layout=layout)


# --------------------------------------------------------------------------- tok/s vs a swept parameter

def _params(row: Row) -> dict[str, Any]:
    cand = row.candidate if isinstance(row.candidate, dict) else {}
    params = dict(cand.get("params") or {}) if isinstance(cand.get("params"), dict) else {}
    if "draft_max" not in params and row.draft_max is not None:
        params["draft_max"] = row.draft_max
    return params


def param_name(name: str, methods: list) -> str:
    """``draft_max`` → ``k``; ``ngram_mod_n_match`` → ``n_match`` for an ngram-mod configuration."""
    if name in ("draft_max", "draft_n_max", "num_speculative_tokens"):
        return "k"
    for method in methods:
        prefix = str(method).replace("-", "_") + "_"
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def swept_lines(data: ReportData) -> list[dict[str, Any]]:
    """One line per (target, configuration, swept parameter): its rows ordered by the parameter's value.
    A configuration is a candidate's configured label (a draft file, for rows without a candidate)."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for cell in _valid_cells(data):
        row = cell.measured
        if row.mean_tps is None:
            continue
        cand = row.candidate if isinstance(row.candidate, dict) else {}
        groups.setdefault((row.target, str(cand.get("label") or row.draft)), []).append(row)
    lines = []
    for (target, base), rows in groups.items():
        if len(rows) < 2:
            continue
        params = [_params(r) for r in rows]
        names = sorted({n for p in params for n in p})
        varying = [n for n in names if len({repr(p.get(n)) for p in params}) > 1]
        for name in varying:
            others = [n for n in varying if n != name]
            series: dict[tuple, list[tuple[Any, Row]]] = {}
            for row, p in zip(rows, params):
                if _number(p.get(name)):
                    series.setdefault(tuple((n, p.get(n)) for n in others), []).append((p[name], row))
            methods = (rows[0].candidate or {}).get("method") or [] if isinstance(rows[0].candidate, dict) else []
            for fixed, points in series.items():
                if len(points) < 2:
                    continue
                points.sort(key=lambda vr: vr[0])
                suffix = "".join(f", {param_name(n, methods)}={v}" for n, v in fixed)
                lines.append({"target": target, "config": base, "param": param_name(name, methods),
                              "label": f"{base}{suffix}", "points": points})
    return lines


def param_lines_figure(data: ReportData) -> Figure:
    """Decode tok/s against each swept parameter, one line per configuration; the target alone dashed."""
    lines = swept_lines(data)
    if not lines:
        return _empty("No parameter was swept (a list in a candidate's params, or several settings.draft_max).")
    several = len({ln["target"] for ln in lines}) > 1
    traces: list[dict[str, Any]] = []
    for i, ln in enumerate(lines):
        xs = [v for v, _ in ln["points"]]
        name = (f"{ln['target']} · " if several else "") + f"{ln['label']} (by {ln['param']})"
        traces.append(dict(type="scatter", mode="lines+markers", name=plotly_text(name), x=xs,
                           y=[r.mean_tps for _, r in ln["points"]],
                           customdata=[[plotly_text(r.draft), percent(r.acceptance_rate)] for _, r in ln["points"]],
                           line=dict(color=theme.CLASS_COLORS[i % len(theme.CLASS_COLORS)]),
                           hovertemplate=f"<b>%{{customdata[0]}}</b><br>{plotly_text(ln['param'])} = %{{x}}<br>"
                                         "%{y:.1f} tok/s<br>acceptance %{customdata[1]}<extra></extra>"))
    for target in dict.fromkeys(ln["target"] for ln in lines):
        baseline = data.results.baseline_for(target)
        xs = [v for ln in lines if ln["target"] == target for v, _ in ln["points"]]
        if baseline and baseline.mean_tps and xs:
            traces.append(dict(type="scatter", mode="lines", name=plotly_text(f"{target} alone"),
                               x=[min(xs), max(xs)], y=[baseline.mean_tps, baseline.mean_tps],
                               line=dict(color=theme.BASELINE_COLOR, dash="dash"),
                               hovertemplate=f"<b>{plotly_text(target)}</b> alone<br>%{{y:.1f}} tok/s<extra></extra>"))
    layout = base_layout(height=440, xaxis=dict(title=dict(text="parameter value (see each line's name)")),
                         yaxis=dict(title=dict(text="decode tok/s (mean per request)"), rangemode="tozero"))
    return dict(data=traces, layout=layout)
