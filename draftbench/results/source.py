"""A results file's text, read without trusting the file: bounded, gzip recognised, strict JSON.

The bytes come through :func:`draftbench.common.reading.read_limited` (a regular file of at most
``DRAFTBENCH_MAX_RESULTS_MB``, never a pipe or a device), a gzip file is decompressed under the
same cap (or refused where it would be written back as plain JSON: a sweep resuming), and the
JSON is parsed with duplicate keys refused with their JSON path (two ``"results"`` keys would
otherwise silently drop every row of the first). Every failure is a :class:`ResultsFileError`
that names the file, the cause and the fix.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..common.errors import ResultsFileError
from ..common.reading import RESULTS_LIMIT, UnreadableFile, gunzip_limited, is_gzip, read_limited
from ..common.strict_json import DuplicateKeyError, loads_unique

UNTOUCHED_FIX = "restore it from a backup, or pass a new --results path to start over"
# A surrogate reaches parsed JSON only through an escape (UTF-8 text cannot hold one raw): \uD800-\uDFFF
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def may_hold_surrogates(text: str) -> bool:
    """Whether parsing ``text`` can give a string with a surrogate in it (a pair, or a lone one)."""
    return _SURROGATE_ESCAPE.search(text) is not None


def read_results_text(path: str | os.PathLike, *, allow_gzip: bool = True) -> str:
    """The text of a results file (decompressed when gzip and ``allow_gzip``)."""
    p = Path(path)
    try:
        data = read_limited(p, RESULTS_LIMIT)
        if is_gzip(data):
            if not allow_gzip:
                raise UnreadableFile("is gzip-compressed; a sweep resumes into plain JSON only",
                                     f"decompress it first (gunzip -k {p}) and pass the .json file as --results, or "
                                     "pass a new --results path")
            data = gunzip_limited(data, RESULTS_LIMIT)
    except UnreadableFile as problem:
        fix = "check the path given to --results" if problem.missing else problem.fix
        raise ResultsFileError(f"results file {p} {problem.message}", fix) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResultsFileError(f"results file {p} is not UTF-8 text (byte {exc.start}); it was left untouched",
                               "pass a results file written by draftbench (JSON), or a new --results path") from None


def parse_results_json(text: str, source: str) -> Any:
    """The parsed JSON of a results file; duplicate keys, syntax errors and absurd nesting refused."""
    try:
        return loads_unique(text)
    except RecursionError:
        raise ResultsFileError(f"results file {source} is nested too deeply to be a results file; it was left "
                               "untouched", UNTOUCHED_FIX) from None
    except DuplicateKeyError as dup:
        raise ResultsFileError(f"results file {source}: {dup.path or repr(dup.key)} appears twice in the same "
                               "object (JSON would keep only the last, silently dropping the first); it was left "
                               "untouched", "keep one of the two (or restore the file from a backup)") from None
    except json.JSONDecodeError as exc:
        raise ResultsFileError(f"results file {source} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                               f"{exc.msg}); it was left untouched", UNTOUCHED_FIX) from None
    except ValueError as exc:     # e.g. an integer of more than 4300 digits
        raise ResultsFileError(f"results file {source} holds a value Python cannot read ({exc}); it was left "
                               "untouched", UNTOUCHED_FIX) from None
