"""The comparison report (``sweep.py --compare … --chart FILE``): one self-contained page built from
the report's pieces — its theme, text helpers, layout, per-file heatmap and page scaffolding.

Sections: the files, how they differ (what was measured first), the row-by-row table, each
file's speed-up side by side, heatmaps of the difference, each file's own heatmap, and the
combinations only one file holds. Every string from a results file goes through :func:`text.esc`
(HTML) or :func:`text.plotly_text` (figures).
"""

from __future__ import annotations

import os
from itertools import groupby
from pathlib import Path

from .. import __version__
from ..analysis.verdict import analyze
from ..common.files import write_output_text
from ..common.text_safety import safe_text
from ..share.compare import ComparedFile, Comparison, DiffKind, compare
from ..share.compare.text import (
    BEST_TITLE,
    NOT_SIGNIFICANT_MEANS,
    agreement,
    best_table,
    change_columns,
    no_interval_reasons,
    short_name,
    table_rows,
)
from .compare_figures import difference_heatmap_figure, speculative_rows, speedup_by_file_figure
from .figures import heatmap_figure
from .page import figure_div, plotly_script
from .text import date_text, displayable, esc
from .theme import CSS, MUTED
from .view import build_data

EXTRA_CSS = f"""
.warn {{ color: #ffb703; }}
#compare-table td, #compare-table th {{ white-space: normal; overflow-wrap: normal; }}
#compare-table td:first-child {{ min-width: 12em; }}
#files-table td, #files-table th {{ overflow-wrap: normal; }}
.files td:first-child {{ font-weight: 650; }}
.note {{ color: {MUTED}; font-size: .9rem; }}
"""


SHOWN_SETTINGS = ("runs", "max_tokens", "temperature", "gpu_layers")


def _files(comparison: Comparison) -> str:
    rows = []
    for f in comparison.files:
        r = f.results
        versions = ", ".join(dict.fromkeys(str(v) for row in r.results if (v := (row.server or {}).get("version"))))
        measured = "; ".join(f"{k} {v}" for k, v in r.recorded_settings(SHOWN_SETTINGS).items() if v is not None)
        cells = [f.letter, f.name, r.hardware, r.backend, r.name, versions or "not recorded",
                 "upstream (no per-request data)" if r.is_upstream else f"schema\u00a0{r.schema_version}",
                 measured or "—", date_text(r.timestamp)]
        rows.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("", "File", "Hardware", "Backend", "Sweep", "Server version", "Data",
                                             "Settings", "Date"))
    return (f"<header><h1>draftbench — {len(comparison.files)} results files compared</h1>"
            f"<div class=\"table-wrap\"><table class=\"files\" id=\"files-table\"><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>"
            "<p class=\"note\">Each change is measured against the first file (in this order) that has the "
            "combination.</p></header>")


def _differences(comparison: Comparison) -> str:
    letters = comparison.letters
    measured = [d for d in comparison.differences if d.kind is DiffKind.MEASUREMENT]
    other = [d for d in comparison.differences if d.kind is not DiffKind.MEASUREMENT]
    parts = ["<section id=\"differences\"><h2>How the files differ</h2>"]
    if measured:
        parts.append("<p class=\"warn\" id=\"measurement-warning\">Warning: the files differ in what was measured, "
                     "so their rows do not compare like for like:</p><ul id=\"measurement-differences\">"
                     + "".join(f"<li>{esc(d.message(letters))}</li>" for d in measured) + "</ul>")
    if other:
        parts.append("<p>They also differ in:</p><ul id=\"other-differences\">"
                     + "".join(f"<li>{esc(d.message(letters))}</li>" for d in other) + "</ul>")
    if not comparison.differences:
        parts.append(f"<p>{esc(agreement(comparison))}</p>")
    return "".join(parts) + "</section>"


def _table(comparison: Comparison) -> str:
    if not comparison.rows:
        return ("<section id=\"rows\"><h2>Row by row</h2><p id=\"no-common-rows\">No combination is in more than "
                "one file: nothing to compare row by row (rows match on target, candidate and settings).</p>"
                "</section>")
    header, body = table_rows(comparison)
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    rows = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>" for cells in body)
    notes = []
    if any(c.significant is False for row in comparison.rows for c in row.changes):
        notes.append(NOT_SIGNIFICANT_MEANS)
    reasons = no_interval_reasons(comparison)
    if reasons:
        notes.append("no CI: significance unknown because " + "; ".join(reasons) + ".")
    pairs = ", ".join(f"{comparison.letters[i]} vs {comparison.letters[r]}" for i, r in change_columns(comparison))
    lead = (f"tok/s of every combination in each file and the change between files ({pairs}): the ratio of "
            "decode speeds with its 95% interval. The speed-up columns are each file's own speed-up over its "
            "baseline.")
    return (f"<section id=\"rows\"><h2>Row by row</h2><p class=\"lead\">{esc(lead)}</p>"
            f"<div class=\"table-wrap\"><table id=\"compare-table\"><thead><tr>{head}</tr></thead><tbody>{rows}"
            "</tbody></table></div>" + "".join(f"<p class=\"note\">{esc(n)}</p>" for n in notes) + "</section>")


