"""CSV: one row per combination, the columns of :class:`table.Table` in order. An empty field is a
value that was not measured (never 0); booleans are ``true``/``false``."""

from __future__ import annotations

import csv
import io
from typing import Any

from .table import Table


def field_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def export_csv(table: Table) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.columns)
    for record in table.records:
        writer.writerow([field_text(record.get(c)) for c in table.columns])
    return out.getvalue()
