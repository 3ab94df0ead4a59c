"""The HTML report: a pure function of a results file.

One self-contained page (plotly.js embedded once, so it renders with no network; ``cdn=True``
links the CDN copy instead) with:

- a header (hardware, backend, model family, server version, date) and the verdict table, whose
  sentences are exactly the ones the CLI prints (``analysis.recommend``);
- ``chart-throughput``: baseline and the best draft of each size class, per target (tok/s);
- ``chart-speedup``: the same drafts as speed-up over the baseline (%, with 95% CIs when known);
- ``chart-heatmap``: every target x every draft (k-variants included) on a diverging colour scale
  centred on 0, so slowdowns are visibly negative; failed, skipped, non-speculating and missing
  combinations are grey cells that say so and never carry a speed-up;
- ``chart-scatter``: acceptance vs speed-up, one point per measured pair;
- problems (errors, skips, inactive speculation, warnings) and, when the data allows, the theory.

Every string that comes from a config or a results file is escaped: ``html.escape`` in the page,
and entity-escaped for Plotly (which renders a subset of HTML in labels, ticks, legends and
hovers). Plotly's JSON encoder already writes ``<``, ``>`` and ``/`` as ``\\u003c`` etc., so no
label can close the ``<script>`` that carries a figure.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from . import __version__
from .analysis import analyze
from .findings import Code
from .paths import atomic_write_text
from .results import ResultsFile, Row, combination_title
from .stats import describe_speedup

CHART_IDS = ("chart-throughput", "chart-speedup", "chart-heatmap", "chart-scatter")
UNKNOWN_SIZE = "unknown size"

# A parameter count in a label: "0.5B", "1.5b", "135M", "Qwen2.5-0.5B-Instruct", "llama3-8b".
# Not "8bit", "Q4_K_M", "FP16" or the "2.5" of "Qwen2.5".
SIZE_RE = re.compile(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?)\s?([BbMm])(?![A-Za-z0-9])")

# Dark theme
BG, CARD, GRID, TEXT, MUTED = "#0f1117", "#171a23", "#2a2f3a", "#e6e6e6", "#9aa0a6"
BASELINE_COLOR = "#8d99ae"
CLASS_COLORS = ("#4cc9f0", "#f72585", "#7bd389", "#ffb703", "#b388eb", "#ff7f50", "#2ec4b6", "#e9c46a",
                "#f4a261", "#90be6d")
UNKNOWN_COLOR = "#adb5bd"
# Diverging: red = slower than the baseline, neutral at 0, blue = faster.
DIVERGING = [[0.0, "#b2182b"], [0.25, "#ef8a62"], [0.5, "#f2f2f2"], [0.75, "#67a9cf"], [1.0, "#2166ac"]]
PROBLEM_COLOR = "#3b3f4a"
MISSING_COLOR = "#23262f"


# --------------------------------------------------------------------------- labels

def size_class(label: str | None, size_label: str | None = None) -> str:
    """'0.5B', '1.5B', '135M' from a label's parameter count; else GGUF's size_label; else 'unknown size'."""
    for text in (label, size_label):
        if not text:
            continue
        m = SIZE_RE.search(text)
        if m:
            return f"{float(m.group(1)):g}{m.group(2).upper()}"
    if size_label and size_label.strip():
        return size_label.strip()[:24]
    return UNKNOWN_SIZE


def size_value(cls: str) -> float:
    """Sort key for size classes: parameters, with unknown sizes last."""
    m = SIZE_RE.search(cls)
    if not m:
        return math.inf
    return float(m.group(1)) * (1e9 if m.group(2).upper() == "B" else 1e6)


def plotly_text(text) -> str:
    """Escape text for Plotly labels (it renders <b>, <a>, <br>… in names, ticks, text and hovers)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def esc(text) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def _pct(x, digits: int = 0) -> str:
    return "n/a" if x is None else f"{x * 100:.{digits}f}%"


def _num(x, fmt: str = ".2f", unit: str = "") -> str:
    return "n/a" if x is None else f"{x:{fmt}}{unit}"


def _signed_pct(p: float) -> str:
    # One decimal near zero so a small slowdown never reads as "-0%"; U+2212 minus for legibility.
    return (f"{p:+.1f}%" if abs(p) < 1 else f"{p:+.0f}%").replace("-", "\u2212")


# --------------------------------------------------------------------------- model

@dataclass(frozen=True)
class DraftCol:
    """One heatmap column: a draft, or a draft at one draft_max when several were swept."""

    draft: str
    draft_max: int | None
    label: str
    size: str


@dataclass(frozen=True)
class Cell:
    target: str
    col: DraftCol
    row: Row | None
    state: str          # ok | error | skipped | inactive | no baseline | not run | no data
    note: str = ""

    @property
    def shows_speedup(self) -> bool:
        return self.state == "ok"


