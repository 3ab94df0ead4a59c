"""What a file is, from its first kilobytes: is it one of our results files, and of which sweep?

Scanning a folder (earlier results for estimates) and checking an output path (is this an
existing results file, never to be overwritten?) must not read whole files nor wait on one:
:func:`peek_header` reads at most :data:`HEAD_BYTES` of a regular file (a FIFO or a device is
never opened for long, see :func:`draftbench.common.reading.read_head`) and parses the top-level
keys that come before ``"results"`` — draftbench writes ``name``, ``hardware``, ``backend``,
``settings``, ``schema_version`` and ``tool`` first, upstream files their header first too.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from ..common.reading import is_gzip, read_head, read_tail

HEAD_BYTES = 256 * 1024
_SPACE = re.compile(r"\s*")
_DECODER = json.JSONDecoder()
# a copy written by --redact-paths ends with this key (unknown keys are written after the rows)
_REDACTED_END = re.compile(rb'"redacted_paths"\s*:\s*true\s*}\s*$')


@dataclass(frozen=True)
class Header:
    """The top-level keys read before the rows; ``has_results``: a ``"results"`` list follows."""

    keys: dict[str, Any] = field(default_factory=dict)
    has_results: bool = False

    @property
    def ours(self) -> bool:
        """Written by draftbench (not upstream, not another tool)."""
        version = self.keys.get("schema_version")
        return self.keys.get("tool") == "draftbench" and isinstance(version, int) and not isinstance(version, bool)

    @property
    def is_results(self) -> bool:
        return self.has_results or self.ours


def peek_header(path: str | os.PathLike, n_bytes: int = HEAD_BYTES) -> Header | None:
    """The header of ``path`` when it begins like a results file (a JSON object); None otherwise
    (not a regular file, unreadable, gzip, not JSON)."""
    head = read_head(path, n_bytes)
    if not head or is_gzip(head):
        return None
    text = head.decode("utf-8", "replace")
    i = _SPACE.match(text).end()                 # type: ignore[union-attr]
    if text[i:i + 1] != "{":
        return None
    keys: dict[str, Any] = {}
    i += 1
    try:
        while True:
            i = _SPACE.match(text, i).end()      # type: ignore[union-attr]
            if text[i] == "}":
                return Header(keys)
            key, i = _DECODER.raw_decode(text, i)
            i = _SPACE.match(text, i).end()      # type: ignore[union-attr]
            if not isinstance(key, str) or text[i] != ":":
                return None
            i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
            if key == "results":
                return Header(keys, has_results=text[i] == "[")
            keys[key], i = _DECODER.raw_decode(text, i)
            i = _SPACE.match(text, i).end()      # type: ignore[union-attr]
            if text[i] == ",":
                i += 1
            elif text[i] != "}":
                return None
    except (ValueError, IndexError):             # the head ends inside a value: what was read so far
        return Header(keys) if keys else None


def is_redacted_copy(path: str | os.PathLike) -> bool:
    """A copy written by ``--redact-paths`` (it may be rewritten by the next one): its last bytes say so."""
    tail = read_tail(path, 256)
    return bool(tail and _REDACTED_END.search(tail))
