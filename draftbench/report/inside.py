"""Inside each draft: acceptance by draft position, the draft against its ceiling, and the best k
predicted from one run — three charts for the registry in :mod:`.figures`, and one table.

Everything here reads row fields that :func:`analysis.analyze` fills in (``accepted_per_pos``,
``diagnosis``, ``k_prediction``, ``ceiling``, ceiling rows' ``synthetic``); where a server does not
report per-position counts, the report says so instead of drawing zeros.
"""

from __future__ import annotations

import math
from typing import Any

from ..analysis.draft.evidence import too_little
from ..analysis.draft.k_advice import kind
from ..analysis.draft.positions import drafted_positions
from ..analysis.summary import verdicts_of
from ..common.percent import percent_change
from ..results.file import ResultsFile, Row, Speedup, combination_title
from ..results.kinds import Role
from . import theme
from .layout import base_layout
from .text import esc, num, plotly_text
from .view import ReportData

Figure = dict[str, Any]

NOT_REPORTED = "not reported by this server"
LEVEL_NAMES = {"measured": "synthetic, at its measured acceptance", "full": "synthetic, every drafted token accepted"}


def _title(row: Row, multi_k: bool) -> str:
    return combination_title(row.role, row.target, row.draft, row.draft_max, show_k=multi_k)


def _measured(results: ResultsFile) -> list[Row]:
    return [r for r in results.results if r.role is Role.SPECULATIVE and r.ok and r.draft is not None]


def _with_positions(results: ResultsFile) -> list[Row]:
    return [r for r in _measured(results) if r.accepted_per_pos and r.verify_steps]


def _why_missing(results: ResultsFile) -> str:
    if not _measured(results):
        return "no speculative combination was measured"
    if results.is_upstream:
        return "this file (upstream draftbench) has no per-position counts"
    return f"{NOT_REPORTED} ({results.backend})"


def _empty_note(layout: dict[str, Any], text: str) -> dict[str, Any]:
    layout["annotations"] = [dict(text=plotly_text(text), showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5,
                                  font=dict(color=theme.MUTED, size=15))]
    layout["meta"] = {"empty": text}     # the page says this instead of drawing empty axes
    return layout


# --------------------------------------------------------------------------- acceptance by position

def drafted(row: Row) -> list[int]:
    """A row's per-position counts over the positions actually drafted (``analysis/draft/positions.py``):
    llama-server exports up to the method's maximum (64 for ngram-mod) whether or not a draft got there."""
    return drafted_positions(row.accepted_per_pos or [], row.draft_max if kind(row) == "draft" else None)


def _drawn(results: ResultsFile) -> list[Row]:
    """The rows whose per-position counts are worth a line: enough drafts to tell (``evidence.too_little``)."""
    return [r for r in _with_positions(results) if too_little(r) is None and drafted(r)]


def _tick_step(positions: int) -> int:
    """Every position up to 16; beyond, a step that keeps the axis to about a dozen readable ticks."""
    return next((step for step in (1, 2, 4, 5, 8, 10, 16, 20, 32) if positions / step <= 16), 64)


def positions_figure(data: ReportData) -> Figure:
    """One line per draft: the share of verify steps that accepted each draft position it actually drafted."""
    traces = []
    rows = _drawn(data.results)
    one_target = len({r.target for r in rows}) == 1
    for row in rows:
        steps = row.verify_steps or 1
        counts = drafted(row)
        diagnosis = row.diagnosis.message if row.diagnosis else ""
        name = _title(row, data.multi_k)
        if one_target:       # the target is the section's: the legend names what differs
            name = name[len(row.target) + 3:] if name.startswith(row.target + " + ") else name
        traces.append(dict(type="scatter", mode="lines+markers", name=plotly_text(name),
                           x=list(range(1, len(counts) + 1)), y=[round(a / steps * 100, 2) for a in counts],
                           customdata=[[a, steps, plotly_text(diagnosis)] for a in counts],
                           hovertemplate="<b>%{fullData.name}</b><br>position %{x}: accepted on %{y:.0f}% of verify "
                                         "steps (%{customdata[0]} of %{customdata[1]})<br>%{customdata[2]}"
                                         "<extra></extra>"))
    longest = max((len(t["x"]) for t in traces), default=1)
    layout = base_layout(height=400 + LEGEND_ROW_PX * math.ceil(len(traces) / 2), colorway=list(theme.CLASS_COLORS),
                         xaxis=dict(title=dict(text="draft position (1 = the first drafted token)"),
                                    range=[0.5, longest + 0.5], tick0=1, dtick=_tick_step(longest)),
                         yaxis=dict(title=dict(text="verify steps that accepted it"), ticksuffix="%",
                                    range=[0, 105]))
    if not traces:
        _empty_note(layout, f"Acceptance by position: {_why_missing(data.results)}")
    return dict(data=traces, layout=layout)