def _best(comparison: Comparison) -> str:
    header, body = best_table(comparison)
    if not body:
        return ""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    rows = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>" for cells in body)
    return (f"<section id=\"best-per-target\"><h2>Each file's verdict</h2><p class=\"lead\">{esc(BEST_TITLE)} "
            "This needs no matching rows: files of different models compare on what each one concluded.</p>"
            f"<div class=\"table-wrap\"><table id=\"best-table\"><thead><tr>{head}</tr></thead><tbody>{rows}"
            "</tbody></table></div></section>")


def _chart(div_id: str, title: str, lead: str, fig: dict) -> str:
    return (f"<section class=\"chart-section\" id=\"{div_id}-section\"><h2>{esc(title)}</h2>"
            f"<p class=\"lead\">{esc(lead)}</p><div class=\"chart\">{figure_div(fig, div_id)}</div></section>")


def _charts(comparison: Comparison) -> list[str]:
    if not speculative_rows(comparison):
        return ["<section id=\"charts-none\"><h2>Speed-ups side by side</h2><p>No speculative combination with a "
                "valid speed-up is in more than one file, so there is nothing to draw side by side.</p></section>"]
    letters = comparison.letters
    out = [_chart("chart-compare-speedup", "Speed-up in each file",
                  "Each file's speed-up over its own baseline, for the combinations two files or more hold. "
                  "Whiskers: each row's own 95% interval, for that combination alone; faded bars are not significant.",
                  speedup_by_file_figure(comparison))]
    for i in range(1, len(comparison.files)):
        out.append(_chart(f"chart-difference-{letters[i]}", f"Difference: {letters[i]} − {letters[0]}",
                          f"Speed-up in {letters[i]} minus speed-up in {letters[0]}, in percentage points. Blue: "
                          f"the pair pays more in {letters[i]}; red: less. Grey cells have no valid speed-up in "
                          "one of the files, and say why.", difference_heatmap_figure(comparison, i, 0)))
    return out


def _own_heatmaps(comparison: Comparison) -> str:
    parts = []
    for f in comparison.files:
        data = build_data(f.results)
        if not data.columns or not data.targets:
            continue
        parts.append(f"<h3>{esc(f.letter)}: {esc(f.name)}</h3>"
                     + figure_div(heatmap_figure(data), f"chart-file-{f.letter}"))
    if not parts:
        return ""
    return ("<section id=\"each-file\"><h2>Each file on its own</h2><details><summary>Every target × draft of "
            "each file, as in its own report</summary>" + "".join(parts) + "</details></section>")


def _only_in(comparison: Comparison) -> str:
    items = []
    for f, matches in zip(comparison.files, comparison.only_in):
        if not matches:
            continue
        by_target = "".join(f"<li>{esc(target)}: {esc(', '.join(short_name(m) for m in group))}</li>"
                            for target, group in groupby(matches, key=lambda m: m.target))
        items.append(f"<li><b>Only in {esc(f.letter)}</b> ({len(matches)} combination"
                     f"{'s' if len(matches) != 1 else ''}):<ul>{by_target}</ul></li>")
    if not items:
        return ""
    return ("<section id=\"only-in\"><h2>Combinations only one file holds</h2><ul>" + "".join(items)
            + "</ul></section>")


HOW_TO_READ = """
<section id="how-to-read"><h2>How to read this</h2><ul>
<li><b>Rows match</b> on role, target label, candidate label, draft length and the candidate's method and
parameters. Label your models the same way on every machine to compare them.</li>
<li><b>B vs A</b> is B's decode tok/s over A's for the same combination: 1.20x faster means B decodes 20% faster.
Where both files ran the same requests (same prompts, prompt token counts, max_tokens, temperature and seed) the
requests are paired by prompt and repetition; otherwise they are compared unpaired (Welch). Files without
per-request data give ratios of means without an interval (<b>no CI</b>).</li>
<li><b>not significant</b>: the 95% interval does not lie wholly beyond the noise floor (above 1 + floor or below 1 / (1 + floor)).</li>
<li><b>Speed-up</b> columns and bars are each file's own speed-up over its own baseline: that is how much the
draft pays on that machine or build.</li>
</ul></section>
"""


def render_comparison(comparison: Comparison, *, cdn: bool = False) -> str:
    """The whole comparison page; depends only on the compared files."""
    comparison = compare([ComparedFile(f.letter, safe_text(f.path), analyze(displayable(f.results)))
                          for f in comparison.files])     # text made visible first, as in the report
    title = "draftbench — " + " vs ".join(f"{f.letter} {f.results.hardware}" for f in comparison.files)
    return "\n".join([
        "<!DOCTYPE html>",
        "<html lang=\"en\"><head><meta charset=\"utf-8\">",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
        f"<title>{esc(title)}</title>",
        f"<meta name=\"generator\" content=\"draftbench {esc(__version__)}\">",
        f"<style>{CSS}{EXTRA_CSS}</style>",
        plotly_script(cdn),
        "</head><body><main>",
        _files(comparison),
        _differences(comparison),
        _table(comparison),
        _best(comparison),
        *_charts(comparison),
        _own_heatmaps(comparison),
        _only_in(comparison),
        HOW_TO_READ,
        f"<footer>Generated by draftbench {esc(__version__)} from the results files alone; re-create it with "
        "<code>python sweep.py --compare FILE FILE … --chart PATH</code>.</footer>",
        "</main></body></html>",
    ]) + "\n"


def write_comparison(comparison: Comparison, path: str | os.PathLike, *, cdn: bool = False) -> Path:
    """Render and write atomically."""
    return write_output_text(path, render_comparison(comparison, cdn=cdn))
