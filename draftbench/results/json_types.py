"""How a result class declares its JSON: every field once, beside the class (as pyperf does).

A stored field is declared with :func:`declare`: its JSON type (a :class:`Spec`), its unit, whether
the key must be present and whether the value may be null. Everything else is derived from those
declarations: the object's JSON (:func:`write_fields`, keys in declaration order), what is read back
(:func:`read_fields`), the check of a loaded file's values (:func:`spec_of`, walked once by
``Spec.check``, which returns the JSON path of the first bad value), a value class's own validation
(:func:`check_fields`) and the golden snapshot of the format (:mod:`draftbench.results.schema`).

Keys no class declares (unknown keys, kept and written back) may hold any JSON, nested at most
:data:`MAX_FREE_DEPTH` deep, so that saving the file again cannot exhaust the stack.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

# The types themselves live in results.specs; they are read from here too, beside declare().
from .specs import (
    BOOL,
    FREE,
    INT,
    MAX_FREE_DEPTH,
    NUM,
    STR,
    Bool,
    Free,
    Int,
    ListOf,
    MapOf,
    Num,
    Obj,
    OneOf,
    Spec,
    Str,
    describe_value,
)

__all__ = ["BOOL", "DECLARATION", "FREE", "INT", "MAX_FREE_DEPTH", "NO_DEFAULT", "NUM", "STR", "Bool", "Declaration",
           "Free", "Int", "ListOf", "MapOf", "Num", "Obj", "OneOf", "Spec", "Str", "check_fields", "declarations",
           "declare", "describe_value", "read_fields", "spec_of", "to_json", "write_fields"]


NO_DEFAULT: Any = object()     # declare(..., default=NO_DEFAULT): the constructor needs the argument
_UNSET: Any = object()
DECLARATION = "draftbench.json"  # the dataclass field metadata key


# ---------------------------------------------------------------------------------------- declarations

@dataclass(frozen=True)
class Declaration:
    """A stored field: its JSON type, unit, and how it is written."""

    spec: Spec
    unit: str | None = None
    required: bool = False           # the key must be present in a file
    omit_when_none: bool = False     # not written while None (keys that files never held when unset)
    upstream: bool = False           # one of upstream draftbench's own keys


def declare(spec: Spec, unit: str | None = None, *, default: Any = _UNSET, factory: Callable[[], Any] | None = None,
            required: bool = False, omit_when_none: bool = False, upstream: bool = False) -> Any:
    """A dataclass field stored in results files: ``mean_tps: float | None = declare(NUM, "tok/s")``.

    ``required``: a file must hold the key (and the constructor needs it, unless given a default);
    the spec's ``nullable`` says whether the value may be null. ``default`` is the constructor's
    default (None unless required; ``NO_DEFAULT``: the constructor needs it, the file need not hold it)."""
    metadata = {DECLARATION: Declaration(spec, unit, required, omit_when_none, upstream)}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    if default is NO_DEFAULT or (default is _UNSET and required):
        return field(metadata=metadata)
    return field(default=None if default is _UNSET else default, metadata=metadata)


_declarations: dict[type, dict[str, Declaration]] = {}   # per class: read once, used on every save and load
_specs: dict[tuple[type, bool], Obj] = {}


def declarations(cls: type) -> dict[str, Declaration]:
    """A class's declared fields, in declaration order (the order of its JSON keys)."""
    if cls not in _declarations:
        # a field without a declaration would silently never reach the file: refuse the class instead
        missing = [f.name for f in fields(cls) if DECLARATION not in f.metadata and f.name != "extra"]
        if missing:
            raise TypeError(f"{cls.__name__}: declare {', '.join(missing)} with json_types.declare() "
                            "(or name the field 'extra' if it holds the file's unknown keys)")
        _declarations[cls] = {f.name: f.metadata[DECLARATION] for f in fields(cls) if DECLARATION in f.metadata}
    return _declarations[cls]


def spec_of(cls: type, nullable: bool = False) -> Obj:
    """The JSON type of a class's objects, from its declarations; a class may also accept keys that are
    not fields (``OTHER_KEYS``: upstream's own markers, read into fields or kept in ``extra``)."""
    if (cls, nullable) not in _specs:
        declared = declarations(cls)
        other: dict[str, Spec] = getattr(cls, "OTHER_KEYS", {})
        _specs[cls, nullable] = Obj({**{name: d.spec for name, d in declared.items()}, **other},
                                    required=tuple(name for name, d in declared.items() if d.required),
                                    nullable=nullable, units={name: d.unit for name, d in declared.items() if d.unit})
    return _specs[cls, nullable]


def to_json(value: Any) -> Any:
    """A field's value as JSON: value classes through their ``to_dict``, enums as their value, tuples
    as lists; dicts and lists are copied so that the result can be changed freely."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value


def write_fields(obj: Any) -> dict[str, Any]:
    """The declared fields of ``obj`` as a JSON object, in declaration order."""
    out: dict[str, Any] = {}
    for name, declared in declarations(type(obj)).items():
        value = getattr(obj, name)
        if value is None and declared.omit_when_none:
            continue
        out[name] = to_json(value)
    return out


def read_fields(cls: type, data: dict) -> dict[str, Any]:
    """The constructor arguments for ``cls`` found in ``data`` (keys it does not declare are left out)."""
    declared = declarations(cls)
    if declared.keys() >= data.keys():     # the usual case: nothing to leave out (``data`` itself: not changed)
        return data
    return {k: v for k, v in data.items() if k in declared}


def check_fields(obj: Any, what: str, names: tuple[str, ...] | None = None) -> None:
    """Raise ValueError naming the first declared field of ``obj`` (or of ``names``) whose value its
    spec refuses: a value class validates itself against its own declarations."""
    for name, declared in declarations(type(obj)).items():
        if names is not None and name not in names:
            continue
        value = getattr(obj, name)
        if declared.spec.quick(value):        # the usual scalar, in one call (a file holds several per row)
            continue
        if declared.spec.check(to_json(value), name) is not None:
            nullable = " or null" if declared.spec.nullable else ""
            raise ValueError(f"{what} {name} {value!r:.60} is not {declared.spec.describe()}{nullable}")