@dataclass(frozen=True)
class ReportData:
    results: ResultsFile
    targets: tuple[str, ...]
    columns: tuple[DraftCol, ...]
    classes: tuple[str, ...]
    cells: dict                      # (target, col) -> Cell
    multi_k: bool


def _size_label_for(results: ResultsFile, row: Row) -> str | None:
    for key in ("draft_size_label", "size_label"):
        value = row.extra.get(key)
        if isinstance(value, str) and value.strip():
            return value
    for entry in (results.config or {}).get("drafts") or []:
        if isinstance(entry, dict) and entry.get("label") == row.draft and isinstance(entry.get("size_label"), str):
            return entry["size_label"]
    return None


def _cell_state(row: Row | None, baseline: Row | None) -> tuple[str, str]:
    if row is None:
        return "not run", "this combination is not in the results file (sweep not finished?)"
    if row.speculation_active is False:
        return "inactive", row.reason or "the draft never drafted a token: speculation was not active"
    if row.status == "error":
        return "error", row.reason or "error"
    if row.status == "skipped":
        return "skipped", row.reason or "skipped"
    if baseline is None:
        return "no baseline", "no baseline was measured for this target, so no speed-up can be computed"
    if not row.speedup or not row.counts_as_speedup():
        return "no data", "no tok/s was measured"
    return "ok", ""


def build_data(results: ResultsFile) -> ReportData:
    rows = results.results
    spec_rows = [r for r in rows if r.role == "speculative" and r.draft is not None]
    targets = tuple(dict.fromkeys(r.target for r in rows if r.role in ("baseline", "speculative", "control")))
    multi_k = len({r.draft_max for r in spec_rows}) > 1
    cols: dict[tuple, DraftCol] = {}
    order: list[tuple] = []
    for r in spec_rows:
        key = (r.draft, r.draft_max if multi_k else None)
        if key in cols:
            continue
        label = r.draft + (f" (k={r.draft_max})" if multi_k and r.draft_max is not None else "")
        cols[key] = DraftCol(r.draft, key[1], label, size_class(r.draft, _size_label_for(results, r)))
        order.append(key)
    classes = tuple(sorted(dict.fromkeys(c.size for c in cols.values()), key=lambda s: (size_value(s), s)))
    # drafts grouped by size class, in order of first appearance within a class
    columns = tuple(sorted((cols[k] for k in order), key=lambda c: classes.index(c.size)))
    cells = {}
    for target in targets:
        baseline = results.baseline_for(target)
        for col in columns:
            row = next((r for r in spec_rows if r.target == target and r.draft == col.draft
                        and (not multi_k or r.draft_max == col.draft_max)), None)
            state, note = _cell_state(row, baseline)
            cells[(target, col)] = Cell(target, col, row, state, note)
    return ReportData(results, targets, columns, classes, cells, multi_k)


def _rank(row: Row) -> float:
    return row.speedup["ratio"] if row.speedup and row.speedup.get("ratio") is not None else (row.mean_tps or 0.0)


def best_per_class(data: ReportData, target: str) -> dict[str, Cell]:
    """The fastest valid draft of each size class for a target."""
    best: dict[str, Cell] = {}
    for col in data.columns:
        cell = data.cells[(target, col)]
        if not cell.shows_speedup:
            continue
        if col.size not in best or _rank(cell.row) > _rank(best[col.size].row):
            best[col.size] = cell
    return best


def bar_classes(data: ReportData) -> list[str]:
    """Size classes with at least one valid measurement (the bar charts' series; the heatmap shows all)."""
    return [cls for cls in data.classes if any(cls in best_per_class(data, t) for t in data.targets)]


def _class_color(data: ReportData, cls: str) -> str:
    if cls == UNKNOWN_SIZE:
        return UNKNOWN_COLOR
    known = [c for c in data.classes if c != UNKNOWN_SIZE]
    return CLASS_COLORS[known.index(cls) % len(CLASS_COLORS)]


# --------------------------------------------------------------------------- figures

def _layout(**extra) -> dict:
    axis = dict(gridcolor=GRID, zerolinecolor=GRID, linecolor=GRID, automargin=True)
    layout = dict(
        template="none", paper_bgcolor=CARD, plot_bgcolor=CARD,
        font=dict(family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif", color=TEXT, size=13),
        margin=dict(l=70, r=30, t=30, b=60), hoverlabel=dict(align="left", bgcolor="#262a36", font=dict(color=TEXT)),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0, bgcolor="rgba(0,0,0,0)"),
        xaxis=dict(axis), yaxis=dict(axis),
    )
    for key, value in extra.items():
        if key in ("xaxis", "yaxis"):
            layout[key] = {**layout[key], **value}
        else:
            layout[key] = value
    return layout


