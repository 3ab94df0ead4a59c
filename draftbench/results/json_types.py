"""How a result class declares its JSON: every field once, beside the class (as pyperf does).

A stored field is declared with :func:`declare`: its JSON type (a :class:`Spec`), its unit, whether
the key must be present and whether the value may be null. Everything else is derived from those
declarations: the object's JSON (:func:`write_fields`, keys in declaration order), what is read back
(:func:`read_fields`), the check of a loaded file's values (:func:`spec_of`, walked once by
``Spec.check``, which returns the JSON path of the first bad value), a value class's own validation
(:func:`check_fields`) and the golden snapshot of the format (:mod:`draftbench.results.schema`).

Each value is checked once: a value the code builds, by its class's constructor (``check_fields``);
a value read from a file, by the schema walk over the whole file, after which its instance is built
from the checked JSON without checking it again (:func:`checked_values`, :func:`checked_instance`).

Keys no class declares (unknown keys, kept and written back) may hold any JSON, nested at most
:data:`MAX_FREE_DEPTH` deep, so that saving the file again cannot exhaust the stack.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from enum import Enum
from typing import Any, TypeVar

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
           "Free", "Int", "ListOf", "MapOf", "Num", "Obj", "OneOf", "Spec", "Str", "check_fields", "checked_instance",
           "checked_values", "declarations", "declare", "describe_value", "read_fields", "spec_of", "to_json", "write_fields"]


NO_DEFAULT: Any = object()     # declare(..., default=NO_DEFAULT): the constructor needs the argument
_UNSET: Any = object()
T = TypeVar("T")
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
    for name, quick in _quick_checks(type(obj), names):
        if quick(getattr(obj, name)):        # the usual value, in one call (the analysis builds 200k per 50k rows)
            continue
        spec = declarations(type(obj))[name].spec
        value = getattr(obj, name)
        if spec.check(to_json(value), name) is not None:
            nullable = " or null" if spec.nullable else ""
            raise ValueError(f"{what} {name} {value!r:.60} is not {spec.describe()}{nullable}")


_quick: dict[tuple[type, tuple[str, ...] | None], tuple[tuple[str, Callable[[Any], bool]], ...]] = {}


def _quick_checks(cls: type, names: tuple[str, ...] | None) -> tuple[tuple[str, Callable[[Any], bool]], ...]:
    """(field, its spec's one-call check) for the declared fields of ``cls`` (or those in ``names``)."""
    if (cls, names) not in _quick:
        _quick[cls, names] = tuple((name, d.spec.quick) for name, d in declarations(cls).items()
                                   if names is None or name in names)
    return _quick[cls, names]


# ------------------------------------------------------------------ values the schema walk has checked

@dataclass(frozen=True)
class _Defaults:
    declared: Any                                         # the declared names (a dict's keys: compared as a set)
    plain: dict[str, Any]                                 # field -> its default
    made: tuple[tuple[str, Callable[[], Any]], ...]       # field -> its default factory (a new value each time)
    needed: tuple[str, ...]                               # fields without a default


_defaults: dict[type, _Defaults] = {}


def _defaults_of(cls: type) -> _Defaults:
    if cls not in _defaults:
        every = fields(cls)
        _defaults[cls] = _Defaults(declarations(cls).keys(), {f.name: f.default for f in every if f.default is not MISSING},
                                   tuple((f.name, f.default_factory) for f in every
                                         if f.default_factory is not MISSING),
                                   tuple(f.name for f in every if f.default is MISSING and f.default_factory is MISSING))
    return _defaults[cls]


def checked_values(cls: type, data: dict) -> dict[str, Any]:
    """Every field of ``cls`` for a JSON object that the results schema (``spec_of(cls)``) has accepted:
    its declared keys as they are, the defaults for the rest (unknown keys are left out). A new dict,
    for the caller to make typed and pass to :func:`checked_instance`."""
    shape = _defaults.get(cls) or _defaults_of(cls)      # a file builds 300k of these: no call where none is needed
    values = shape.plain.copy()
    for name, make in shape.made:
        values[name] = make()
    if shape.declared >= data.keys():
        values.update(data)
    else:
        declared = shape.declared
        values.update({k: v for k, v in data.items() if k in declared})
    return values


def checked_instance(cls: type[T], values: dict[str, Any]) -> T:
    """An instance of the dataclass ``cls`` holding ``values`` (from :func:`checked_values`), built without
    its ``__init__``: a loaded file's values were checked once, by the schema walk over the whole file
    (which names the bad value's JSON path), and are not checked one by one again — that doubled the
    cost of loading a large file. Whatever else the class's ``__post_init__`` does (typed members,
    rules between fields) is the caller's to do."""
    for name in (_defaults.get(cls) or _defaults_of(cls)).needed:
        if name not in values:
            raise TypeError(f"{cls.__name__} needs {name}")
    obj = object.__new__(cls)
    object.__setattr__(obj, "__dict__", values)      # a frozen dataclass refuses obj.__dict__ = ...
    return obj
