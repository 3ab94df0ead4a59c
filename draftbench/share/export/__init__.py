"""Exports of a results file or a comparison (``sweep.py --export md|csv|json``): :mod:`.table`
decides what a row holds; one exporter per format lays it out."""

from __future__ import annotations

from collections.abc import Callable

from .csv_export import export_csv
from .json_export import export_json
from .markdown import export_markdown
from .table import Table, comparison_table, results_table

EXPORTERS: dict[str, Callable[[Table], str]] = {
    "md": export_markdown,
    "csv": export_csv,
    "json": export_json,
}
FORMATS = tuple(EXPORTERS)


def export(table: Table, fmt: str) -> str:
    """``table`` in format ``fmt`` (one of :data:`FORMATS`)."""
    return EXPORTERS[fmt](table)


__all__ = ["EXPORTERS", "FORMATS", "Table", "comparison_table", "export", "export_csv", "export_json",
           "export_markdown", "results_table"]
