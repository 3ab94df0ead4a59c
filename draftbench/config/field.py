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
from collections.abc import Callable
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

    kind: str                     # "int" | "float" | "bool" | "str" | "str_list" | "int_or_list" | "float_map" | "any"
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
        if not spec.nullable:
            problems.append(Problem(path, "must not be null", "give a value or remove the key to use the default"))
        return spec.default
    check = KIND_CHECKS.get(spec.kind)
    return value if check is None else check(path, value, spec, problems)


def within_bounds(path: str, value: int | float, spec: Field, problems: list[Problem]) -> int | float:
    if spec.min is not None and (value < spec.min or (spec.min_exclusive and value == spec.min)):
        problems.append(Problem(path, f"is {value}; must be {'>' if spec.min_exclusive else '≥'} {spec.min:g}",
                                f"use a number of at least {spec.min:g}"))
    if spec.max is not None and value > spec.max:
        problems.append(Problem(path, f"is {value}; must be ≤ {spec.max:g}", f"use a number of at most {spec.max:g}"))
    return value


def numeric_text(value: Any) -> bool:
    try:
        return isinstance(value, str) and math.isfinite(float(value))
    except ValueError:
        return False


def check_int(path: str, value: Any, spec: Field, problems: list[Problem]) -> Any:
    if isinstance(value, bool) or not isinstance(value, int):
        hint = f"write {value} without quotes" if isinstance(value, str) and value.strip().lstrip("-").isdigit() \
            else "use a whole number"
        problems.append(Problem(path, f"must be an integer, not {type(value).__name__} {json.dumps(value)}", hint))
        return spec.default
    return within_bounds(path, value, spec, problems)


def check_float(path: str, value: Any, spec: Field, problems: list[Problem]) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        hint = f"write {value} without quotes" if numeric_text(value) else "use a finite number"
        problems.append(Problem(path, f"must be a number, not {type(value).__name__} {json.dumps(value)}", hint))
        return spec.default
    return within_bounds(path, float(value), spec, problems)


def check_bool(path: str, value: Any, spec: Field, problems: list[Problem]) -> Any:
    if not isinstance(value, bool):
        hint = f"write {value.strip().lower()} without quotes" if isinstance(value, str) and \
            value.strip().lower() in ("true", "false") else "write true or false"
        problems.append(Problem(path, f"must be true or false, not {json.dumps(value)}", hint))
        return spec.default
    return value


def check_str(path: str, value: Any, spec: Field, problems: list[Problem]) -> Any:
    if not isinstance(value, str) or not value:
        problems.append(Problem(path, f"must be a non-empty string, not {json.dumps(value)}",
                                "write it in double quotes, or remove the key to use the default"))
        return spec.default
    if spec.choices and value not in spec.choices:
        problems.append(Problem(path, f"is {value!r}; must be one of {', '.join(map(repr, spec.choices))}",
                                did_you_mean(value, spec.choices, quote=True)))
    return value


def check_str_list(path: str, value: Any, spec: Field, problems: list[Problem]) -> Any:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.append(Problem(path, "must be a list of strings, e.g. [\"--threads\", \"8\"]",
                                "quote every argument separately"))
        return list(spec.default or [])
    return list(value)


def check_int_or_list(path: str, value: Any, spec: Field, problems: list[Problem]) -> Any:
    """One whole number, or a list of distinct ones (each item checked and named by its index)."""
    items = value if isinstance(value, list) else [value]
    if isinstance(value, list) and not value:
        problems.append(Problem(path, "is an empty list", "give at least one value or remove the key"))
    clean = []
    for i, item in enumerate(items):
        where = f"{path}[{i}]" if isinstance(value, list) else path
        if isinstance(item, bool) or not isinstance(item, int):
            hint = f"write {item} without quotes" if isinstance(item, str) and item.strip().isdigit() else \
                "use a whole number, or a list of them such as [4, 8, 16]"
            problems.append(Problem(where, f"must be an integer, not {json.dumps(item)}", hint))
            continue
        clean.append(within_bounds(where, item, spec, problems))
    if isinstance(value, list):
        dupes = sorted(v for v, n in Counter(clean).items() if n > 1)
        if dupes:
            problems.append(Problem(path, f"lists {', '.join(map(str, dupes))} more than once", "list every value once"))
        return clean
    return clean[0] if clean else spec.default


def check_float_map(path: str, value: Any, spec: Field, problems: list[Problem]) -> Any:
    """An object of names to numbers (``{"CUDA0": 23.5}``), each number checked and named by its key."""
    if not isinstance(value, dict) or not value:
        problems.append(Problem(path, f"must be an object of names to numbers, not {json.dumps(value)[:60]}",
                                'write it as {"CUDA0": 23.5}, or remove the key'))
        return spec.default
    clean = {}
    for key, item in value.items():
        where = f"{path}.{key}" if key.replace("_", "").isalnum() else f"{path}[{json.dumps(key)}]"
        if not key.strip() or not key.isprintable():
            problems.append(Problem(where, "is not a device name", "name a device as the server's log does (CPU, CUDA0, "
                                    "MTL0, RPC0[host:port])"))
            continue
        clean[key] = check_float(where, item, spec, problems)
    return clean


# One checker per Field.kind; a kind without one (e.g. a backend's free-form value) is taken as it is.
KIND_CHECKS: dict[str, Callable[[str, Any, Field, list[Problem]], Any]] = {
    "int": check_int, "float": check_float, "bool": check_bool, "str": check_str, "str_list": check_str_list,
    "int_or_list": check_int_or_list, "float_map": check_float_map,
}