def _speedup_text(s: dict | None) -> str:
    return plotly_text(describe_speedup(s)) if s else "n/a"


def _bar_hover(cell: Cell) -> list:
    r = cell.row
    return [plotly_text(cell.col.label), _num(r.mean_tps, ".1f", " tok/s"), _speedup_text(r.speedup),
            _pct(r.acceptance_rate), plotly_text(cell.col.size)]


def throughput_figure(data: ReportData) -> dict:
    x = [plotly_text(t) for t in data.targets]
    baselines = [data.results.baseline_for(t) for t in data.targets]
    best = {t: best_per_class(data, t) for t in data.targets}
    values = [b.mean_tps for b in baselines if b and b.mean_tps] + [
        c.row.mean_tps for t in data.targets for c in best[t].values() if c.row.mean_tps]
    value_fmt = "%{y:.0f}" if values and max(values) >= 20 else "%{y:.1f}"  # short labels do not collide
    traces = [dict(type="bar", name="Baseline (target alone)", x=x,
                   y=[b.mean_tps if b else None for b in baselines], marker=dict(color=BASELINE_COLOR),
                   texttemplate=value_fmt, textposition="outside", cliponaxis=False,
                   hovertemplate="<b>%{x}</b> alone<br>%{y:.1f} tok/s<extra></extra>")]
    for cls in bar_classes(data):
        y, custom = [], []
        for t in data.targets:
            cell = best[t].get(cls)
            y.append(cell.row.mean_tps if cell else None)
            custom.append(_bar_hover(cell) if cell else ["", "", "", "", ""])
        traces.append(dict(type="bar", name=f"best {plotly_text(cls)} draft", x=x, y=y, customdata=custom,
                           marker=dict(color=_class_color(data, cls)), texttemplate=value_fmt,
                           textposition="outside", cliponaxis=False,
                           hovertemplate="<b>%{x}</b> + %{customdata[0]}<br>%{customdata[1]}<br>"
                                         "speed-up %{customdata[2]}<br>acceptance %{customdata[3]}<extra></extra>"))
    layout = _layout(barmode="group", height=460, uniformtext=dict(minsize=9, mode="hide"),
                     xaxis=dict(type="category", title=dict(text="target")),
                     yaxis=dict(title=dict(text="decode tok/s (mean per request)"), rangemode="tozero"))
    return dict(data=traces, layout=layout)


def speedup_figure(data: ReportData) -> dict:
    x = [plotly_text(t) for t in data.targets]
    best = {t: best_per_class(data, t) for t in data.targets}
    traces = []
    for cls in bar_classes(data):
        y, custom, plus, minus, opacity = [], [], [], [], []
        for t in data.targets:
            cell = best[t].get(cls)
            s = cell.row.speedup if cell else None
            pct = (s["ratio"] - 1) * 100 if s else None
            y.append(None if pct is None else round(pct, 2))
            custom.append(_bar_hover(cell) if cell else ["", "", "", "", ""])
            if s and s.get("ci95_low") is not None and s.get("ci95_high") is not None:
                plus.append(round((s["ci95_high"] - s["ratio"]) * 100, 2))
                minus.append(round((s["ratio"] - s["ci95_low"]) * 100, 2))
            else:
                plus.append(None)
                minus.append(None)
            opacity.append(0.45 if s and s.get("significant") is False else 1.0)
        trace = dict(type="bar", name=f"best {plotly_text(cls)} draft", x=x, y=y, customdata=custom,
                     marker=dict(color=_class_color(data, cls), opacity=opacity),
                     texttemplate="%{y:+.0f}%", textposition="outside", cliponaxis=False,
                     hovertemplate="<b>%{x}</b> + %{customdata[0]}<br>speed-up %{customdata[2]}<br>"
                                   "%{customdata[1]}, acceptance %{customdata[3]}<extra></extra>")
        if any(v is not None for v in plus):
            trace["error_y"] = dict(type="data", array=plus, arrayminus=minus, visible=True, color=MUTED, thickness=1.2)
        traces.append(trace)
    layout = _layout(barmode="group", height=460, uniformtext=dict(minsize=9, mode="hide"),
                     xaxis=dict(type="category", title=dict(text="target")),
                     yaxis=dict(title=dict(text="speed-up vs the target alone (%)"), ticksuffix="%",
                                zeroline=True, zerolinecolor=TEXT, zerolinewidth=1.5))
    return dict(data=traces, layout=layout)


def _cell_text(cell: Cell) -> str:
    if not cell.shows_speedup:
        return cell.state
    s = cell.row.speedup
    text = _signed_pct((s["ratio"] - 1) * 100)
    if s.get("significant") is False:
        text += " (n.s.)"
    return text + f"<br>acc {_pct(cell.row.acceptance_rate)}"


