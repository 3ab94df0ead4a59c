"""Text from users and servers, made safe to print and checked before it becomes a label.

A leaf module. Labels, reasons, server log tails and error messages reach the terminal; a
control character in them could move the cursor, recolour the screen, retitle the window
(OSC), or reorder what is shown (bidi controls). :func:`safe_text` shows such characters as
visible escapes instead. :func:`text_problem` says why a string cannot be a label.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")

# Explicit direction embeddings, overrides and isolates: they reorder the text printed after them.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Letters that render as nothing (Hangul fillers, the Braille blank) although their category says "letter".
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp", "Mn", "Me", "Cs"})


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _needs_escape(ch: str, keep_newlines: bool) -> bool:
    code = ord(ch)
    if ch in "\n\t":
        return not keep_newlines
    if code < 0x20 or 0x7f <= code <= 0x9f:     # C0 (ESC, CR, BEL, …), DEL, C1 (CSI, OSC as one byte)
        return True
    if 0xd800 <= code <= 0xdfff:                # a lone surrogate cannot even be encoded for the terminal
        return True
    return ch in BIDI_CONTROLS or ch in "\u2028\u2029"


def safe_text(text: object, *, keep_newlines: bool = True) -> str:
    """``text`` with every terminal control character shown as a visible escape (``\\x1b``).

    Newlines and tabs are kept unless ``keep_newlines`` is false (for one-line fields). Plain
    text comes back unchanged, so this is cheap to call on everything that is printed.
    """
    s = text if isinstance(text, str) else str(text)
    if s.isascii() and s.isprintable():
        return s
    return "".join(_escape(ch) if _needs_escape(ch, keep_newlines) else ch for ch in s)


def is_invisible(ch: str) -> bool:
    return ch in _BLANK_LETTERS or unicodedata.category(ch) in _INVISIBLE_CATEGORIES


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be a label or name shown to people, or None.

    Refused: lone surrogates (not valid Unicode: the text cannot be written to a file or a
    terminal), control characters, and text made only of invisible or direction-control
    characters (it would look empty, or like another label).
    """
    bad = next((ch for ch in value if 0xd800 <= ord(ch) <= 0xdfff), None)
    if bad is not None:
        return f"holds a lone surrogate ({_escape(bad)}), which is not valid Unicode text"
    bad = next((ch for ch in value if unicodedata.category(ch) == "Cc"), None)
    if bad is not None:
        return f"holds a control character ({_escape(bad)})"
    if value and all(is_invisible(ch) for ch in value):
        return "is made only of invisible or text-direction characters"
    return None


def lone_surrogate_paths(value: object, path: str = "$") -> list[str]:
    """JSON paths of every string (key or value) in ``value`` that holds a lone surrogate.

    Iterative, so any nesting depth the JSON parser accepted is walked without recursion.
    """
    found: list[str] = []
    stack: list[tuple[object, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if _has_surrogate(item):
                found.append(where)
        elif isinstance(item, dict):
            children = []
            for key, sub in item.items():
                sub_path = f"{where}.{safe_text(key, keep_newlines=False)}"
                if isinstance(key, str) and _has_surrogate(key):
                    found.append(sub_path)
                children.append((sub, sub_path))
            stack.extend(reversed(children))      # popped in document order
        elif isinstance(item, list):
            stack.extend(reversed([(sub, f"{where}[{i}]") for i, sub in enumerate(item)]))
    return found


def _has_surrogate(s: str) -> bool:
    if s.isascii():
        return False
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


REPLACEMENT = "\ufffd"     # what a lone surrogate becomes: visibly replaced, and valid UTF-8


def without_lone_surrogates(value: T) -> T:
    """A JSON value with every lone surrogate (in keys and strings) replaced by U+FFFD.

    JSON allows ``"\\ud800"``, but such a string cannot be encoded as UTF-8: written to a file, a
    terminal or a report it raised UnicodeEncodeError. Values without one come back as they are
    (the same objects), so this is cheap on ordinary data."""
    if not any_string(value, _has_surrogate):
        return value
    try:
        return cast(T, map_strings(value, replace_lone_surrogates))
    except RecursionError:      # nested as deeply as the JSON parser allows: left to the loader's checks
        return value


def replace_lone_surrogates(s: str) -> str:
    if not _has_surrogate(s):
        return s
    return "".join(REPLACEMENT if 0xd800 <= ord(ch) <= 0xdfff else ch for ch in s)


def map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    """``value`` (JSON: dicts, lists, strings, numbers) with ``fn`` applied to every string, keys included.
    Containers in which nothing changed are returned as they were."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        out = {fn(k) if isinstance(k, str) else k: map_strings(v, fn) for k, v in value.items()}
        same = len(out) == len(value) and all(a is b and ka == kb for (ka, a), (kb, b)
                                             in zip(out.items(), value.items()))
        return value if same else out
    if isinstance(value, (list, tuple)):
        items = [map_strings(v, fn) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return items if isinstance(value, list) else tuple(items)
    return value


def any_string(value: object, test: Callable[[str], bool]) -> bool:
    """True if ``test`` holds for a string (or key) anywhere in a JSON value."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if test(item):
                return True
        elif isinstance(item, dict):
            stack.extend(k for k in item if isinstance(k, str))
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def needs_escaping(text: str) -> bool:
    """Would :func:`safe_text` (newlines kept) change ``text``?"""
    return not (text.isascii() and text.isprintable()) and safe_text(text) != text
