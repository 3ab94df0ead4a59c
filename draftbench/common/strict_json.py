"""JSON where a key written twice in one object is an error, not "the last one wins"; and values made
strict JSON before they are written (:func:`finite_json`).

``json.loads`` keeps the last of two equal keys without a word: a results file with two
``"results"`` keys would lose every row of the first. :func:`loads_unique` parses with a cheap
check on every object and, only when a duplicate is found, parses again to say where it is.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .text_safety import replace_lone_surrogates


class DuplicateKeyError(ValueError):
    """A key appears twice in one object; ``path`` is its JSON path (``$.results[3].mean_tps``)."""

    def __init__(self, key: str, path: str | None = None):
        super().__init__(f"{path or key!r} appears twice in the same object")
        self.key = key
        self.path = path


def _refuse(pairs: list[tuple[str, Any]]) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))    # type: ignore[func-returns-value]
        raise DuplicateKeyError(key)
    return out


class _Marked(dict):
    duplicates: tuple[str, ...] = ()


def _mark(pairs: list[tuple[str, Any]]) -> dict:
    out = _Marked(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        out.duplicates = tuple(k for k, _ in pairs if k in seen or seen.add(k))   # type: ignore[func-returns-value]
    return out


def _key_path(parent: str, key: str) -> str:
    return f"{parent}.{key}" if key.isidentifier() else f"{parent}[{json.dumps(key)}]"


def _locate(text: str) -> tuple[str, str]:
    """The first duplicated key in document order: ``(key, json path)``."""
    stack: list[tuple[Any, str]] = [(json.loads(text, object_pairs_hook=_mark), "$")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            duplicates: tuple[str, ...] = getattr(value, "duplicates", ())
            if duplicates:
                key = duplicates[0]
                return key, _key_path(path, key)
            stack.extend(reversed([(v, _key_path(path, k)) for k, v in value.items()]))
        elif isinstance(value, list):
            stack.extend(reversed([(v, f"{path}[{i}]") for i, v in enumerate(value)]))
    raise AssertionError("a duplicate key was seen but not found again")


def _plain(value: Any, path: str, found: list[str]) -> Any:
    """``value`` with plain dicts, the JSON path of every duplicated key appended to ``found``."""
    if isinstance(value, dict):
        found.extend(_key_path(path, key) for key in getattr(value, "duplicates", ()))
        return {k: _plain(v, _key_path(path, k), found) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    return value


def loads_all_duplicates(text: str) -> tuple[Any, list[str]]:
    """``json.loads(text)`` (the last of two equal keys kept) and the JSON path of every key written twice,
    in document order: for a file whose every problem is reported at once (a sweep config)."""
    found: list[str] = []
    return _plain(json.loads(text, object_pairs_hook=_mark), "$", found), found


def loads_unique(text: str) -> Any:
    """``json.loads(text)``, raising :class:`DuplicateKeyError` (with its JSON path) when an object
    holds a key twice. Raises what ``json.loads`` raises otherwise."""
    try:
        return json.loads(text, object_pairs_hook=_refuse)
    except DuplicateKeyError as first:
        try:
            key, path = _locate(text)
        except (AssertionError, RecursionError):
            raise first from None
        raise DuplicateKeyError(key, path) from None


def finite_json(value: Any) -> Any:
    """``value`` with every NaN/±Infinity replaced by None (results files are strict JSON, and a
    non-finite number is never a measurement) and every lone surrogate by U+FFFD (they are UTF-8)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str):
        return replace_lone_surrogates(value)     # e.g. a server streamed "\ud800": the file stays UTF-8
    if isinstance(value, dict):
        return {replace_lone_surrogates(k) if isinstance(k, str) else k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value
