"""The whole results-file format, derived from the classes' declarations (never written again here).

:func:`first_problem` checks a parsed file against it (``ResultsFile.from_dict`` does so on every
load); :func:`format_snapshot` is what ``tests/golden/results_keys.json`` locks (written by
``DRAFTBENCH_UPDATE_GOLDEN=1 pytest tests/test_results_file.py``): every key's JSON path, type and unit, and
the order of the main objects' keys.
"""

from __future__ import annotations

from typing import Any

from .file import SCHEMA_VERSION, UPSTREAM_ROW_KEYS, RequestRecord, ResultsFile, Row
from .json_types import MAX_FREE_DEPTH, Free, Obj, OneOf, Spec, spec_of

__all__ = ["MAX_FREE_DEPTH", "REQUEST", "RESULTS_FILE", "ROW", "first_problem", "format_snapshot"]

ROW = spec_of(Row)
REQUEST = spec_of(RequestRecord)
RESULTS_FILE = spec_of(ResultsFile)


def first_problem(data: Any) -> tuple[str, str] | None:
    """``(json_path, message)`` of the first value in a parsed results file that has the wrong type."""
    return None if RESULTS_FILE.valid(data) else RESULTS_FILE.check(data, "$")


def _type(spec: Spec, required: bool, unit: str | None) -> str:
    text = spec.type_name() + (" or null" if spec.nullable and not isinstance(spec, Free) else "")
    if required:
        text += ", required"
    return text + (f" [{unit}]" if unit else "")


def _walk(spec: Spec, path: str, out: dict[str, str]) -> None:
    if isinstance(spec, OneOf):          # its options' keys live at the same path
        for option in spec.options:
            _walk(option, path, out)
        return
    for suffix, child in spec.children():
        key = suffix[1:]
        required = isinstance(spec, Obj) and key in spec.required
        out[path + suffix] = _type(child, required, spec.units.get(key) if isinstance(spec, Obj) else None)
        _walk(child, path + suffix, out)


def format_snapshot() -> dict[str, Any]:
    """The results format as the golden file holds it: the key order of the main objects and the type
    (and unit) of every declared JSON path, ``[]`` for a list's items, ``*`` for a name the data picks."""
    types: dict[str, str] = {}
    _walk(RESULTS_FILE, "$", types)
    upstream = ResultsFile(name="n", hardware="h", backend="b", model_family="f", settings={}, schema_version=None,
                           tool=None)
    return {
        "_comment": "Derived from the declarations in draftbench/results (DRAFTBENCH_UPDATE_GOLDEN=1 pytest "
                    "tests/test_results_file.py writes it); the test checks that no key, order, type or unit of "
                    "this schema version's format changed. Adding an optional field needs no change here.",
        "schema_version": SCHEMA_VERSION,
        "upstream_row_keys": list(UPSTREAM_ROW_KEYS),
        "row_keys": list(Row(target="t").to_dict()),
        "request_keys": list(RequestRecord("p", "c", 0).to_dict()),
        "file_keys": list(ResultsFile(name="n", hardware="h", backend="b", model_family="f", settings={}).to_dict()),
        "upstream_file_keys": list(upstream.to_dict()),
        "types": types,
    }
