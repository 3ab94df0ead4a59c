"""Where a sweep writes, checked before anything starts so that no input is ever overwritten.

A sweep reads its config(s) and an existing results file, and writes the results file, its
report, its journal and a logs folder beside the results (its lock lives in draftbench's cache, see
:mod:`draftbench.results.lock`). :func:`check_output_paths` refuses
any two of those that are the same file (after resolving symlinks, and by inode where both
exist), a results path ending in ``.html``, a report path ending in ``.json``, a folder where a
file belongs (or the reverse) and file names too long for the file system. Nothing is written.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..common.errors import ResultsFileError, UsageError
from ..common.reading import kind_of
from .journal import journal_for, refuse_foreign

NAME_MAX_BYTES = 255     # ext4, APFS, NTFS: longer names fail with "File name too long"
_HTML = (".html", ".htm")


def logs_dir_for(results: Path) -> Path:
    """``results/x.json`` -> ``results/x.logs``: one server log per combination."""
    return results.with_name(results.stem + ".logs")


def default_chart_for(results: Path) -> Path:
    return results.with_suffix(".html")


@dataclass(frozen=True)
class _Role:
    what: str        # how the user named it: "--results", "--chart", "the config"
    path: Path
    kind: str        # "file" | "folder"
    writes: bool     # whether this run writes it


def _same(a: Path, b: Path) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)     # hard links, case-insensitive file systems
    except OSError:
        return False


def _shape_problem(role: _Role) -> str | None:
    p = role.path
    name_bytes = len(os.fsencode(p.name))
    if name_bytes > NAME_MAX_BYTES:
        return (f"{role.what} {p}: the file name is {name_bytes} bytes long; file systems allow at most "
                f"{NAME_MAX_BYTES}")
    if p.is_symlink() and not p.exists():
        try:
            os.stat(p)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return (f"{role.what} {p} is a symbolic link that loops (it points, directly or through other "
                        "links, back to itself)")
    if role.what == "--results" and p.exists() and not p.is_dir():
        kind = kind_of(p.stat().st_mode)
        if kind is not None:     # read back and rewritten: a pipe or a device would hang or read for ever
            return f"--results {p} is {kind}, not a regular file; a results file is read back and rewritten"
    if p.exists() or p.is_symlink():
        if role.kind == "file" and p.is_dir():
            return f"{role.what} {p} is a folder, not a file"
        if role.kind == "folder" and not p.is_dir():
            return (f"{role.what} {p} is a file; draftbench keeps the server logs in a folder of that name "
                    "beside the results")
        return None
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        return f"{role.what} {p}: {parent} is a file, not a folder"
    return None


def check_output_paths(results: Path, chart: Path | None, configs: Sequence[Path] = (), *,
                       sweeping: bool = True) -> None:
    """Raise :class:`UsageError` (exit 2) when a write could destroy an input or cannot work at all.

    ``sweeping`` adds the logs folder (a sweep writes it; ``--chart-only`` only reads the results
    and writes the report).
    """
    if results.suffix.lower() in _HTML:
        raise UsageError(f"--results {results} ends in {results.suffix}: the results file is JSON, and the report "
                         "would be written over it", f"use --results {results.with_suffix('.json')} (the report "
                         "goes to the same name with .html)")
    if chart is not None and chart.suffix.lower() == ".json":
        raise UsageError(f"--chart {chart} ends in .json: the report is an HTML page",
                         f"use --chart {chart.with_suffix('.html')}")
    roles = [_Role("--results", results, "file", sweeping)]
    if chart is not None:
        roles.append(_Role("--chart", chart, "file", True))
    if sweeping:
        roles.append(_Role("the logs folder", logs_dir_for(results), "folder", True))
        roles.append(_Role("the journal", journal_for(results), "file", True))
    roles += [_Role("the config", Path(c), "file", False) for c in configs]
    for role in roles:
        problem = _shape_problem(role) if role.writes or role.what == "--results" else None
        if problem:
            option = role.what if role.what.startswith("--") else "--results"
            raise UsageError(problem, f"pass another {option} path, or move what is at {role.path} away")
    if sweeping:
        try:
            refuse_foreign(results)
        except ResultsFileError as exc:
            raise UsageError(exc.message, exc.fix) from None
    for i, a in enumerate(roles):
        for b in roles[i + 1:]:
            if (a.writes or b.writes) and _same(a.path, b.path):
                raise UsageError(f"{a.what} {a.path} and {b.what} {b.path} are the same file"
                                 f"{'' if str(a.path) == str(b.path) else f' ({os.path.realpath(a.path)})'}: "
                                 f"writing {b.what if b.writes else a.what} would destroy "
                                 f"{a.what if b.writes else b.what}",
                                 "give each its own path (--results x.json, --chart x.html)")


def check_new_file(what: str, path: Path, inputs: Sequence[Path], *, html: bool) -> None:
    """Raise :class:`UsageError` (exit 2) when writing ``path`` (a report when ``html``, else an export or
    a copy) would destroy one of ``inputs`` (the results files a command reads) or cannot work at all.

    For the commands that only read results files (``--compare``, ``--export``, ``--redact-paths``).
    """
    if html and path.suffix.lower() == ".json":
        raise UsageError(f"{what} {path} ends in .json: the report is an HTML page",
                         f"use {what} {path.with_suffix('.html')}")
    problem = _shape_problem(_Role(what, path, "file", True))
    if problem:
        raise UsageError(problem, f"pass another {what} path, or move what is at {path} away")
    for source in inputs:
        if _same(path, source):
            raise UsageError(f"{what} {path} is the input file {source}: writing it would destroy the input",
                             f"pass another {what} path")
