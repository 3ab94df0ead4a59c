"""The HTML page: header, verdict, how to read it, the charts, problems and theory.

One self-contained page: plotly.js is embedded once, so it renders with no network
(``cdn=True`` links the CDN copy instead). Every string from a config or results file goes
through :func:`text.esc`; in the figures' JSON, Plotly's encoder writes ``<``, ``>`` and ``/``
as ``\\u003c`` etc., so no label can close the ``<script>`` that carries a figure.
"""

from __future__ import annotations

import os
from pathlib import Path

import plotly.io as pio
from plotly.offline import get_plotlyjs, get_plotlyjs_version

from .. import __version__
from ..analysis import busy
from ..analysis.context_length import filler_label
from ..analysis.next_step import rerun_of
from ..analysis.session import category_label
from ..analysis.stats import describe_speedup
from ..analysis.summary import TargetVerdict, summary_of, verdicts_of
from ..analysis.verdict import analyze
from ..common.files import write_output_text
from ..common.percent import percent, signed_change
from ..results.file import ResultsFile, Row, Theory, combination_title
from ..results.kinds import Role
from .figures import CHARTS, Chart, Figure, has_data
from .inside import inside_table
from .methods_table import methods_section
from .race_table import race_section
from .stages_table import stages_section
from .text import date_text, displayable, esc, num
from .theme import CSS
from .topology_table import topology_section
from .view import ReportData, build_data, category_changes, control_row, invalid_rows, recommended_row

# --------------------------------------------------------------------------- header

SHOWN_SETTINGS = ("runs", "max_tokens", "temperature", "draft_max", "gpu_layers", "ctx_size")


def _server_versions(results: ResultsFile) -> list[str]:
    """Every server version the rows recorded, once each, in order."""
    return list(dict.fromkeys(str(v) for r in results.results if (v := (r.server or {}).get("version"))))


def _settings_text(results: ResultsFile) -> str:
    """The settings the file records, as written there (a key it lacks is not shown as if it had been set)."""
    read = results.read_settings()
    bits = [f"{k} {v}" for k, v in results.recorded_settings(SHOWN_SETTINGS).items() if v is not None]
    if isinstance(read.prompts, list):
        bits.append("prompts " + ", ".join(str(p) for p in read.prompts))
    if read.concurrency not in (1, [1]):
        bits.append(f"concurrency {read.concurrency}")
    if read.context_tokens is not None:
        bits.append(f"prompt lengths {read.context_tokens} tokens ({filler_label(read)})")
    return "; ".join(bits) or "—"


def _prompts_text(prompt_set: dict | None) -> str:
    """How many prompts, how they were sampled, and where a standard set's data came from."""
    if not prompt_set or not isinstance(prompt_set.get("ids"), list):
        return "not recorded"
    text = f"{len(prompt_set['ids'])} prompts in {len(prompt_set.get('categories') or [])} categories"
    if prompt_set.get("per_category"):
        text += f" ({prompt_set['per_category']} per category, sampled with seed {prompt_set.get('seed')})"
    for name, source in (prompt_set.get("sources") or {}).items():
        text += f"; {name}: {source.get('package')} ({source.get('licence')})"
    context = prompt_set.get("context") or {}
    for name, source in (context.get("sources") or {}).items():
        origin = source.get("package") or f"Python {source.get('python')}"
        text += f"; {name}: {origin} ({source.get('licence')}, sha256 {str(source.get('sha256'))[:12]}…)"
    return text


def _hardware_text(results: ResultsFile) -> str:
    host = results.host or {}
    bits = [b for b in (host.get("cpu"), f"{host['memory_gb']} GB RAM" if host.get("memory_gb") else None,
                        host.get("os")) if b]
    return results.hardware + (f" — {'; '.join(bits)}" if bits else "")


