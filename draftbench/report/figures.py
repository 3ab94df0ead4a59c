"""The report's charts as plain Plotly figure dicts, and the registry the page draws them from.

A new chart: ``def x_figure(data: ReportData) -> Figure`` and a :class:`Chart` in :data:`CHARTS` (the page follows).

Every label that comes from a results file goes through :func:`text.plotly_text`; cells and
rows that are not valid speed-ups (see :class:`model.CellState`) are never drawn as one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..analysis.comparison import describe_with_bound
from ..analysis.stats import describe_speedup
from ..analysis.verdict import analyze
from ..common.percent import percent, percent_change, signed_change
from ..results.file import ResultsFile, Speedup
from . import context_figures, inside, load_figures, memory_figures, temperature_figures, theme
from .layout import base_layout as _layout
from .layout import heatmap_height
from .method_figures import category_heatmap_figure, param_lines_figure
from .text import num, plotly_text
from .view import (
    NO_DRAFT_MODEL,
    UNKNOWN_SIZE,
    Cell,
    CellState,
    DraftCol,
    ReportData,
    bar_classes,
    best_per_class,
    build_data,
)

Figure = dict[str, Any]


# --------------------------------------------------------------------------- shared pieces

def dark_layout(**extra: Any) -> dict[str, Any]:
    """The report's common layout, for other pages built from these pieces (the comparison report)."""
    return _layout(**extra)


def ci_whiskers(speed: Speedup | None) -> tuple[float | None, float | None]:
    """(above, below) a speed-up in percentage points: its 95% CI, when known."""
    return _whiskers(speed)


def _class_color(data: ReportData, cls: str) -> str:
    if cls == UNKNOWN_SIZE:
        return theme.UNKNOWN_COLOR
    known = [c for c in data.classes if c != UNKNOWN_SIZE]
    return theme.CLASS_COLORS[known.index(cls) % len(theme.CLASS_COLORS)]


def _series_name(data: ReportData, cls: str) -> str:
    """A size class's bar series. A hybrid is classed by its draft's size: where the class holds one, the
    name says the best may be a hybrid (a bar called "best 135M draft" that is the hybrid misleads)."""
    if cls == NO_DRAFT_MODEL:
        return "best model-free method"
    hybrid = any(c.size == cls and is_hybrid(data, c) for c in data.columns)
    return f"best with a {plotly_text(cls)} draft (alone or hybrid)" if hybrid else f"best {plotly_text(cls)} draft"


def is_hybrid(data: ReportData, col: DraftCol) -> bool:
    """Does this column pair a draft model with a model-free method?"""
    row = next((c.row for t in data.targets if (c := data.cell(t, col)).row is not None), None)
    methods = [str(m) for m in ((row.candidate or {}).get("method") or [])] if row is not None else []
    return bool(row is not None and row.draft_path and any(not m.startswith("draft") for m in methods))


def _whiskers(speed: Speedup | None) -> tuple[float | None, float | None]:
    """(above, below) the speed-up in percentage points: its 95% CI, when known."""
    if speed is None or speed.ci95_low is None or speed.ci95_high is None:
        return None, None
    return (round((speed.ci95_high - speed.ratio) * 100, 2),
            round((speed.ratio - speed.ci95_low) * 100, 2))


def _speedup_text(speed: Speedup | None) -> str:
    return plotly_text(describe_speedup(speed)) if speed else "n/a"


def _bar_hover(cell: Cell | None) -> list[str]:
    if cell is None:
        return ["", "", "", "", ""]
    row = cell.measured
    return [plotly_text(cell.col.label), num(row.mean_tps, ".1f", " tok/s"), plotly_text(describe_with_bound(row)),
            percent(row.acceptance_rate), plotly_text(cell.col.size)]


def _targets_axis(data: ReportData) -> list[str]:
    return [plotly_text(t) for t in data.targets]