def _cell_hover(cell: Cell) -> list:
    r = cell.row
    head = [plotly_text(cell.target), plotly_text(cell.col.label), plotly_text(cell.col.size)]
    if not cell.shows_speedup:
        return head + [plotly_text(cell.state), plotly_text(cell.note), "", "", ""]
    ttft = r.mean_ttft if r.mean_ttft is not None else (r.ttft_s or {}).get("mean")
    return head + [_speedup_text(r.speedup), _num(r.mean_tps, ".1f", " tok/s"), _pct(r.acceptance_rate, 1),
                   _num(ttft * 1000 if ttft is not None else None, ".0f", " ms"), ""]


def heatmap_figure(data: ReportData) -> dict:
    """Drafts down, targets across. Trace 0: measured speed-ups; trace 1: every other cell, in grey."""
    x = [plotly_text(t) for t in data.targets]
    y = [plotly_text(c.label) for c in data.columns]
    z, text, custom, pz, ptext = [], [], [], [], []
    for col in data.columns:
        zr, tr, cr, pzr, ptr = [], [], [], [], []
        for t in data.targets:
            cell = data.cells[(t, col)]
            cr.append(_cell_hover(cell))
            if cell.shows_speedup:
                zr.append(round((cell.row.speedup["ratio"] - 1) * 100, 2))
                tr.append(_cell_text(cell))
                pzr.append(None)
                ptr.append("")
            else:
                zr.append(None)
                tr.append("")
                pzr.append(0 if cell.state == "not run" else 1)
                ptr.append(_cell_text(cell))
        z.append(zr)
        text.append(tr)
        custom.append(cr)
        pz.append(pzr)
        ptext.append(ptr)
    hover_ok = ("<b>%{customdata[0]}</b> + <b>%{customdata[1]}</b> (%{customdata[2]})<br>"
                "speed-up %{customdata[3]}<br>%{customdata[4]}<br>acceptance %{customdata[5]}<br>"
                "TTFT %{customdata[6]}<extra></extra>")
    hover_bad = ("<b>%{customdata[0]}</b> + <b>%{customdata[1]}</b><br><b>%{customdata[3]}</b>: "
                 "%{customdata[4]}<extra></extra>")
    max_abs = max([abs(v) for zr in z for v in zr if v is not None] or [1.0])
    traces = [
        dict(type="heatmap", name="speed-up", x=x, y=y, z=z, text=text, customdata=custom, texttemplate="%{text}",
             zmid=0, zmin=-max_abs, zmax=max_abs, colorscale=DIVERGING, hoverongaps=False, xgap=2, ygap=2,
             hovertemplate=hover_ok, textfont=dict(size=12),
             colorbar=dict(title=dict(text="speed-up", side="right"), ticksuffix="%", outlinewidth=0,
                           tickfont=dict(color=TEXT))),
        dict(type="heatmap", name="no speed-up measured", x=x, y=y, z=pz, text=ptext, customdata=custom,
             texttemplate="%{text}", zmin=0, zmax=1, colorscale=[[0, MISSING_COLOR], [1, PROBLEM_COLOR]],
             showscale=False, hoverongaps=False, xgap=2, ygap=2, hovertemplate=hover_bad,
             textfont=dict(size=12, color="#c9ccd1")),
    ]
    height = max(320, 110 + 34 * len(data.columns))
    layout = _layout(height=height, margin=dict(l=70, r=30, t=70, b=30),
                     xaxis=dict(type="category", side="top", showgrid=False),
                     yaxis=dict(type="category", autorange="reversed", showgrid=False))
    return dict(data=traces, layout=layout)