def _header(results: ResultsFile) -> str:
    versions = _server_versions(results)
    items = [
        ("Hardware", _hardware_text(results)),
        ("Backend", results.backend),
        ("Model family", results.model_family or "—"),
        ("Sweep", results.name),
        ("Server version", ", ".join(versions) if versions else "not recorded"),
        ("Date", date_text(results.timestamp)),
        ("Settings", _settings_text(results)),
    ] + ([("Prompts", _prompts_text(results.prompt_set))] if results.prompt_set else []) + [
        ("Machine load", busy.describe(results) or "not recorded")]
    dl = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in items)
    origin = ("an upstream draftbench file (no per-request data: speed-ups are ratios of means, without "
              "confidence intervals)" if results.is_upstream else f"results schema {results.schema_version}")
    return (f"<header><h1>Speculative decoding: {esc(results.model_family or results.name)} on "
            f"{esc(results.hardware)}</h1><dl class=\"meta\" id=\"meta\">{dl}</dl>"
            f"<p class=\"muted\">Source: {esc(origin)}.</p>{_busy_warning(results)}</header>")


def _busy_warning(results: ResultsFile) -> str:
    """A file measured on a busy machine says so before its verdict (``analysis/busy.py``)."""
    if not busy.busy(results):
        return ""
    return (f"<p class=\"warn\" id=\"busy-machine\">Measured on a busy machine — {esc(busy.describe(results) or '')}. "
            "Every tok/s here is the busy machine's (a target can run several times faster on a quiet one), and the "
            f"load may differ between rows: {esc(busy.WHAT_TO_DO)}.</p>")


# --------------------------------------------------------------------------- verdict

def _best_draft_cell(verdict: TargetVerdict) -> str:
    best = verdict.best
    if best is not None and best.name:          # measured in stages: the one best the verdict names
        css, note = {"recommend": ("good", ""), "shortlist": ("", " (leads the shortlist)"),
                     "nothing gains": ("", " (best measured; nothing gains)")}.get(best.decision,
                                                                                   ("", " (best so far)"))
        return (f"<span class=\"{css}\">{esc(best.name)}</span>" if css else esc(best.name)) + \
            (f" <span class=\"muted\">{esc(note.strip())}</span>" if note else "")
    rec, speed = verdict.recommended_draft, verdict.speedup
    if rec and speed and speed.significant:
        return f"<span class=\"good\">{esc(verdict.choice.recommended_label)}</span>"
    if rec:
        return f"{esc(rec)} <span class=\"muted\">(best measured)</span>"
    return "<span class=\"muted\">none recommended</span>"


def _verdict_notes(results: ResultsFile, target: str, verdict: TargetVerdict, level: int) -> list[str]:
    """Per-category change and output equivalence of the recommended draft; the baseline's drift."""
    notes = []
    rec = verdict.recommended_draft
    best = recommended_row(results, target, rec, verdict.draft_max, level) if rec else None
    baseline = results.baseline_for(target, level)
    if best is not None and baseline is not None:
        changes = category_changes(best, baseline)
        if changes:
            notes.append("by prompt type: " + ", ".join(f"{category_label(cat)} {signed_change(ratio)}"
                                                        for cat, ratio in changes))
        eq = best.equivalence or {}
        if eq.get("checked"):
            notes.append(f"output identical to the target alone on {eq['matched']}/{eq['compared']} requests")
    control = control_row(results, target, level)
    if control is not None:
        notes.append(f"baseline re-measured at the end: {describe_speedup(control.speedup)} drift")
    return notes


def _verdict_row(results: ResultsFile, target: str, entry: TargetVerdict, level: int, memory: bool) -> str:
    baseline = results.baseline_for(target, level)
    verdict = esc(entry.verdict)
    notes = _verdict_notes(results, target, entry, level)
    if notes:
        verdict += "<div class=\"muted small\">" + esc("; ".join(notes)) + "</div>"
    speedup = describe_speedup(entry.speedup) if entry.speedup else "—"
    acceptance = percent(entry.acceptance_rate) if entry.recommended_draft else "—"
    return ("<tr>"
            f"<td>{esc(target)}</td>"
            f"<td class=\"num\">{esc(num(baseline.mean_tps if baseline else None, '.1f', ' tok/s'))}</td>"
            f"<td>{_best_draft_cell(entry)}</td>"
            f"<td class=\"num\">{esc(speedup)}</td>"
            f"<td class=\"num\">{esc(acceptance)}</td>"
            + (f"<td class=\"num\">{esc(_memory_cell(entry))}</td>" if memory else "") +
            f"<td>{verdict}</td></tr>")


