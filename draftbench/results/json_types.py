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

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

MAX_FREE_DEPTH = 32
NO_DEFAULT: Any = object()     # declare(..., default=NO_DEFAULT): the constructor needs the argument
_UNSET: Any = object()
DECLARATION = "draftbench.json"  # the dataclass field metadata key


class Spec:
    """One declared type. ``check`` returns ``(json_path, message)`` for the first bad value, or None."""

    nullable: bool = True

    def describe(self) -> str:
        raise NotImplementedError

    def type_name(self) -> str:
        """A terse name for the golden snapshot of the format (messages use :meth:`describe`)."""
        raise NotImplementedError

    def accepts(self, value: Any) -> bool:
        raise NotImplementedError

    def check(self, value: Any, path: str) -> tuple[str, str] | None:
        if value is None:
            return None if self.nullable else (path, f"must be {self.describe()}, not null")
        if not self.accepts(value):
            return path, f"must be {self.describe()}{' or null' if self.nullable else ''}, not {describe_value(value)}"
        return self.check_inside(value, path)

    def check_inside(self, value: Any, path: str) -> tuple[str, str] | None:
        return None

    def children(self) -> list[tuple[str, Spec]]:
        """(path suffix, spec) of what this holds, for the snapshot: ``.key``, ``[]``, ``.*``."""
        return []


def _at_least(minimum: float | None) -> str:
    return "" if minimum is None else f" of at least {minimum:g}"


@dataclass(frozen=True)
class Str(Spec):
    nullable: bool = True
    choices: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"one of {', '.join(map(repr, self.choices))}" if self.choices else "a string"

    def type_name(self) -> str:
        return f"one of {'|'.join(self.choices)}" if self.choices else "string"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and (not self.choices or value in self.choices)


@dataclass(frozen=True)
class Int(Spec):
    nullable: bool = True
    minimum: int | None = None

    def describe(self) -> str:
        return "an integer" + _at_least(self.minimum)

    def type_name(self) -> str:
        return "integer" + ("" if self.minimum is None else f" >= {self.minimum}")

    def accepts(self, value: Any) -> bool:
        return (isinstance(value, int) and not isinstance(value, bool)
                and (self.minimum is None or value >= self.minimum))


@dataclass(frozen=True)
class Num(Spec):
    nullable: bool = True
    minimum: float | None = None

    def describe(self) -> str:
        return "a finite number" + _at_least(self.minimum)

    def type_name(self) -> str:
        return "number" + ("" if self.minimum is None else f" >= {self.minimum:g}")

    def accepts(self, value: Any) -> bool:
        return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                and (self.minimum is None or value >= self.minimum))


@dataclass(frozen=True)
class Bool(Spec):
    nullable: bool = True

    def describe(self) -> str:
        return "true or false"

    def type_name(self) -> str:
        return "boolean"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, bool)


@dataclass(frozen=True)
class ListOf(Spec):
    item: Spec
    nullable: bool = True

    def describe(self) -> str:
        return f"a list of {self.item.describe()}s" if isinstance(self.item, (Str, Int)) and not \
            getattr(self.item, "choices", ()) else "a list"

    def type_name(self) -> str:
        return "list"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, list)

    def check_inside(self, value: Any, path: str) -> tuple[str, str] | None:
        for i, item in enumerate(value):
            problem = self.item.check(item, f"{path}[{i}]")
            if problem:
                return problem
        return None

    def children(self) -> list[tuple[str, Spec]]:
        return [("[]", self.item)]


@dataclass(frozen=True)
class Obj(Spec):
    """An object with declared keys; other keys hold anything (``rest``)."""

    fields: dict[str, Spec] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    nullable: bool = True
    rest: Spec | None = None
    units: dict[str, str] = field(default_factory=dict)   # key -> unit, where one is declared

    def describe(self) -> str:
        return "an object"

    def type_name(self) -> str:
        return "object"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, dict)

    def check_inside(self, value: Any, path: str) -> tuple[str, str] | None:
        for key in self.required:
            if key not in value:
                return f"{path}.{key}", "is missing"
        for key, item in value.items():
            spec = self.fields.get(key, self.rest or FREE)
            problem = spec.check(item, f"{path}.{key}")
            if problem:
                return problem
        return None

    def children(self) -> list[tuple[str, Spec]]:
        return [(f".{key}", spec) for key, spec in self.fields.items()] + ([(".*", self.rest)] if self.rest else [])


@dataclass(frozen=True)
class MapOf(Spec):
    """An object whose keys are names chosen by the data (prompt categories, statistics)."""

    value: Spec
    nullable: bool = True

    def describe(self) -> str:
        return "an object"

    def type_name(self) -> str:
        return "object"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, dict)

    def check_inside(self, value: Any, path: str) -> tuple[str, str] | None:
        for key, item in value.items():
            problem = self.value.check(item, f"{path}.{key}")
            if problem:
                return problem
        return None

    def children(self) -> list[tuple[str, Spec]]:
        return [(".*", self.value)]


@dataclass(frozen=True)
class OneOf(Spec):
    options: tuple[Spec, ...]
    nullable: bool = True

    def describe(self) -> str:
        return " or ".join(o.describe() for o in self.options)

    def type_name(self) -> str:
        return " or ".join(o.type_name() for o in self.options)

    def accepts(self, value: Any) -> bool:
        return any(o.accepts(value) for o in self.options)

    def check_inside(self, value: Any, path: str) -> tuple[str, str] | None:
        spec = next(o for o in self.options if o.accepts(value))
        return spec.check_inside(value, path)

    def children(self) -> list[tuple[str, Spec]]:
        return [child for option in self.options for child in option.children()]


@dataclass(frozen=True)
class Free(Spec):
    """Any JSON value, nested at most ``max_depth`` deep (checked without recursion)."""

    max_depth: int = MAX_FREE_DEPTH

    def describe(self) -> str:
        return "any JSON value"

    def type_name(self) -> str:
        return "any"

    def accepts(self, value: Any) -> bool:
        return True

    def check_inside(self, value: Any, path: str) -> tuple[str, str] | None:
        stack: list[tuple[Any, int]] = [(value, 0)]
        while stack:
            item, depth = stack.pop()
            if isinstance(item, (dict, list)):
                if depth >= self.max_depth:
                    return path, f"is nested more than {self.max_depth} levels deep"
                children = item.values() if isinstance(item, dict) else item
                stack.extend((child, depth + 1) for child in children)
        return None


def describe_value(value: Any) -> str:
    """A short description of a JSON value for a message (never the whole of a big one)."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    text = json.dumps(value, ensure_ascii=True)
    kind = {str: "string", int: "integer", float: "number"}.get(type(value), type(value).__name__)
    return f"{kind} {text if len(text) <= 40 else text[:37] + '...'}"


FREE = Free()
STR, INT, NUM, BOOL = Str(), Int(), Num(), Bool()


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
    return {k: v for k, v in data.items() if k in declared}


def check_fields(obj: Any, what: str, names: tuple[str, ...] | None = None) -> None:
    """Raise ValueError naming the first declared field of ``obj`` (or of ``names``) whose value its
    spec refuses: a value class validates itself against its own declarations."""
    for name, declared in declarations(type(obj)).items():
        if names is not None and name not in names:
            continue
        value = getattr(obj, name)
        if declared.spec.check(to_json(value), name) is not None:
            nullable = " or null" if declared.spec.nullable else ""
            raise ValueError(f"{what} {name} {value!r:.60} is not {declared.spec.describe()}{nullable}")