def scatter_figure(data: ReportData) -> dict:
    traces = []
    for _i, t in enumerate(data.targets):
        xs, ys, custom, plus, minus = [], [], [], [], []
        for col in data.columns:
            cell = data.cells[(t, col)]
            if not cell.shows_speedup or cell.row.acceptance_rate is None:
                continue
            s = cell.row.speedup
            xs.append(round(cell.row.acceptance_rate * 100, 2))
            ys.append(round((s["ratio"] - 1) * 100, 2))
            custom.append([plotly_text(col.label), plotly_text(col.size), _speedup_text(s),
                           _num(cell.row.mean_tps, ".1f", " tok/s")])
            has_ci = s.get("ci95_low") is not None and s.get("ci95_high") is not None
            plus.append(round((s["ci95_high"] - s["ratio"]) * 100, 2) if has_ci else None)
            minus.append(round((s["ratio"] - s["ci95_low"]) * 100, 2) if has_ci else None)
        if not xs:
            continue
        trace = dict(type="scatter", mode="markers", name=plotly_text(t), x=xs, y=ys, customdata=custom,
                     marker=dict(size=10, opacity=0.85, line=dict(width=1, color=BG)),
                     hovertemplate="<b>%{fullData.name}</b> + %{customdata[0]} (%{customdata[1]})<br>"
                                   "acceptance %{x:.1f}%<br>speed-up %{customdata[2]}<br>%{customdata[3]}"
                                   "<extra></extra>")
        if any(v is not None for v in plus):
            trace["error_y"] = dict(type="data", array=plus, arrayminus=minus, visible=True, thickness=1, width=0)
        traces.append(trace)
    layout = _layout(height=480, colorway=list(CLASS_COLORS), margin=dict(l=70, r=30, t=20, b=60),
                     legend=dict(orientation="v", x=1.01, xanchor="left", y=1, yanchor="top",
                                 title=dict(text="target"), bgcolor="rgba(0,0,0,0)"),
                     xaxis=dict(title=dict(text="acceptance rate (accepted / drafted tokens)"), ticksuffix="%"),
                     yaxis=dict(title=dict(text="speed-up vs the target alone (%)"), ticksuffix="%",
                                zeroline=True, zerolinecolor=TEXT, zerolinewidth=1.5))
    return dict(data=traces, layout=layout)


def build_figures(results: ResultsFile) -> dict[str, dict]:
    """Figure dicts by div id (for the page, and for tests to compare with what the browser drew)."""
    data = build_data(analyze(results))
    return _figures(data)


def _figures(data: ReportData) -> dict[str, dict]:
    return {"chart-throughput": throughput_figure(data), "chart-speedup": speedup_figure(data),
            "chart-heatmap": heatmap_figure(data), "chart-scatter": scatter_figure(data)}


def _figure_html(fig: dict, div_id: str) -> str:
    import plotly.io as pio

    height = fig["layout"].get("height", 450)
    return pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div_id, default_width="100%",
                       default_height=f"{height}px", validate=True,
                       config={"displaylogo": False, "responsive": True,
                               "toImageButtonOptions": {"filename": div_id}})


# --------------------------------------------------------------------------- HTML parts

def _fmt_date(ts: str | None) -> str:
    if not ts:
        return "unknown"
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M %Z").strip()
    except ValueError:
        return ts


def _versions(results: ResultsFile) -> list[str]:
    out = []
    for r in results.results:
        v = (r.server or {}).get("version")
        if v:
            out.append(str(v))
    return list(dict.fromkeys(out))


def _header(results: ResultsFile) -> str:
    versions = _versions(results)
    host = results.host or {}
    host_bits = [b for b in (host.get("cpu"), f"{host['memory_gb']} GB RAM" if host.get("memory_gb") else None,
                             host.get("os")) if b]
    s = results.settings or {}
    setting_bits = [f"{k} {s[k]}" for k in ("runs", "max_tokens", "temperature", "draft_max", "gpu_layers", "ctx_size")
                    if s.get(k) is not None]
    if isinstance(s.get("prompts"), list):
        setting_bits.append("prompts " + ", ".join(str(p) for p in s["prompts"]))
    items = [
        ("Hardware", results.hardware + (f" — {'; '.join(host_bits)}" if host_bits else "")),
        ("Backend", results.backend),
        ("Model family", results.model_family or "—"),
        ("Sweep", results.name),
        ("Server version", ", ".join(versions) if versions else "not recorded"),
        ("Date", _fmt_date(results.timestamp)),
        ("Settings", "; ".join(setting_bits) or "—"),
    ]
    dl = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in items)
    origin = ("an upstream draftbench file (no per-request data: speed-ups are ratios of means, without "
              "confidence intervals)" if results.is_upstream else f"results schema {results.schema_version}")
    return (f"<header><h1>Speculative decoding: {esc(results.model_family or results.name)} on "
            f"{esc(results.hardware)}</h1><dl class=\"meta\" id=\"meta\">{dl}</dl>"
            f"<p class=\"muted\">Source: {esc(origin)}.</p></header>")


def _category_note(best: Row, baseline: Row) -> str:
    bc, cc = baseline.by_category or {}, best.by_category or {}
    parts = []
    for cat, stats in cc.items():
        base = bc.get(cat) or {}
        if stats.get("mean_tps") and base.get("mean_tps"):
            parts.append(f"{cat} {_signed_pct((stats['mean_tps'] / base['mean_tps'] - 1) * 100)}")
    return "by prompt type: " + ", ".join(parts) if parts else ""