def _best_cells(data: ReportData) -> dict[str, list[Cell | None]]:
    """Per size class with a valid measurement: its best cell for each target (None: none valid)."""
    best = {t: best_per_class(data, t) for t in data.targets}
    return {cls: [best[t].get(cls) for t in data.targets] for cls in bar_classes(data)}


# --------------------------------------------------------------------------- bar charts

def throughput_figure(data: ReportData) -> Figure:
    """Baseline and the best draft of each size class, per target, in tok/s."""
    x = _targets_axis(data)
    baselines = [data.results.baseline_for(t, data.level) for t in data.targets]
    series = _best_cells(data)
    values = [b.mean_tps for b in baselines if b and b.mean_tps] + [
        c.measured.mean_tps for cells in series.values() for c in cells if c and c.measured.mean_tps]
    value_fmt = "%{y:.0f}" if values and max(values) >= 20 else "%{y:.1f}"  # short labels do not collide
    traces = [dict(type="bar", name="Target alone (mean over all its sessions)", x=x, offsetgroup="baseline",
                   y=[b.mean_tps if b else None for b in baselines], marker=dict(color=theme.BASELINE_COLOR),
                   texttemplate=value_fmt, textposition="outside", cliponaxis=False,
                   hovertemplate="<b>%{x}</b> alone, every session<br>%{y:.1f} tok/s<extra></extra>")]
    outlined = False
    for cls, cells in series.items():
        traces.append(dict(type="bar", name=_series_name(data, cls), x=x, offsetgroup=cls,
                           y=[c.measured.mean_tps if c else None for c in cells],
                           customdata=[_bar_hover(c) for c in cells],
                           marker=dict(color=_class_color(data, cls)), texttemplate=value_fmt,
                           textposition="outside", cliponaxis=False,
                           hovertemplate="<b>%{x}</b> + %{customdata[0]}<br>%{customdata[1]}<br>"
                                         "speed-up %{customdata[2]}<br>acceptance %{customdata[3]}<extra></extra>"))
        paired = [paired_baseline_tps(c) for c in cells]
        pooled = [b.mean_tps if b else None for b in baselines]
        if any(v is not None and p and abs(v / p - 1) > OUTLINE_FROM for v, p in zip(paired, pooled)):
            # the target alone as the speed-up compares it: drawn over the draft's own bar, so the two bars of a
            # draft say what the speed-up chart says (the pooled baseline may hold sessions at another load)
            traces.append(dict(type="bar", name=PAIRED_NAME, x=x, y=paired, offsetgroup=cls, legendgroup="paired",
                               legendrank=2000,
                               showlegend=not outlined, customdata=[_bar_hover(c) for c in cells],
                               marker=dict(color="rgba(0,0,0,0)", line=dict(color=theme.TEXT, width=1.5)),
                               hovertemplate="<b>%{x}</b> alone, beside %{customdata[0]}<br>%{y:.2f} tok/s "
                                             "(its tok/s ÷ its speed-up)<extra></extra>"))
            outlined = True
    layout = _layout(barmode="group", height=460, uniformtext=dict(minsize=9, mode="hide"),
                     xaxis=dict(type="category", title=dict(text="target")),
                     yaxis=dict(title=dict(text="decode tok/s (mean per request)"), rangemode="tozero"))
    return dict(data=traces, layout=layout)


PAIRED_NAME = "outline: the target alone beside that draft"
OUTLINE_FROM = 0.02      # drawn where the paired baseline and the pooled one differ by more (else they agree)


def paired_baseline_tps(cell: Cell | None) -> float | None:
    """The target alone as a draft's speed-up compares it — in the sessions measured beside it, paired by
    prompt — as tok/s: the draft's tok/s over its speed-up."""
    if cell is None or not cell.shows_speedup or not cell.measured.mean_tps or not cell.speedup.ratio:
        return None
    return round(cell.measured.mean_tps / cell.speedup.ratio, 4)


