"""The JSON types a results file's values are declared with and checked against (see
:mod:`draftbench.results.json_types`, which declares fields with them).

``Spec.check`` walks a value once and returns the JSON path of the first bad one; ``Spec.quick``
settles a scalar in one call, and ``Spec.valid`` walks a whole value without building any path: a
file is walked with ``valid`` (one call per value), and with ``check`` only where ``valid`` says no,
to name the bad value (:func:`first_problem`). Numbers may carry a physical ``maximum`` (:mod:`draftbench.results.bounds`).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..common.numbers import above_what_is_measured, number_text

MAX_FREE_DEPTH = 32
_FLOAT_MAX = sys.float_info.max


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

    def quick(self, value: Any) -> bool:
        """True when ``value`` is certainly fine, decided in one call (scalars). Containers go through
        :meth:`check`, which also builds the JSON path, only then: a results file holds millions of values."""
        return False

    def check(self, value: Any, path: str) -> tuple[str, str] | None:
        if value is None:
            return None if self.nullable else (path, f"must be {self.describe()}, not null")
        if not self.accepts(value):
            return path, f"must be {self.describe()}{' or null' if self.nullable else ''}, not {describe_value(value)}"
        return self.check_inside(value, path)

    def check_inside(self, value: Any, path: str) -> tuple[str, str] | None:
        return None

    def valid(self, value: Any) -> bool:
        """True only when :meth:`check` finds nothing in ``value`` (False: ask ``check`` where and why).
        Containers walk their items without building JSON paths; a scalar is :meth:`quick`."""
        return self.quick(value) or self.check(value, "") is None

    def children(self) -> list[tuple[str, Spec]]:
        """(path suffix, spec) of what this holds, for the snapshot: ``.key``, ``[]``, ``.*``."""
        return []


def _at_least(minimum: float | None) -> str:
    return "" if minimum is None else f" of at least {number_text(minimum)}"


def _bounds(minimum: float | None, maximum: float | None) -> str:
    return ("" if minimum is None else f" >= {minimum:g}") + ("" if maximum is None else f" <= {maximum:g}")


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

    def quick(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        return type(value) is str and (not self.choices or value in self.choices)

    valid = quick      # what JSON parses to (never a subclass of str) is settled in this one call


@dataclass(frozen=True)
class _Number(Spec):
    """An integer or a number, at least ``minimum``; above ``maximum`` (a physical bound, see
    :mod:`draftbench.results.bounds`) the message says that no measurement reaches it, in ``unit``."""

    nullable: bool = True
    minimum: float | None = None
    maximum: float | None = None
    unit: str = ""
    NAME: ClassVar[tuple[str, str]] = ("", "")     # (in messages, in the snapshot)

    def describe(self) -> str:
        return self.NAME[0] + _at_least(self.minimum)

    def type_name(self) -> str:
        return self.NAME[1] + _bounds(self.minimum, self.maximum)

    def check_inside(self, value: Any, path: str) -> tuple[str, str] | None:
        if self.maximum is None or value <= self.maximum:
            return None
        return path, above_what_is_measured(value, self.maximum, self.unit)


@dataclass(frozen=True)
class Int(_Number):
    NAME: ClassVar[tuple[str, str]] = ("an integer", "integer")

    def accepts(self, value: Any) -> bool:
        return (isinstance(value, int) and not isinstance(value, bool)
                and (self.minimum is None or value >= self.minimum))

    def quick(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        low, high = self.minimum, self.maximum
        return type(value) is int and (low is None or value >= low) and (high is None or value <= high)

    valid = quick


@dataclass(frozen=True)
class Num(_Number):
    NAME: ClassVar[tuple[str, str]] = ("a finite number", "number")

    def accepts(self, value: Any) -> bool:
        # an integer too large for a float (10**400: JSON allows it) is no finite number either
        return (isinstance(value, (int, float)) and not isinstance(value, bool)
                and (-_FLOAT_MAX <= value <= _FLOAT_MAX if isinstance(value, int) else math.isfinite(value))
                and (self.minimum is None or value >= self.minimum))

    def quick(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        kind, low, high = type(value), self.minimum, self.maximum
        if kind is float:
            if value - value != 0:      # NaN and ±inf
                return False
        elif kind is not int or not -_FLOAT_MAX <= value <= _FLOAT_MAX:
            return False
        return (low is None or value >= low) and (high is None or value <= high)

    valid = quick


@dataclass(frozen=True)
class Bool(Spec):
    nullable: bool = True

    def describe(self) -> str:
        return "true or false"

    def type_name(self) -> str:
        return "boolean"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, bool)

    def quick(self, value: Any) -> bool:
        return self.nullable if value is None else type(value) is bool

    valid = quick


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
        spec = self.item
        quick = spec.quick
        for i, item in enumerate(value):
            if quick(item):
                continue
            problem = spec.check(item, f"{path}[{i}]")
            if problem:
                return problem
        return None

    def valid(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        return type(value) is list and all(map(self.item.valid, value))

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

    def __post_init__(self) -> None:   # per key, the one-call checks and whether null is fine (see check_inside)
        object.__setattr__(self, "_quick", {key: spec.quick for key, spec in self.fields.items()})
        object.__setattr__(self, "_valid", {key: spec.valid for key, spec in self.fields.items()})
        object.__setattr__(self, "_nullable", {key: spec.nullable for key, spec in self.fields.items()})

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
        quick_of: dict = self._quick      # type: ignore[attr-defined]
        nullable: dict = self._nullable   # type: ignore[attr-defined]
        other = self.rest or FREE
        other_quick, other_nullable = other.quick, other.nullable
        for key, item in value.items():
            if item is None:
                if nullable.get(key, other_nullable):
                    continue
            elif quick_of.get(key, other_quick)(item):
                continue
            problem = self.fields.get(key, other).check(item, f"{path}.{key}")
            if problem:
                return problem
        return None

    def valid(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        if type(value) is not dict:
            return False
        for key in self.required:
            if key not in value:
                return False
        valid_of: dict = self._valid      # type: ignore[attr-defined]
        nullable: dict = self._nullable   # type: ignore[attr-defined]
        other = self.rest or FREE
        other_valid, other_nullable = other.valid, other.nullable
        for key, item in value.items():
            if item is None:
                if not nullable.get(key, other_nullable):
                    return False
            elif not valid_of.get(key, other_valid)(item):
                return False
        return True

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
        spec = self.value
        quick = spec.quick
        for key, item in value.items():
            if quick(item):
                continue
            problem = spec.check(item, f"{path}.{key}")
            if problem:
                return problem
        return None

    def valid(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        return type(value) is dict and all(map(self.value.valid, value.values()))

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

    def quick(self, value: Any) -> bool:
        return (value is None and self.nullable) or any(o.quick(value) for o in self.options)

    def check_inside(self, value: Any, path: str) -> tuple[str, str] | None:
        spec = next(o for o in self.options if o.accepts(value))
        return spec.check_inside(value, path)

    def valid(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        for option in self.options:       # the option check() would pick: the first that accepts the value
            if option.accepts(value):
                return option.valid(value)
        return False

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

    def quick(self, value: Any) -> bool:
        return not isinstance(value, (dict, list))

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