def _summary_table(data: ReportData) -> str:
    results = data.results
    entries = {e["target"]: e for e in (results.summary or {}).get("targets", [])}
    body = []
    for target in data.targets:
        e = entries.get(target) or {}
        baseline = results.baseline_for(target)
        rec = e.get("recommended_draft")
        significant = (e.get("speedup") or {}).get("significant")
        if rec and significant:
            label = rec + (f" (k={e['draft_max']})" if e.get("draft_max") else "")
            best_cell = f"<span class=\"good\">{esc(label)}</span>"
        elif rec:
            best_cell = f"{esc(rec)} <span class=\"muted\">(best measured)</span>"
        else:
            best_cell = "<span class=\"muted\">none recommended</span>"
        notes = []
        best_row = next((r for r in results.results if r.target == target and r.role == "speculative" and r.draft == rec
                         and r.draft_max == e.get("draft_max") and r.ok), None) if rec else None
        if best_row is None and rec:
            best_row = next((r for r in results.results if r.target == target and r.role == "speculative"
                             and r.draft == rec and r.ok), None)
        if best_row is not None and baseline is not None:
            cat = _category_note(best_row, baseline)
            if cat:
                notes.append(cat)
            eq = best_row.equivalence or {}
            if eq.get("checked"):
                notes.append(f"output identical to the target alone on {eq['matched']}/{eq['compared']} requests")
        control = next((r for r in results.results if r.target == target and r.role == "control" and r.ok
                        and r.speedup), None)
        if control is not None:
            notes.append(f"baseline re-measured at the end: {describe_speedup(control.speedup)} drift")
        verdict = esc(e.get("verdict", ""))
        if notes:
            verdict += "<div class=\"muted small\">" + esc("; ".join(notes)) + "</div>"
        body.append(
            "<tr>"
            f"<td>{esc(target)}</td>"
            f"<td class=\"num\">{esc(_num(baseline.mean_tps if baseline else None, '.1f', ' tok/s'))}</td>"
            f"<td>{best_cell}</td>"
            f"<td class=\"num\">{esc(describe_speedup(e.get('speedup')) if e.get('speedup') else '—')}</td>"
            f"<td class=\"num\">{esc(_pct(e.get('acceptance_rate')) if rec else '—')}</td>"
            f"<td>{verdict}</td></tr>")
    if not body:
        body.append("<tr><td colspan=\"6\" class=\"muted\">No targets in this results file.</td></tr>")
    return ("<div class=\"table-wrap\"><table id=\"summary-table\"><thead><tr><th>Target</th><th>Baseline</th><th>Best draft</th>"
            "<th>Speed-up (95% CI)</th><th>Acceptance</th><th>Verdict</th></tr></thead><tbody>"
            + "".join(body) + "</tbody></table></div>")


def _row_title(row: Row, multi_k: bool) -> str:
    return combination_title(row.role, row.target, row.draft, row.draft_max, show_k=multi_k)


def problem_rows(results: ResultsFile) -> list[tuple[Row, str, str]]:
    """(row, what, why) for every row that is not a valid measurement."""
    out = []
    for r in results.results:
        if r.speculation_active is False and r.role == "speculative":
            why = r.reason or next((w.message for w in r.warnings if w.code is Code.NEVER_DRAFTED), None) or \
                "the draft never drafted a token"
            out.append((r, "speculation inactive", why))
        elif r.status in ("error", "skipped"):
            out.append((r, r.status, r.reason or "no reason recorded"))
    return out


def _problems(data: ReportData) -> str:
    results = data.results
    problems = problem_rows(results)
    if problems:
        rows = "".join(f"<tr><td>{esc(_row_title(r, data.multi_k))}</td><td class=\"state\">{esc(what)}</td>"
                       f"<td>{esc(why)}</td></tr>" for r, what, why in problems)
        table = ("<div class=\"table-wrap\"><table id=\"problems-table\"><thead><tr><th>Combination</th><th>Status</th><th>Reason</th></tr>"
                 f"</thead><tbody>{rows}</tbody></table></div>"
                 "<p class=\"muted\">None of these is counted as a speed-up anywhere in this report.</p>")
    else:
        table = "<p id=\"problems-none\">Every combination produced a valid measurement.</p>"
    warned = [r for r in results.results if r.warnings]
    warn_html = ""
    if warned:
        items = "".join(f"<li><b>{esc(_row_title(r, data.multi_k))}</b><ul>"
                        + "".join(f"<li>{esc(w.message)}</li>" for w in r.warnings) + "</ul></li>" for r in warned)
        warn_html = (f"<details id=\"warnings\"><summary>Measurement warnings ({len(warned)} "
                     f"combination{'s' if len(warned) != 1 else ''})</summary><ul>{items}</ul></details>")
    return f"<section id=\"problems\"><h2>Problems</h2>{table}{warn_html}</section>"


