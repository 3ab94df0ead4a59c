"""Markdown, as hyperfine's ``--export-markdown`` lays it out: one header row, an alignment row,
numbers right-aligned, the combination in backticks.

Every text from a results file or a user goes through :mod:`.markdown_text` (labels, reasons, the
verdict's prose and its "Run it" / "For …" lines), so none becomes a link, an image, a heading or HTML.
"""

from __future__ import annotations

import re

from ...analysis.next_step import CONFIG_PLACEHOLDER
from ...analysis.summary import TargetVerdict
from .markdown_text import plain
from .table import Table


def cell(text: str) -> str:
    """A table cell: a ``|`` would end the cell and a newline the row (inside a code span too, in GFM)."""
    return text.replace("\r", " ").replace("\n", " ").replace("|", "\\|")


def export_markdown(table: Table) -> str:
    lines = ["| " + " | ".join(cell(h.title) for h in table.headings) + " |",
             "|" + "|".join(":---" if h.align == "left" else "---:" for h in table.headings) + "|"]
    lines += ["| " + " | ".join(cell(t) for t in row) + " |" for row in table.text]
    rerun = str(table.meta.get("rerun") or f"python sweep.py --config {CONFIG_PLACEHOLDER}")
    return "\n".join(lines) + "\n" + _verdicts(table.verdicts, rerun)


def _verdicts(verdicts: tuple[TargetVerdict, ...], rerun: str) -> str:
    """Each target's verdict, ending with the command that runs it (one code block per line)."""
    if not verdicts:
        return ""
    out = ["", "## Verdict", ""]
    for verdict in verdicts:
        out += [plain(verdict.verdict or verdict.target), ""]    # the verdict names its target
        for what, line in verdict.run_commands():
            out += _command_block(what, line)
        step = verdict.next_step       # unresolved or a shortlist: the command that measures on
        if step is not None and step.stages is not None:
            out += _command_block(step.lead(), step.command(rerun))
        elif step is not None:
            out += [plain(step.lead()) + ".", ""]
    return "\n".join(out)


def _command_block(what: str, line: str) -> list[str]:
    text = " ".join(line.split())      # one line: a fenced block ends at a fence line
    fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
    return [f"{plain(what)}:", "", fence, text, fence, ""]
