"""CSV: one row per combination, the columns of :class:`table.Table` in order. An empty field is a
value that was not measured (never 0); booleans are ``true``/``false``.

The file is meant to be shared and opened in spreadsheets, which run a cell that starts with ``=``,
``+``, ``-`` or ``@`` (and, in some, a tab or carriage return) as a formula: a label such as
``=cmd|' /C calc'!A0`` would be a command. Text cells that start so get a leading ``'`` (OWASP's
advice: the spreadsheet shows the text as text); numbers are written as numbers, negative ones too."""

from __future__ import annotations

import csv
import io
from typing import Any

from .table import Table

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def field_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value if value.startswith(FORMULA_STARTS) else value
    return str(value)


def export_csv(table: Table) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.columns)
    for record in table.records:
        writer.writerow([field_text(record.get(c)) for c in table.columns])
    return out.getvalue()