def _theory(data: ReportData) -> str:
    rows = [r for r in data.results.results if r.role == "speculative" and r.theory]
    if not rows:
        return ""
    body = []
    for r in rows:
        t = r.theory
        cost = _num(t.get("cost_ratio"), ".3f")
        source = t.get("cost_source") or ""
        if t.get("cost_ratio") is not None and source:
            cost += " (measured)" if source.startswith("measured") else " (from file sizes)"
        best_k = "n/a" if t.get("best_k") is None else f"{t['best_k']} (→ {_num(t.get('predicted_at_best_k'), '.2f', '×')})"
        body.append("<tr>" + "".join(f"<td{' class=num' if i > 0 else ''}>{esc(v)}</td>" for i, v in enumerate([
            _row_title(r, data.multi_k), _pct(r.acceptance_rate), _num(t.get("alpha"), ".3f"),
            _num(t.get("k_mean"), ".2f"), _num(t.get("tokens_per_step"), ".2f"), cost,
            _num(t.get("predicted_speedup"), ".2f", "×"), _num(t.get("measured_speedup"), ".2f", "×"), best_k])) + "</tr>")
    return ("<section id=\"theory\"><h2>Theory vs measurement</h2>"
            "<p>With per-token acceptance probability α and k drafted tokens per step, one verification step yields "
            "on average τ = (1 − α<sup>k+1</sup>) / (1 − α) tokens and costs (1 + c·k) target-token times, where c "
            "is the draft's cost relative to the target, so the expected speed-up is S = τ / (1 + c·k) (Leviathan "
            "et al., 2023). It assumes verifying k+1 tokens costs as much as generating one (memory-bound decoding); "
            "on CPUs the measured speed-up falls short of S. c is measured when the sweep ran each draft alone "
            "(<code>settings.draft_alone</code>), otherwise estimated from file sizes; n/a when neither is "
            "available.</p>"
            "<details open><summary>Per combination</summary><div class=\"table-wrap\"><table id=\"theory-table\"><thead><tr>"
            "<th>Combination</th><th>Acceptance</th><th>α</th><th>k̄</th><th>τ (tokens/step)</th><th>c (cost ratio)</th>"
            "<th>Predicted S</th><th>Measured S</th><th>Best k (predicted S)</th></tr></thead><tbody>"
            + "".join(body) + "</tbody></table></div></details></section>")


HOW_TO_READ = """
<section id="how-to-read"><h2>How to read this</h2><ul>
<li><b>Speed-up</b> is the decode speed (generated tokens per second after the first token) with the draft, relative
to the same target alone on the same prompts. +50% means 1.5× faster; negative values are slowdowns: the draft costs
more than it saves.</li>
<li><b>95% CI</b>: where each request was recorded, requests are paired by prompt and repetition and the interval
says how sure the estimate is. <b>not significant</b> / <b>n.s.</b>: the interval includes 0% or the gain is below the
noise floor &mdash; treat it as &ldquo;no difference&rdquo;. Files without per-request data (such as upstream
draftbench files) only have ratios of means, so significance is unknown.</li>
<li><b>Acceptance</b> is accepted / drafted tokens over all requests. High acceptance with a small or negative
speed-up means the draft is too slow; low acceptance means it predicts the target badly.</li>
<li><b>Size classes</b> come from the parameter count in the draft's label (0.5B, 1.5B, 135M&hellip;) or its GGUF
metadata; drafts without one form an &ldquo;unknown size&rdquo; class. The bar charts show the fastest draft of each
class; the heatmap shows every draft.</li>
<li><b>Grey cells</b> are combinations without a valid speed-up: <i>error</i>, <i>skipped</i>, <i>inactive</i>
(the server ran but the draft never drafted a token), <i>no baseline</i> or <i>not run</i>. They are never counted
as speed-ups; the reasons are listed under Problems.</li>
<li>Hover over any bar, cell or point for tok/s, acceptance and time to first token. Charts are interactive:
click legend entries to hide series, drag to zoom, double-click to reset.</li>
</ul></section>
"""