def _memory_cell(verdict: TargetVerdict) -> str:
    """What the best the verdict names costs over the target alone (analysis.memory_cost)."""
    name = verdict.best.name if verdict.best is not None and verdict.best.name else verdict.choice.recommended_label
    cost = verdict.memory.costs.get(name) if verdict.memory is not None and name else None
    return "—" if cost is None else cost.text() + (" (over the limit)" if cost.over else "")


def _summary_table(data: ReportData) -> str:
    """One row per target; the verdicts are the CLI's sentences (``analysis.recommend``)."""
    entries = {v.target: v for v in verdicts_of(data.results)}
    memory = any(v.memory is not None for v in entries.values())     # a column only where some server said
    body = [_verdict_row(data.results, target, entries.get(target) or TargetVerdict(target, ""), data.level, memory)
            for target in data.targets]
    if not body:
        body.append("<tr><td colspan=\"6\" class=\"muted\">No targets in this results file.</td></tr>")
    return ("<div class=\"table-wrap\"><table id=\"summary-table\"><thead><tr><th>Target</th><th>Baseline</th>"
            "<th>Best draft</th><th>Speed-up (95% CI)</th><th>Acceptance</th>"
            + ("<th>Memory added</th>" if memory else "") + "<th>Verdict</th></tr></thead><tbody>"
            + "".join(body) + "</tbody></table></div>" + _how_to_run(data, entries))


def _how_to_run(data: ReportData, entries: dict[str, TargetVerdict]) -> str:
    """The commands (LM Studio: settings) that run what each verdict recommends, as the console prints them."""
    blocks = []
    rerun = rerun_of(data.results)
    for target in data.targets:
        verdict = entries.get(target)
        commands = verdict.run_commands() if verdict is not None else []
        step = verdict.next_step if verdict is not None else None
        if step is not None:       # unresolved or a shortlist: the command that measures on (analysis/next_step.py)
            commands = [*commands, (step.lead(), step.command(rerun) if step.stages is not None else "")]
        if commands:
            blocks.append(f"<h3>{esc(target)}</h3>" + "".join(
                f"<p class=\"small\">{esc(lead)}{':' if text else '.'}</p>"
                + (f"<pre class=\"command\"><code>{esc(text)}</code></pre>" if text else "")
                for lead, text in commands))
    if not blocks:
        return ""
    return ("<div id=\"how-to-run\"><p class=\"lead\">How to run it: the exact server command each verdict "
            "recommends, without draftbench's own port, metrics, log-level and slot flags (add <code>--port N</code> "
            "if the server's default port is taken).</p>" + "".join(blocks) + "</div>")


# --------------------------------------------------------------------------- problems and theory

def _row_title(row: Row, multi_k: bool) -> str:
    return combination_title(row.role, row.target, row.draft, row.draft_max, show_k=multi_k,
                             concurrency=row.concurrency, synthetic=(row.synthetic or {}).get("level"))


def _problems_table(data: ReportData) -> str:
    problems = invalid_rows(data.results)
    if not problems:
        return "<p id=\"problems-none\">Every combination produced a valid measurement.</p>"
    rows = "".join(f"<tr><td>{esc(_row_title(p.row, data.multi_k))}</td><td class=\"state\">{esc(p.what)}</td>"
                   f"<td>{esc(p.reason)}</td></tr>" for p in problems)
    return ("<div class=\"table-wrap\"><table id=\"problems-table\"><thead><tr><th>Combination</th><th>Status</th>"
            f"<th>Reason</th></tr></thead><tbody>{rows}</tbody></table></div>"
            "<p class=\"muted\">None of these is counted as a speed-up anywhere in this report.</p>")


def _warnings_list(data: ReportData) -> str:
    warned = [r for r in data.results.results if r.warnings]
    if not warned:
        return ""
    items = "".join(f"<li><b>{esc(_row_title(r, data.multi_k))}</b><ul>"
                    + "".join(f"<li>{esc(w.message)}</li>" for w in r.warnings) + "</ul></li>" for r in warned)
    return (f"<details id=\"warnings\"><summary>Measurement warnings ({len(warned)} "
            f"combination{'s' if len(warned) != 1 else ''})</summary><ul>{items}</ul></details>")


def _problems(data: ReportData) -> str:
    return f"<section id=\"problems\"><h2>Problems</h2>{_problems_table(data)}{_warnings_list(data)}</section>"


