"""Markdown, as hyperfine's ``--export-markdown`` lays it out: one header row, an alignment row,
numbers right-aligned, the combination in backticks."""

from __future__ import annotations

import re

from .table import Table


def cell(text: str) -> str:
    """A table cell: a ``|`` would end the cell and a newline the row."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def export_markdown(table: Table) -> str:
    lines = ["| " + " | ".join(cell(h.title) for h in table.headings) + " |",
             "|" + "|".join(":---" if h.align == "left" else "---:" for h in table.headings) + "|"]
    lines += ["| " + " | ".join(cell(t) for t in row) + " |" for row in table.text]
    return "\n".join(lines) + "\n" + _verdicts(table.meta.get("verdicts") or [])


def _verdicts(verdicts: list[dict]) -> str:
    """Each target's verdict, ending with the command that runs it (one code block per line)."""
    if not verdicts:
        return ""
    out = ["", "## Verdict", ""]
    for entry in verdicts:
        out += [str(entry.get("verdict") or entry.get("target")), ""]    # the verdict names its target
        for run in entry.get("run") or []:
            text = str(run.get("line"))
            fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
            out += [f"{cell(str(run.get('what')))}:", "", fence, text, fence, ""]
    return "\n".join(out)