LEGEND_ROW_PX = 24      # the legend above the chart takes a row for about every two lines


def positions_lead(data: ReportData) -> str:
    if not _with_positions(data.results):
        return f"Acceptance by draft position: {_why_missing(data.results)}."
    few = [r for r in _with_positions(data.results) if r not in _drawn(data.results)]
    return ("One line per draft: the share of verify steps that accepted the token at each draft position it "
            "drafted (a line can only fall; it ends at the last position any token was accepted at, or at k). A "
            "line low from position 1 means early rejections — check the tokenizer and chat template; one that "
            "falls off later shows drafting past that point is mostly in vain. What that means for k, with the "
            "other evidence, is in each row's diagnosis under Inside each draft."
            + (f" Not drawn, too few drafts to tell: {', '.join(_title(r, data.multi_k) for r in few)}." if few
               else ""))


# --------------------------------------------------------------------------- the ceiling

def _ceiling_rows(results: ResultsFile) -> list[Row]:
    return [r for r in _measured(results) if r.ceiling]


def _ceiling_speedup(row: Row, key: str) -> Speedup | None:
    return Speedup.from_value((row.ceiling or {}).get(key))     # Row.ceiling is JSON


def ceiling_figure(data: ReportData) -> Figure:
    """Each draft's real speed-up beside the same draft at synthetic acceptance."""
    rows = _ceiling_rows(data.results)
    x = [plotly_text(_title(r, data.multi_k)) for r in rows]
    series = [("real draft (measured)", [r.speedup for r in rows], theme.CLASS_COLORS[0]),
              (LEVEL_NAMES["measured"], [_ceiling_speedup(r, "at_measured_speedup") for r in rows], theme.MUTED),
              (LEVEL_NAMES["full"], [_ceiling_speedup(r, "full_speedup") for r in rows], theme.CLASS_COLORS[2])]
    traces = [dict(type="bar", name=name, x=x, y=[percent_change(s.ratio) if s else None for s in speeds], marker=dict(color=color),
                   customdata=[plotly_text((r.ceiling or {}).get("text", "")) for r in rows],
                   texttemplate="%{y:+.0f}%", textposition="outside", cliponaxis=False,
                   hovertemplate="<b>%{x}</b><br>" + name + ": %{y:+.1f}%<br>%{customdata}<extra></extra>")
              for name, speeds, color in series] if rows else []
    layout = base_layout(barmode="group", height=460, xaxis=dict(type="category"),
                         yaxis=dict(title=dict(text="speed-up vs the target alone (%)"), ticksuffix="%",
                                    zeroline=True, zerolinecolor=theme.TEXT, zerolinewidth=1.5))
    if not traces:
        _empty_note(layout, "No ceiling runs: set settings.ceiling: true or pass --ceiling (llama.cpp)")
    return dict(data=traces, layout=layout)


def ceiling_lead(data: ReportData) -> str:
    rows = _ceiling_rows(data.results)
    if not rows:
        return ("No ceiling runs in this file. With settings.ceiling: true (or --ceiling; llama.cpp only) each draft "
                "also runs at synthetic acceptance, to show what its cost allows on this hardware.")
    verdicts = [v.verdict for v in verdicts_of(data.results) if v.no_draft_can_pay]
    text = ("Synthetic bars are not candidates: llama-server ran the real draft (its cost is real) but accepted its "
            "tokens at random (--spec-synth-len), so their output is not valid and they are never ranked. Full "
            "acceptance far above the real bar: the draft is too inaccurate; full acceptance near 0% or below: the "
            "draft is too costly for this hardware. ")
    text += " ".join(f"{_title(r, data.multi_k)}: {(r.ceiling or {}).get('text')}." for r in rows
                     if (r.ceiling or {}).get("text"))
    if verdicts:
        text += " " + " ".join(verdicts)
    return text


# --------------------------------------------------------------------------- best k from one run

def _prediction_rows(results: ResultsFile) -> list[Row]:
    best: dict[tuple, Row] = {}
    for r in _measured(results):
        pred = r.k_prediction
        if pred and ((r.target, r.draft) not in best
                     or pred["from_k"] > (best[(r.target, r.draft)].k_prediction or {})["from_k"]):
            best[(r.target, r.draft)] = r
    return list(best.values())