def _cost_text(theory: Theory) -> str:
    cost = num(theory.cost_ratio, ".3f")
    source = theory.cost_source or ""
    if theory.cost_ratio is not None and source:
        cost += " (measured)" if source.startswith("measured") else " (from file sizes)"
    return cost


def _theory_row(row: Row, theory: Theory, multi_k: bool) -> str:
    best_k = ("n/a" if theory.best_k is None
              else f"{theory.best_k} (→ {num(theory.predicted_at_best_k, '.2f', '×')})")
    cells = [_row_title(row, multi_k), percent(row.acceptance_rate), num(theory.alpha, ".3f"),
             num(theory.k_mean, ".2f"), num(theory.tokens_per_step, ".2f"), _cost_text(theory),
             num(theory.predicted_speedup, ".2f", "×"), num(theory.measured_speedup, ".2f", "×"), best_k]
    return "<tr>" + "".join(f"<td{' class=num' if i > 0 else ''}>{esc(v)}</td>" for i, v in enumerate(cells)) + "</tr>"


THEORY_INTRO = (
    "<p>With per-token acceptance probability α and k drafted tokens per step, one verification step yields "
    "on average τ = (1 − α<sup>k+1</sup>) / (1 − α) tokens and costs (1 + c·k) target-token times, where c "
    "is the draft's cost relative to the target, so the expected speed-up is S = τ / (1 + c·k) (Leviathan "
    "et al., 2023). It assumes verifying k+1 tokens costs as much as generating one (memory-bound decoding); "
    "on CPUs the measured speed-up falls short of S. c is measured when the sweep ran each draft alone "
    "(<code>settings.draft_alone</code>), otherwise estimated from file sizes; n/a when neither is "
    "available.</p>")


def _theory(data: ReportData) -> str:
    body = "".join(_theory_row(r, r.theory, data.multi_k) for r in data.results.results
                   if r.role is Role.SPECULATIVE and r.theory is not None)
    if not body:
        return ""
    return ("<section id=\"theory\"><h2>Theory vs measurement</h2>" + THEORY_INTRO
            + "<details open><summary>Per combination</summary><div class=\"table-wrap\"><table id=\"theory-table\">"
            "<thead><tr><th>Combination</th><th>Acceptance</th><th>α</th><th>k̄</th><th>τ (tokens/step)</th>"
            "<th>c (cost ratio)</th><th>Predicted S</th><th>Measured S</th><th>Textbook best k (S)</th></tr></thead>"
            "<tbody>" + body + "</tbody></table></div></details></section>")


HOW_TO_READ = """
<section id="how-to-read"><h2>How to read this</h2><ul>
<li><b>Speed-up</b> is the decode speed (generated tokens per second after the first token) with the draft, relative
to the same target alone on the same prompts. +50% means 1.5× faster; negative values are slowdowns: the draft costs
more than it saves.</li>
<li><b>95% CI</b>: where each request was recorded, requests are paired by prompt and repetition and the interval
says how sure the estimate is. <b>not significant</b> / <b>n.s.</b>: the interval does not lie wholly beyond the noise
floor (above +floor or below &minus;floor) &mdash; treat it as &ldquo;no difference&rdquo;. Files without per-request data (such as upstream
draftbench files) only have ratios of means, so significance is unknown.</li>
<li><b>Acceptance</b> is accepted / drafted tokens over all requests. High acceptance with a small or negative
speed-up means the draft is too slow; low acceptance means it predicts the target badly.</li>
<li><b>Size classes</b> come from the parameter count in the draft's label (0.5B, 1.5B, 135M&hellip;) or its GGUF
metadata; drafts without one form an &ldquo;unknown size&rdquo; class. The bar charts show the fastest draft of each
class; the heatmap shows every draft.</li>
<li><b>Model-free methods</b> (n-gram lookup) load no draft model: they form the &ldquo;no draft model&rdquo;
class. A hybrid (a draft plus an n-gram method) is classed by its draft's size.</li>
<li><b>loops</b> in a cell: the target's own output repeats one pattern on some of these requests (a base model
answering a chat request, a too-small model). Any draft or n-gram method predicts a loop trivially, so such a
speed-up does not carry over to real text; the row's warning gives the speed-up without those requests.</li>
<li><b>Grey cells</b> are combinations without a valid speed-up: <i>error</i>, <i>skipped</i>, <i>inactive</i>
(the server ran but the draft never drafted a token), <i>eliminated</i> (the adaptive search stopped measuring it
after its probe showed it could not win; hover for its probe numbers), <i>no baseline</i> or <i>not run</i>. They are never counted
as speed-ups; the reasons are listed under Problems.</li>
<li>Hover over any bar, cell or point for tok/s, acceptance and time to first token. Charts are interactive:
click legend entries to hide series, drag to zoom, double-click to reset.</li>
</ul></section>
"""


