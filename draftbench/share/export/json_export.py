"""Flat JSON: ``{"tool", "kind", "meta", "columns", "rows"}``, every row an object of plain values in
column order — for spreadsheets, notebooks and jq. Strict JSON: a value that was not measured is
``null``, never NaN."""

from __future__ import annotations

import json

from ... import __version__
from ...results.file import finite_json
from .table import Table


def export_json(table: Table) -> str:
    payload = {"tool": "draftbench", "tool_version": __version__, "kind": table.kind, "meta": table.meta,
               "columns": list(table.columns),
               "rows": [{c: record.get(c) for c in table.columns} for record in table.records]}
    return json.dumps(finite_json(payload), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
