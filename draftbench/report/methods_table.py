"""The report's "Speculative configurations" table: for every measured configuration, the exact
speculative flags its server ran with, the methods the server said were active, and each
method's own statistics (a hybrid's draft and n-gram parts separately).

Charts show speed; this table shows *why*: which part of a hybrid drafted what, and what it cost.
Shown only when some row names a candidate or recorded per-method statistics.
"""

from __future__ import annotations

import os
import shlex

from ..common.percent import percent
from ..results.file import Row, combination_title
from ..results.kinds import Role, Status
from .text import esc, num
from .view import ReportData

# Flags (and their value) that say how a llama-server speculates; the draft's path is shortened to its name.
_DRAFT_MODEL_FLAGS = ("-md", "--model-draft", "--spec-draft-model")
_SPEC_FLAGS = (*_DRAFT_MODEL_FLAGS, "-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft", "--draft-max",
               "--draft-min", "--draft-p-min")


def speculative_flag_groups(command: list | str | None) -> list[str]:
    """The speculative part of a recorded server command, one flag with its value per item
    (``["--spec-type ngram-mod", "--spec-ngram-mod-n-match 24"]``); [] when none was recorded.
    vLLM's ``--speculative-config`` counts too."""
    if isinstance(command, str):
        try:
            command = shlex.split(command)
        except ValueError:
            return []
    if not isinstance(command, list):
        return []
    out: list[str] = []
    for i, arg in enumerate(command):
        arg = str(arg)
        if not (arg.startswith("--spec") or arg in _SPEC_FLAGS):
            continue
        value = str(command[i + 1]) if i + 1 < len(command) else None
        if value is not None and not (value.startswith("-") and not value.lstrip("-").replace(".", "").isdigit()):
            arg += " " + (os.path.basename(value) if arg in _DRAFT_MODEL_FLAGS else value)
        out.append(arg)
    return out


def speculative_flags(command: list | str | None) -> str:
    """:func:`speculative_flag_groups` as one line."""
    return " ".join(speculative_flag_groups(command))


def _method_cells(row: Row) -> str:
    stats = row.method_stats or {}
    if not stats:
        drafted = "n/a" if row.draft_n is None else f"{row.draft_n} drafted, {row.draft_n_accepted} accepted"
        return f"<td class=\"muted\" colspan=\"5\">{esc('no per-method statistics (' + drafted + ')')}</td>"
    lines = [[esc(impl), esc(fig.get("gen_tokens", "n/a")), esc(fig.get("acc_tokens", "n/a")),
              esc(percent(fig.get("acceptance_rate"))), esc(num(fig.get("mean_accepted_len"), ".2f"))]
             for impl, fig in stats.items()]
    columns = zip(*lines)
    # one line per method in every column, so a method's figures stay level with its name
    return "".join(f"<td style=\"white-space: nowrap\"{' class=num' if i else ''}>{'<br>'.join(col)}</td>"
                   for i, col in enumerate(columns))


def _row_html(row: Row, multi_k: bool) -> str:
    title = combination_title(row.role, row.target, row.draft, row.draft_max, show_k=multi_k)
    active = row.active_methods
    active_text = "not reported" if active is None else (", ".join(active) or "none (plain decoding)")
    flags = " ".join(f"<span style=\"white-space: nowrap\">{esc(group)}</span>"
                     for group in speculative_flag_groups((row.server or {}).get("command")))
    return (f"<tr><td>{esc(title)}</td><td><code>{flags or '—'}</code></td>"
            f"<td>{esc(active_text)}</td>{_method_cells(row)}</tr>")


def methods_section(data: ReportData) -> str:
    """The section's HTML; '' for sweeps of plain draft files without per-method statistics."""
    rows = [r for r in data.results.results if r.role in (Role.BASELINE, Role.SPECULATIVE) and r.status is Status.OK]
    if not any(r.candidate or r.method_stats for r in rows):
        return ""
    body = "".join(_row_html(r, data.multi_k) for r in rows)
    return ("<section id=\"methods\"><h2>Speculative configurations</h2>"
            "<p class=\"lead\">The exact speculative flags of each server, the methods it said it ran "
            "(llama.cpp's <code>/slots</code>), and each method's own counters from its trace-level "
            "statistics lines: a hybrid's parts are listed separately. Drafted and accepted are tokens over "
            "the measured requests; tokens per step is llama.cpp's mean accepted length. A row's requests ran in "
            "order on one server, so methods that learn across requests (<code>ngram-mod</code>, "
            "<code>ngram-cache</code>) are measured over that session, as a chat client would see them.</p>"
            "<details open><summary>Per configuration</summary><div class=\"table-wrap\"><table id=\"methods-table\">"
            "<thead><tr><th>Configuration</th><th>Speculative flags</th><th>Active methods</th><th>Method</th>"
            "<th>Drafted</th><th>Accepted</th><th>Acceptance</th><th>Tokens / step</th></tr></thead><tbody>"
            + body + "</tbody></table></div></details></section>")
