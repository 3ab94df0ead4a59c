"""A results file's journal: what a sweep records, appended as it is recorded, so that saving costs what was
recorded, not the whole file.

Beside ``results/x.json`` a sweep keeps ``results/x.journal``: a header line, then one strict-JSON line per
recorded row — the row's fields without its requests, how many requests it keeps from the row as the file and
the journal held it before (``kept``), and the requests it adds. Each line is written with one ``write`` and
synced before the sweep goes on, so Ctrl-C, SIGKILL or a power cut loses at most the line being written (a torn
last line is ignored). The sweep rewrites the results file (atomically, :func:`file.save_results`) when the
journal has grown past it and at the end, and then empties the journal; between, every reader of the file
(:func:`file.load_results`: a resumed sweep, ``--chart-only``, an export) reads it with its journal replayed.

The journal is only ever the one whose header names its results file: a file of that name that is not one is
never read, and a sweep refuses to start over it (``output_paths``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..common.errors import ResultsFileError
from ..common.strict_json import finite_json, loads_unique
from .json_types import spec_of
from .row import RequestRecord, Row
from .source import read_results_text

HEADER = "draftbench_journal"
VERSION = 1


def journal_for(results: Path) -> Path:
    """``results/x.json`` -> ``results/x.journal``."""
    return results.with_name(results.stem + ".journal")


def _header_line(results: Path) -> bytes:
    return (json.dumps({HEADER: VERSION, "results": results.name}) + "\n").encode()


def is_journal_of(results: Path, path: Path | None = None) -> bool:
    """Whether ``path`` (default: the journal's place) is this results file's journal (its first line says so)."""
    path = path or journal_for(results)
    try:
        with open(path, "rb") as f:
            first = f.readline(4096)
    except OSError:
        return False
    try:
        head = json.loads(first)
    except ValueError:
        return False
    return isinstance(head, dict) and head.get(HEADER) == VERSION and head.get("results") == results.name


def refuse_foreign(results: Path) -> None:
    """Raise when something other than this results file's journal is where its journal goes (never written)."""
    path = journal_for(results)
    if (path.exists() or path.is_symlink()) and (path.is_symlink() or not is_journal_of(results, path)):
        raise ResultsFileError(f"{path} is in the way: a sweep keeps the journal of {results.name} there (the rows "
                               "recorded since the file was last rewritten), and that is not one",
                               f"move {path} away, or pass another --results path")


class Journal:
    """The journal of one results file, open for appending (one sweep at a time: the results file's lock)."""

    def __init__(self, results: Path):
        self.results = results
        self.path = journal_for(results)
        refuse_foreign(results)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
        self.size = 0
        self._write(_header_line(results))

    def _write(self, data: bytes) -> None:
        done = 0
        while done < len(data):
            done += os.write(self._fd, data[done:])
        os.fsync(self._fd)
        self.size += len(data)

    def record(self, row: Row, prior: Row | None) -> None:
        """Append ``row``: its fields, and its requests beyond those ``prior`` (as last saved) already holds."""
        requests = row.requests
        kept = len(prior.requests) if prior is not None and _extends(requests, prior.requests) else 0
        entry = {"row": replace(row, requests=()).to_dict(), "kept": kept,
                 "added": [r.to_dict() for r in requests[kept:]]}
        self._write(_line(entry))

    def reset(self) -> None:
        """Empty it (its rows are in the results file now)."""
        os.ftruncate(self._fd, 0)
        os.lseek(self._fd, 0, os.SEEK_SET)
        self.size = 0
        self._write(_header_line(self.results))

    def remove(self) -> None:
        """Close and delete it (the results file holds everything)."""
        os.close(self._fd)
        self.path.unlink(missing_ok=True)


def _line(entry: dict) -> bytes:
    """One strict-JSON line (compact: written by the C encoder); a NaN or a lone surrogate made strict first."""
    try:
        return (json.dumps(entry, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n").encode()
    except (ValueError, UnicodeEncodeError):
        return (json.dumps(finite_json(entry), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
                + "\n").encode()


def _extends(requests: Sequence[RequestRecord], prior: Sequence[RequestRecord]) -> bool:
    return len(requests) >= len(prior) and all(a is b or a == b for a, b in zip(requests, prior))


def replayed(rows: Iterable[Row], results: Path) -> list[Row] | None:
    """``rows`` (the results file's) with its journal's entries applied in order (a row replaced where its key is
    already there, else added after the others); None when there is no journal for it."""
    path = journal_for(results)
    if not path.is_file() or not is_journal_of(results, path):
        return None
    text = read_results_text(path, allow_gzip=False)
    lines = text.split("\n")
    complete = lines[1:-1]            # the last piece has no newline: empty, or a line torn by a crash
    by_key = {r.key: r for r in rows}
    for number, line in enumerate(complete, 2):
        where = f"{path} line {number}"
        try:
            entry = loads_unique(line)
        except (ValueError, RecursionError) as exc:
            raise ResultsFileError(f"{where} is not valid JSON ({exc})", _move_away(path)) from None
        row = _entry_row(entry, by_key, where, _move_away(path))
        by_key[row.key] = row
    return list(by_key.values())


def _move_away(path: Path) -> str:
    return f"move {path} away to read the results file without the rows it holds (a sweep wrote them there)"


def _entry_row(entry: Any, by_key: dict[tuple, Row], where: str, fix: str) -> Row:
    if not isinstance(entry, dict) or not isinstance(entry.get("row"), dict) or \
            not isinstance(entry.get("kept"), int) or not isinstance(entry.get("added"), list):
        raise ResultsFileError(f"{where} is not a journal entry", fix)
    fields, added = entry["row"], entry["added"]
    problem = spec_of(Row).check({**fields, "requests": added}, "$")
    if problem or not isinstance(fields.get("target"), str):
        raise ResultsFileError(f"{where}: {' '.join(problem) if problem else 'no target'}", fix)
    try:
        row = Row.from_checked({**fields, "requests": []})
        new = tuple(RequestRecord.from_checked(r) for r in added)
    except (TypeError, ValueError) as exc:
        raise ResultsFileError(f"{where} is not a valid row ({exc})", fix) from None
    prior = by_key.get(row.key)
    if entry["kept"] > (len(prior.requests) if prior is not None else 0):
        raise ResultsFileError(f"{where} keeps {entry['kept']} requests of a row the file holds "
                               f"{len(prior.requests) if prior is not None else 'no'} requests of", fix)
    return replace(row, requests=(prior.requests[: entry["kept"]] if prior is not None else ()) + new)