def speedup_figure(data: ReportData) -> Figure:
    """The best draft of each size class as % over the baseline; faded when not significant."""
    x = _targets_axis(data)
    traces = []
    for cls, cells in _best_cells(data).items():
        speeds = [c.speedup if c else None for c in cells]
        whiskers = [_whiskers(s) for s in speeds]
        # The label sits inside the bar at its base: above it, it would sit on the whisker.
        trace = dict(type="bar", name=_series_name(data, cls), x=x,
                     y=[percent_change(s.ratio) if s else None for s in speeds],
                     customdata=[_bar_hover(c) for c in cells],
                     marker=dict(color=_class_color(data, cls),
                                 opacity=[0.45 if s and s.significant is False else 1.0 for s in speeds]),
                     texttemplate="%{y:+.0f}%", textposition="inside", insidetextanchor="start",
                     textfont=dict(color=theme.BG), cliponaxis=False,
                     hovertemplate="<b>%{x}</b> + %{customdata[0]}<br>speed-up %{customdata[2]}<br>"
                                   "%{customdata[1]}, acceptance %{customdata[3]}<extra></extra>")
        if any(above is not None for above, _ in whiskers):
            trace["error_y"] = dict(type="data", array=[w[0] for w in whiskers], arrayminus=[w[1] for w in whiskers],
                                    visible=True, color=theme.MUTED, thickness=1.2)
        traces.append(trace)
    layout = _layout(barmode="group", height=460, uniformtext=dict(minsize=9, mode="hide"),
                     xaxis=dict(type="category", title=dict(text="target")),
                     yaxis=dict(title=dict(text="speed-up vs the target alone (%)"), ticksuffix="%",
                                zeroline=True, zerolinecolor=theme.TEXT, zerolinewidth=1.5))
    return dict(data=traces, layout=layout)


# --------------------------------------------------------------------------- heatmap

class _HeatCell(NamedTuple):
    """One cell, drawn by exactly one of the three heatmap traces (the others get a gap)."""

    z: float | None              # significant speed-ups only: the fixed scale's value (theme.speedup_colour)
    text: str
    problem_z: int | None        # 0: not run, 1: failed/skipped/inactive/…; None for valid cells
    problem_text: str
    hover: list[str]
    neutral_z: float | None = None   # a speed-up that is not significant: drawn neutral grey, said "n.s."


def _cell_text(cell: Cell) -> str:
    if not cell.shows_speedup:
        return cell.state.value
    speed = cell.speedup
    text = signed_change(speed.ratio)
    if (cell.measured.counter_bound or {}).get("speed_changed"):
        text += " (above its counters: speed changed)"
    elif speed.significant is False:
        text += " (n.s.)"
    text += f"<br>acc {percent(cell.measured.acceptance_rate)}"
    return text + ("<br>loops" if cell.measured.degenerate_output else "")


def _cell_hover(cell: Cell) -> list[str]:
    head = [plotly_text(cell.target), plotly_text(cell.col.label), plotly_text(cell.col.size)]
    if not cell.shows_speedup:
        return head + [plotly_text(cell.state.value), plotly_text(cell.note), "", "", ""]
    r = cell.measured
    ttft = r.mean_ttft if r.mean_ttft is not None else (r.ttft_s or {}).get("mean")
    return head + [plotly_text(describe_with_bound(r)), num(r.mean_tps, ".1f", " tok/s"), percent(r.acceptance_rate, 1),
                   num(ttft * 1000 if ttft is not None else None, ".0f", " ms"), ""]


def _heat_cell(cell: Cell) -> _HeatCell:
    if cell.shows_speedup and cell.speedup.significant is False:
        return _HeatCell(None, _cell_text(cell), None, "", _cell_hover(cell), 0.0)
    if cell.shows_speedup:
        return _HeatCell(theme.speedup_colour(cell.speedup.ratio), _cell_text(cell), None, "", _cell_hover(cell))
    problem_z = 0 if cell.state is CellState.NOT_RUN else 1
    return _HeatCell(None, "", problem_z, _cell_text(cell), _cell_hover(cell))


