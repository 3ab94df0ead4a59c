"""One settings key: its declaration (:class:`Field`), the validation of a value against it, and the
error for a key nobody reads.

A leaf module (only :mod:`draftbench.common`), so that :mod:`draftbench.config.settings` and every
backend declare their keys with it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..common.errors import Problem
from ..common.suggest import did_you_mean

SPEC = "draftbench.field"      # the key of a dataclass field's metadata that holds its Field


class _Unrecorded:
    def __repr__(self) -> str:
        return "UNRECORDED"


UNRECORDED: Any = _Unrecorded()   # Field.older: a results file without the key is not compared on it


@dataclass(frozen=True)
class Field:
    """One settings key: its type, default, bounds and a line of documentation."""

    kind: str                     # "int" | "float" | "bool" | "str" | "str_list" | "int_or_list" | "any"
    default: Any = None
    doc: str = ""
    min: float | None = None
    max: float | None = None
    choices: tuple | None = None
    nullable: bool = True         # null means "use the default"
    min_exclusive: bool = False
    measured: bool = False        # changes what is measured: a results file made with another value is not resumed
    # What a results file written before this key existed was measured with (its rows are compared with
    # that on resume, and read back with it); UNRECORDED: such a file is not compared on this key.
    older: Any = UNRECORDED


def setting(kind: str, default: Any = None, doc: str = "", **spec: Any) -> Any:
    """A dataclass field declared by its :class:`Field` (carried as metadata): the one place a settings
    key's type, default, bounds and documentation are written."""
    declared = Field(kind, default, doc, **spec)
    metadata = {SPEC: declared}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def declared_fields(cls: type) -> dict[str, Field]:
    """A settings dataclass's keys and their Fields, in declaration order."""
    return {f.name: f.metadata[SPEC] for f in dataclasses.fields(cls) if SPEC in f.metadata}


def read_value(value: Any, spec: Field) -> Any:
    """A value from a results file as its Field reads it: the value when it has the Field's type (bounds and
    choices are what a config may ask for; a file records what was run), else the default (a file we did not
    write may hold anything: it is read, never refused, here)."""
    found: list[Problem] = []
    clean = check_value("$", value, dataclasses.replace(spec, min=None, max=None, choices=None), found)
    if found:
        return list(spec.default) if isinstance(spec.default, list) else spec.default
    return clean



def unknown_key(path: str, key: str, known, *, other_backends: dict[str, str] | None = None) -> Problem:
    """An error for a key nobody reads: a typo must never fall back to the default quietly
    (``settings.max_token`` once ran 512 tokens). ``other_backends``: key → the backend that reads it."""
    owner = (other_backends or {}).get(key)
    if owner:
        return Problem(path, f"is a setting of backend {owner}, which this config does not use",
                       f"remove it, or set \"backend\": \"{owner}\"")
    return Problem(path, "unknown key", did_you_mean(key, sorted(known)))


def check_value(path: str, value: Any, spec: Field, problems: list[Problem]) -> Any:
    """Validate one value against its spec; append problems; return the cleaned value."""
    if value is None:
        if spec.nullable:
            return spec.default
        problems.append(Problem(path, "must not be null", "give a value or remove the key to use the default"))
        return spec.default

    def bounded(v, kind_name, where=path):
        if spec.min is not None and (v < spec.min or (spec.min_exclusive and v == spec.min)):
            problems.append(Problem(where, f"is {v}; must be {'>' if spec.min_exclusive else '≥'} {spec.min:g}",
                                    f"use a {kind_name} of at least {spec.min:g}"))
        if spec.max is not None and v > spec.max:
            problems.append(Problem(where, f"is {v}; must be ≤ {spec.max:g}", f"use a {kind_name} of at most "
                                    f"{spec.max:g}"))
        return v

    def numeric_text(v) -> bool:
        try:
            return isinstance(v, str) and math.isfinite(float(v))
        except ValueError:
            return False

    kind = spec.kind
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            hint = f"write {value} without quotes" if isinstance(value, str) and value.strip().lstrip("-").isdigit() \
                else "use a whole number"
            problems.append(Problem(path, f"must be an integer, not {type(value).__name__} {json.dumps(value)}", hint))
            return spec.default
        return bounded(value, "number")
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            hint = f"write {value} without quotes" if numeric_text(value) else "use a finite number"
            problems.append(Problem(path, f"must be a number, not {type(value).__name__} {json.dumps(value)}", hint))
            return spec.default
        return bounded(float(value), "number")
    if kind == "bool":
        if not isinstance(value, bool):
            hint = f"write {value.strip().lower()} without quotes" if isinstance(value, str) and \
                value.strip().lower() in ("true", "false") else "write true or false"
            problems.append(Problem(path, f"must be true or false, not {json.dumps(value)}", hint))
            return spec.default
        return value
    if kind == "str":
        if not isinstance(value, str) or not value:
            problems.append(Problem(path, f"must be a non-empty string, not {json.dumps(value)}",
                                    "write it in double quotes, or remove the key to use the default"))
            return spec.default
        if spec.choices and value not in spec.choices:
            problems.append(Problem(path, f"is {value!r}; must be one of {', '.join(map(repr, spec.choices))}",
                                    did_you_mean(value, spec.choices, quote=True)))
        return value
    if kind == "str_list":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            problems.append(Problem(path, "must be a list of strings, e.g. [\"--threads\", \"8\"]",
                                    "quote every argument separately"))
            return list(spec.default or [])
        return list(value)
    if kind == "int_or_list":
        items = value if isinstance(value, list) else [value]
        if isinstance(value, list) and not value:
            problems.append(Problem(path, "is an empty list", "give at least one value or remove the key"))
        clean = []
        for i, item in enumerate(items):
            sub = f"{path}[{i}]" if isinstance(value, list) else path
            if isinstance(item, bool) or not isinstance(item, int):
                hint = f"write {item} without quotes" if isinstance(item, str) and item.strip().isdigit() else \
                    "use a whole number, or a list of them such as [4, 8, 16]"
                problems.append(Problem(sub, f"must be an integer, not {json.dumps(item)}", hint))
                continue
            clean.append(bounded(item, "number", sub))
        if isinstance(value, list):
            dupes = sorted(v for v, n in Counter(clean).items() if n > 1)
            if dupes:
                problems.append(Problem(path, f"lists {', '.join(map(str, dupes))} more than once",
                                        "list every value once"))
            return clean
        return clean[0] if clean else spec.default
    return value
