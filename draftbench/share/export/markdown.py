"""Markdown, as hyperfine's ``--export-markdown`` lays it out: one header row, an alignment row,
numbers right-aligned, the combination in backticks."""

from __future__ import annotations

from .table import Table


def cell(text: str) -> str:
    """A table cell: a ``|`` would end the cell and a newline the row."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def export_markdown(table: Table) -> str:
    lines = ["| " + " | ".join(cell(h.title) for h in table.headings) + " |",
             "|" + "|".join(":---" if h.align == "left" else "---:" for h in table.headings) + "|"]
    lines += ["| " + " | ".join(cell(t) for t in row) + " |" for row in table.text]
    return "\n".join(lines) + "\n"