HEAT_HOVER_OK = ("<b>%{customdata[0]}</b> + <b>%{customdata[1]}</b> (%{customdata[2]})<br>"
                 "speed-up %{customdata[3]}<br>%{customdata[4]}<br>acceptance %{customdata[5]}<br>"
                 "TTFT %{customdata[6]}<extra></extra>")
HEAT_HOVER_PROBLEM = ("<b>%{customdata[0]}</b> + <b>%{customdata[1]}</b><br><b>%{customdata[3]}</b>: "
                      "%{customdata[4]}<extra></extra>")


def heatmap_figure(data: ReportData) -> Figure:
    """Drafts down, targets across. Trace 0: significant speed-ups on a fixed diverging scale centred on 1.0×;
    trace 1: every cell without a valid speed-up, in grey; trace 2: speed-ups that are not significant, in a
    neutral grey (a non-significant −13% is no red)."""
    x = _targets_axis(data)
    y = [plotly_text(c.label) for c in data.columns]
    grid = [[_heat_cell(data.cell(t, col)) for t in data.targets] for col in data.columns]
    z = [[c.z for c in row] for row in grid]
    custom = [[c.hover for c in row] for row in grid]
    text = [[c.text if c.z is not None else "" for c in row] for row in grid]
    neutral_text = [[c.text if c.neutral_z is not None else "" for c in row] for row in grid]
    traces = [
        dict(type="heatmap", name="speed-up", x=x, y=y, z=z, text=text, customdata=custom, texttemplate="%{text}",
             hoverongaps=False, xgap=2, ygap=2, hovertemplate=HEAT_HOVER_OK, textfont=dict(size=12),
             **theme.speedup_scale()),
        dict(type="heatmap", name="no speed-up measured", x=x, y=y, z=[[c.problem_z for c in row] for row in grid],
             text=[[c.problem_text for c in row] for row in grid], customdata=custom, texttemplate="%{text}",
             zmin=0, zmax=1, colorscale=[[0, theme.MISSING_COLOR], [1, theme.PROBLEM_COLOR]],
             showscale=False, hoverongaps=False, xgap=2, ygap=2, hovertemplate=HEAT_HOVER_PROBLEM,
             textfont=dict(size=12, color=theme.PROBLEM_TEXT)),
        dict(type="heatmap", name="not significant", x=x, y=y, z=[[c.neutral_z for c in row] for row in grid],
             text=neutral_text, customdata=custom, texttemplate="%{text}", zmin=-1, zmax=1,
             colorscale=[[0, theme.NEUTRAL_COLOR], [1, theme.NEUTRAL_COLOR]], showscale=False, hoverongaps=False,
             xgap=2, ygap=2, hovertemplate=HEAT_HOVER_OK, textfont=dict(size=12)),
    ]
    layout = _layout(height=heatmap_height([[c.text or c.problem_text for c in row] for row in grid]),
                     margin=dict(l=70, r=30, t=70, b=30),
                     xaxis=dict(type="category", side="top", showgrid=False),
                     yaxis=dict(type="category", autorange="reversed", showgrid=False))
    return dict(data=traces, layout=layout)



# --------------------------------------------------------------------------- scatter

SYMBOLS = ("circle", "diamond", "square", "triangle-up", "x", "star", "cross", "hexagon")