CSS = f"""
:root {{ color-scheme: dark; }}
* {{ box-sizing: border-box; }}
body {{ margin: 0; background: {BG}; color: {TEXT};
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }}
main {{ max-width: 1280px; margin: 0 auto; padding: 24px 28px 48px; }}
h1 {{ font-size: 1.7rem; margin: 0 0 12px; font-weight: 650; }}
h2 {{ font-size: 1.2rem; margin: 0 0 10px; font-weight: 600; }}
section, header {{ background: {CARD}; border: 1px solid {GRID}; border-radius: 10px; padding: 18px 20px;
  margin: 0 0 18px; }}
.meta {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(280px, 1fr)); gap: 6px 24px; margin: 0; }}
.meta dt {{ color: {MUTED}; font-size: .8rem; text-transform: uppercase; letter-spacing: .04em; }}
.meta dd {{ margin: 0; overflow-wrap: anywhere; }}
.muted {{ color: {MUTED}; }}
.small {{ font-size: .85rem; margin-top: 4px; }}
.good {{ color: #7bd389; font-weight: 600; }}
.lead {{ margin: 4px 0 10px; color: {MUTED}; }}
table {{ border-collapse: collapse; width: 100%; font-size: .92rem; }}
.table-wrap {{ overflow-x: auto; }}
th, td {{ text-align: left; padding: 7px 10px; border-bottom: 1px solid {GRID}; vertical-align: top; }}
th {{ white-space: nowrap; }}
td {{ overflow-wrap: anywhere; }}
#summary-table td:first-child, #summary-table td:nth-child(3) {{ min-width: 9em; }}
#summary-table td:last-child {{ min-width: 24em; }}
#problems-table td:first-child, #theory-table td:first-child {{ min-width: 14em; }}
#problems-table td:last-child {{ min-width: 20em; }}
th {{ color: {MUTED}; font-weight: 600; font-size: .8rem; text-transform: uppercase; letter-spacing: .03em; }}
td.num {{ white-space: nowrap; font-variant-numeric: tabular-nums; }}
td.state {{ color: #ef8a62; white-space: nowrap; }}
tbody tr:hover {{ background: #1d212c; }}
details summary {{ cursor: pointer; color: {MUTED}; margin: 8px 0; }}
ul {{ padding-left: 1.3em; margin: 6px 0; }}
li {{ margin: 3px 0; }}
.chart {{ width: 100%; }}
footer {{ color: {MUTED}; font-size: .85rem; text-align: center; }}
a {{ color: #4cc9f0; }}
"""


def _chart_section(div_id: str, title: str, lead: str, fig: dict) -> str:
    return (f"<section class=\"chart-section\" id=\"{div_id}-section\"><h2>{esc(title)}</h2>"
            f"<p class=\"lead\">{lead}</p><div class=\"chart\">{_figure_html(fig, div_id)}</div></section>")


def render_report(results: ResultsFile, *, cdn: bool = False) -> str:
    """The whole page as a string; depends only on ``results`` (and this package's plotly)."""
    results = analyze(results)
    data = build_data(results)
    figures = _figures(data)
    if cdn:
        from plotly.io._utils import plotly_cdn_url
        plotly_js = f"<script src=\"{esc(plotly_cdn_url())}\" charset=\"utf-8\"></script>"
    else:
        from plotly.offline import get_plotlyjs
        plotly_js = f"<script type=\"text/javascript\">{get_plotlyjs()}</script>"
    n_spec = sum(1 for c in data.cells.values() if c.row is not None)
    charts = [
        _chart_section("chart-throughput", "Throughput",
                       "Decode tok/s of each target alone and with the fastest draft of each size class.",
                       figures["chart-throughput"]),
        _chart_section("chart-speedup", "Speed-up over the target alone",
                       "Best draft of each size class. Whiskers: 95% confidence interval; faded bars are not "
                       "significant.", figures["chart-speedup"]),
        _chart_section("chart-heatmap", "Every target × every draft",
                       f"{len(data.targets)} targets × {len(data.columns)} drafts ({n_spec} measured combinations). "
                       "Cell: speed-up and acceptance. Red is slower than the target alone, blue faster; grey cells "
                       "have no valid speed-up.", figures["chart-heatmap"]),
        _chart_section("chart-scatter", "Acceptance vs speed-up",
                       "One point per target + draft pair. Points below 0% are slowdowns despite the acceptance.",
                       figures["chart-scatter"]),
    ]
    title = f"draftbench — {results.name} ({results.hardware}, {results.backend})"
    return "\n".join([
        "<!DOCTYPE html>",
        "<html lang=\"en\"><head><meta charset=\"utf-8\">",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
        f"<title>{esc(title)}</title>",
        f"<meta name=\"generator\" content=\"draftbench {esc(__version__)}\">",
        f"<style>{CSS}</style>",
        plotly_js,
        "</head><body><main>",
        _header(results),
        "<section id=\"summary\"><h2>Verdict</h2>" + _summary_table(data) + "</section>",
        HOW_TO_READ,
        *charts,
        _problems(data),
        _theory(data),
        f"<footer>Generated by draftbench {esc(__version__)} from the results file alone; "
        "re-create it with <code>python sweep.py --chart-only --results FILE</code>.</footer>",
        "</main></body></html>",
    ]) + "\n"


def write_report(results: ResultsFile, path, *, cdn: bool = False) -> Path:
    """Render and write atomically (see :func:`paths.atomic_write_text`)."""
    return atomic_write_text(path, render_report(results, cdn=cdn))