def kpredict_figure(data: ReportData) -> Figure:
    """Predicted tok/s for every k (k = 0: the target alone), with the measured k as markers."""
    traces: list[dict[str, Any]] = []
    for i, row in enumerate(_prediction_rows(data.results)):
        pred = row.k_prediction or {}
        color = theme.CLASS_COLORS[i % len(theme.CLASS_COLORS)]
        name = plotly_text(combination_title(Role.SPECULATIVE, row.target, row.draft, None, show_k=False))
        per_k = pred.get("per_k") or []
        traces.append(dict(type="scatter", mode="lines", name=f"{name}: predicted from k={pred['from_k']}",
                           x=[0] + [p["k"] for p in per_k], y=[pred.get("baseline_tps")] + [p["predicted_tps"]
                                                                                            for p in per_k],
                           line=dict(color=color, dash="dot"),
                           hovertemplate="k=%{x}: predicted %{y:.1f} tok/s<extra></extra>"))
        measured = [(p["k"], p["measured_tps"], p["error_pct"]) for p in per_k if p["measured_tps"] is not None]
        measured.append((pred["from_k"], row.mean_tps, 0.0))
        traces.append(dict(type="scatter", mode="markers", name=f"{name}: measured", x=[m[0] for m in measured],
                           y=[m[1] for m in measured], customdata=[m[2] for m in measured],
                           marker=dict(color=color, size=10, line=dict(width=1, color=theme.BG)),
                           hovertemplate="k=%{x}: measured %{y:.1f} tok/s (prediction off by %{customdata:+.1f}%)"
                                         "<extra></extra>"))
    layout = base_layout(height=440, xaxis=dict(title=dict(text="draft length k (0 = the target alone)"),
                                                dtick=1, rangemode="tozero"),
                         yaxis=dict(title=dict(text="decode tok/s"), rangemode="tozero"))
    if not traces:
        _empty_note(layout, f"Best k from one run: {_why_missing(data.results)}")
    return dict(data=traces, layout=layout)


def kpredict_lead(data: ReportData) -> str:
    rows = _prediction_rows(data.results)
    if not rows:
        return (f"Best k from one run: needs per-position counts, a baseline and a draft model "
                f"({_why_missing(data.results) if not _with_positions(data.results) else 'not available here'}).")
    parts = []
    for row in rows:
        pred = row.k_prediction or {}
        error = (f"; measured at {pred['compared']} other k, mean error {pred['mean_abs_error_pct']:.1f}%"
                 if pred.get("compared") else "")
        parts.append(f"{row.target} + {row.draft}: {pred.get('text', '')}{error}")
    return ("Dotted: tok/s predicted for every k from the per-position counts at the largest k and the measured "
            "cost per step; dots: measured. " + " ".join(p + "." for p in parts))


# --------------------------------------------------------------------------- the table

def _positions_text(row: Row) -> str:
    if not row.accepted_per_pos or not row.verify_steps:
        return NOT_REPORTED
    return ", ".join(f"{a / row.verify_steps:.0%}" for a in drafted(row)) or "none accepted"


def _counters_text(row: Row) -> str:
    """The server's own counts behind the shares, summed over the row's requests: what the acceptance rate, the
    mean accepted length and the positions were computed from (checkable against the server's logs)."""
    if row.draft_n is None or row.draft_n_accepted is None:
        return NOT_REPORTED
    steps = f" in {row.verify_steps} verify steps" if row.verify_steps is not None else ""
    text = f"{row.draft_n_accepted} accepted of {row.draft_n} drafted{steps}"
    if row.accepted_per_pos:
        text += "; by position " + ", ".join(str(a) for a in row.accepted_per_pos)
    return text


def inside_table(data: ReportData) -> str:
    """Per measured draft: acceptance by position, the server's counts, mean accepted length, diagnosis (with the k
    advice), ceiling."""
    body = []
    for row in _measured(data.results):
        ceiling = row.ceiling or {}
        cells = [_title(row, data.multi_k), _positions_text(row), _counters_text(row), num(row.mean_accepted_len, ".2f"),
                 row.diagnosis.message if row.diagnosis else "—", ceiling.get("text") or "—"]
        body.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    if not body:
        return ""
    return ("<section id=\"inside\"><h2>Inside each draft</h2><p class=\"lead\">Acceptance by position is the share "
            "of verify steps that accepted each drafted token; the server's counters are the counts it came from, "
            "summed over the row's requests; mean accepted length is 1 + accepted / verify steps "
            "(llama-server's own \"mean len\": the target's token plus the accepted drafts). The diagnosis ends with "
            "the one statement about the draft length k, from every source there is: the k measured, the "
            "prediction from one run, the per-position counts and the textbook model.</p>"
            "<div class=\"table-wrap\"><table id=\"inside-table\"><thead><tr><th>Combination</th>"
            "<th>Acceptance by position</th><th>Server's counters</th><th>Mean accepted length</th>"
            "<th>Diagnosis and draft length</th>"
            "<th>Ceiling</th></tr></thead><tbody>" + "".join(body) + "</tbody></table></div></section>")