def _scatter_trace(data: ReportData, cls: str) -> dict[str, Any] | None:
    """A size class's valid pairs with a known acceptance (every target; a marker shape per target), each
    point labelled with its draft; None when it has none."""
    points = [(c, rate) for target in data.targets for col in data.columns if col.size == cls
              and (c := data.cell(target, col)).shows_speedup and (rate := c.measured.acceptance_rate) is not None]
    if not points:
        return None
    cells = [c for c, _ in points]
    whiskers = [_whiskers(c.speedup) for c in cells]
    several = len(data.targets) > 1
    name = "model-free methods" if cls == NO_DRAFT_MODEL else f"{plotly_text(cls)} drafts"
    trace = dict(type="scatter", mode="markers+text", name=name,
                 x=[round(rate * 100, 2) for _, rate in points],
                 y=[percent_change(c.speedup.ratio) for c in cells],
                 # every point says which configuration it is (and, with several targets, of which target)
                 text=[plotly_text((f"{c.target}: " if several else "") + c.col.label) for c in cells],
                 # labels point inwards, so none runs off the right edge
                 textposition=["middle left" if rate > 0.6 else "middle right" for _, rate in points],
                 textfont=dict(size=11, color=theme.MUTED),
                 customdata=[[plotly_text(c.col.label), plotly_text(c.col.size), _speedup_text(c.speedup),
                              num(c.measured.mean_tps, ".1f", " tok/s"), plotly_text(c.target)] for c in cells],
                 marker=dict(size=11, opacity=0.9, color=_class_color(data, cls), line=dict(width=1, color=theme.BG),
                             symbol=[SYMBOLS[data.targets.index(c.target) % len(SYMBOLS)] for c in cells]),
                 hovertemplate="<b>%{customdata[4]}</b> + %{customdata[0]} (%{customdata[1]})<br>"
                               "acceptance %{x:.1f}%<br>speed-up %{customdata[2]}<br>%{customdata[3]}"
                               "<extra></extra>")
    if any(above is not None for above, _ in whiskers):
        trace["error_y"] = dict(type="data", array=[w[0] for w in whiskers], arrayminus=[w[1] for w in whiskers],
                                visible=True, thickness=1, width=0, color=_class_color(data, cls))
    return trace


def scatter_figure(data: ReportData) -> Figure:
    """Acceptance vs speed-up, one labelled point per measured pair, coloured by size class (as the bars)."""
    traces = [t for t in (_scatter_trace(data, cls) for cls in data.classes) if t is not None]
    layout = _layout(height=480, margin=dict(l=70, r=30, t=20, b=60),
                     legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0,
                                 title=dict(text="size class"), bgcolor="rgba(0,0,0,0)"),
                     # the whole 0-100% range: a file whose drafts all accept ~100% must not draw 99%-101%
                     xaxis=dict(title=dict(text="acceptance rate (accepted / drafted tokens)"), ticksuffix="%",
                                range=[-3, 105], dtick=10),
                     yaxis=dict(title=dict(text="speed-up vs the target alone (%)"), ticksuffix="%",
                                zeroline=True, zerolinecolor=theme.TEXT, zerolinewidth=1.5))
    return dict(data=traces, layout=layout)


# --------------------------------------------------------------------------- registry

def always(data: ReportData) -> bool:
    return True


@dataclass(frozen=True)
class Chart:
    """A chart on the page: its div id, heading, the sentence under the heading, its figure, and whether a
    file has anything for it (the concurrency charts need several levels)."""

    chart_id: str
    title: str
    lead: Callable[[ReportData], str]
    build: Callable[[ReportData], Figure]
    shown: Callable[[ReportData], bool] = always


def _heatmap_lead(data: ReportData) -> str:
    return (f"{_count(len(data.targets), 'target')} × {_count(len(data.columns), 'draft')} "
            f"({_count(data.n_run, 'measured combination')}). "
            "Cell: speed-up and acceptance. One fixed scale centred on 1.0×: red is slower than the target "
            "alone, blue faster (full colour at half and at twice its speed); neutral grey cells (n.s.) are not "
            "significantly different from it; dark grey cells have no valid speed-up.")


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