# --------------------------------------------------------------------------- charts

def _figure_html(fig: Figure, div_id: str) -> str:
    height = fig["layout"].get("height", 450)
    return pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div_id, default_width="100%",
                       default_height=f"{height}px", validate=True,
                       config={"displaylogo": False, "responsive": True,
                               "toImageButtonOptions": {"filename": div_id}})


def _chart_section(chart: Chart, data: ReportData) -> str:
    div_id = chart.chart_id
    fig = chart.build(data)
    if not has_data(fig):      # nothing to draw: say why, and draw no empty axes
        lead = chart.lead(data)
        why = (fig["layout"].get("meta") or {}).get("empty") or "nothing in this file to draw."
        return (f"<section class=\"chart-empty\" id=\"{div_id}-section\"><h2>{esc(chart.title)}</h2>"
                f"<p class=\"lead\">{esc(lead)}</p>"
                + ("" if why.rstrip(".") in lead else f"<p class=\"muted\">Not drawn: {esc(why)}</p>")
                + "</section>")
    return (f"<section class=\"chart-section\" id=\"{div_id}-section\"><h2>{esc(chart.title)}</h2>"
            f"<p class=\"lead\">{esc(chart.lead(data))}</p>"
            f"<div class=\"chart\">{_figure_html(fig, div_id)}</div></section>")


def _plotly_script(cdn: bool) -> str:
    if cdn:
        url = f"https://cdn.plot.ly/plotly-{get_plotlyjs_version()}.min.js"
        return f"<script src=\"{esc(url)}\" charset=\"utf-8\"></script>"
    return f"<script type=\"text/javascript\">{get_plotlyjs()}</script>"


def figure_div(fig: Figure, div_id: str) -> str:
    """One figure as a ``<div>`` (plotly.js loaded once per page by :func:`plotly_script`)."""
    return _figure_html(fig, div_id)


def plotly_script(cdn: bool) -> str:
    """plotly.js for a page: embedded, or linked from its CDN."""
    return _plotly_script(cdn)


# --------------------------------------------------------------------------- the page

def render_report(results: ResultsFile, *, cdn: bool = False) -> str:
    """The whole page as a string; depends only on ``results`` (and this package's plotly). Analysed results (a
    sweep's outcome) are shown as they are; a file as loaded is analysed first."""
    shown = displayable(results)
    results = shown if shown is results and summary_of(results) is not None else analyze(shown)
    data = build_data(results)
    title = f"draftbench — {results.name} ({results.hardware}, {results.backend})"
    return "\n".join([
        "<!DOCTYPE html>",
        "<html lang=\"en\"><head><meta charset=\"utf-8\">",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
        f"<title>{esc(title)}</title>",
        f"<meta name=\"generator\" content=\"draftbench {esc(__version__)}\">",
        f"<style>{CSS}</style>",
        _plotly_script(cdn),
        "</head><body><main>",
        _header(results),
        "<section id=\"summary\"><h2>Verdict</h2>" + _summary_table(data) + "</section>",
        HOW_TO_READ,
        *(_chart_section(chart, data) for chart in CHARTS if chart.shown(data)),
        inside_table(data),
        methods_section(data),
        topology_section(data),
        stages_section(data),
        race_section(data),
        _problems(data),
        _theory(data),
        f"<footer>Generated by draftbench {esc(__version__)} from the results file alone; "
        "re-create it with <code>python sweep.py --chart-only --results FILE</code>.</footer>",
        "</main></body></html>",
    ]) + "\n"


def write_report(results: ResultsFile, path: str | os.PathLike, *, cdn: bool = False) -> Path:
    """Render and write (atomically to a regular file; see :func:`draftbench.common.files.write_output_text`)."""
    return write_output_text(path, render_report(results, cdn=cdn))