# In page order.
CHARTS: tuple[Chart, ...] = (
    Chart("chart-throughput", "Throughput",
          lambda data: "Decode tok/s of each target alone (the mean over all its server sessions) and with the "
                       "fastest draft of each size class. The outline over a draft's bar is the target alone in the "
                       "sessions measured beside that draft — what its speed-up is measured against — so a draft's "
                       "bar against its outline is the speed-up chart below; the pooled bar may differ where the "
                       "machine's speed changed between sessions.",
          throughput_figure),
    Chart("chart-speedup", "Speed-up over the target alone",
          lambda data: "Best draft of each size class. Whiskers: each draft's own 95% interval, for that draft alone "
                       "(its row's figure); faded bars are not significant. A recommended draft's interval in the verdict "
                       "is wider: corrected for choosing among the candidates and for the looks (95% over them together).",
          speedup_figure),
    Chart("chart-heatmap", "Every target × every draft", _heatmap_lead, heatmap_figure),
    Chart("chart-scatter", "Acceptance vs speed-up",
          lambda data: "One labelled point per target + draft pair, coloured by the draft's size class as in the bars"
                       + (" (marker shape: the target)" if len(data.targets) > 1 else "")
                       + ". Points below 0% are slowdowns despite the acceptance.",
          scatter_figure),
    Chart("chart-memory", "Speed-up against the memory it adds", memory_figures.lead, memory_figures.figure),
    Chart("chart-positions", "Acceptance by draft position", inside.positions_lead, inside.positions_figure),
    Chart("chart-ceiling", "Each draft against its ceiling", inside.ceiling_lead, inside.ceiling_figure),
    Chart("chart-kpredict", "Best k from one run", inside.kpredict_lead, inside.kpredict_figure),
    Chart("chart-categories", "Speed-up by prompt category",
          lambda data: "Each configuration's speed-up on each prompt category's requests alone: methods differ "
                       "by workload (n-gram methods shine where the answer repeats the prompt). \"loops\": the "
                       "target's own output repeats itself there, which flatters every method. The colour scale is fixed and "
                       "centred on 1.0×; grey cells are not significant (n.s.) or rest on too few requests to tell.",
          category_heatmap_figure),
    Chart("chart-params", "Throughput vs a swept parameter",
          lambda data: "Decode tok/s of each configuration at each value of a parameter swept as a list; the "
                       "dashed line is the target alone.",
          param_lines_figure),
    Chart("chart-concurrency-speedup", "Speed-up vs concurrent streams", load_figures.speedup_lead,
          load_figures.speedup_vs_streams_figure, load_figures.has_levels),
    Chart("chart-concurrency-throughput", "Aggregate throughput vs concurrent streams", load_figures.throughput_lead,
          load_figures.throughput_vs_streams_figure, load_figures.has_levels),
    Chart("chart-concurrency-latency", "Latency percentiles vs concurrent streams", load_figures.latency_lead,
          load_figures.latency_vs_streams_figure, load_figures.has_levels),
    Chart("chart-context-speedup", "Speed-up vs prompt length", context_figures.speedup_lead,
          context_figures.speedup_figure, context_figures.has_lengths),
    Chart("chart-context-ttft", "Time to first token vs prompt length", context_figures.ttft_lead,
          context_figures.ttft_figure, context_figures.has_lengths),
    Chart("chart-context-memory", "Memory per server vs prompt length", context_figures.memory_lead,
          context_figures.memory_figure, context_figures.has_lengths),
    Chart("chart-temperature", "Speed-up and acceptance vs temperature", temperature_figures.lead,
          temperature_figures.figure, temperature_figures.has_temperatures),
)
CHART_IDS = tuple(chart.chart_id for chart in CHARTS)


def has_data(fig: Figure) -> bool:
    """Does the figure draw anything (a point, a bar, a cell)? A chart without is never drawn: its section
    says why instead (an empty "each draft against its ceiling" axis told nothing)."""
    def values(v: Any) -> bool:
        return any(values(x) for x in v) if isinstance(v, (list, tuple)) else v is not None
    return any(values(trace.get(key) or []) for trace in fig.get("data") or [] for key in ("y", "z"))


def figures_for(data: ReportData) -> dict[str, Figure]:
    """Every chart's figure that this file has data for, by div id (charts that would be empty left out)."""
    built = {chart.chart_id: chart.build(data) for chart in CHARTS if chart.shown(data)}
    return {chart_id: fig for chart_id, fig in built.items() if has_data(fig)}


def build_figures(results: ResultsFile) -> dict[str, Figure]:
    """Figure dicts by div id (for the page, and for tests to compare with what the browser drew)."""
    return figures_for(build_data(analyze(results)))
