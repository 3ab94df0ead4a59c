"""Results files: rows as frozen dataclasses, a schema version, atomic saves, upstream loading.

A results file is upstream draftbench's JSON (top-level ``timestamp, name, hardware, backend,
model_family, settings, results``; rows with ``target, draft, mean_tps, median_tps, mean_ttft,
mean_total_time, wall_time, acceptance_rate``) plus fields this tool adds. Files without a
``schema_version`` are upstream files: they load everywhere (reports included) but are not
resumed into. Unknown row fields are kept and written back unchanged.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Protocol

from ..common.bulk import collector_paused
from ..common.errors import ResultsFileError
from ..common.files import describe_write_error, write_output_text
from ..common.strict_json import finite_json
from ..common.text_safety import without_lone_surrogates
from ..config.settings import BackendSettings, Settings
from .journal import journal_for, replayed
from .json_types import BOOL, INT, NO_DEFAULT, STR, ListOf, Spec, Str, declarations, declare, spec_of, write_fields
from .kinds import Role
from .row import UPSTREAM_ROW_KEYS, RequestRecord, Row, combination_title
from .sanity import rows_problem
from .source import may_hold_surrogates, parse_results_json, read_results_text
from .speedup import Speedup
from .theory import Theory
from .value_shapes import CONFIG, HOST, LOAD_BEFORE, PROMPT_SET, SETTINGS, SUMMARY

# Rows, their requests and values are read from here too (results.row, speedup, theory).
__all__ = ["SCHEMA_VERSION", "TOOL", "UPSTREAM_ROW_KEYS", "RequestRecord", "ResultsFile", "Row", "Speedup",
           "Theory", "combination_title", "finite_json", "load_results", "now_iso", "save_results"]

# 2: warnings are objects ({code, message, setting}); requests record where their draft counts came from.
# 3: ceiling rows (role "ceiling": synthetic acceptance); acceptance by draft position, diagnosis, k prediction.
# 4: the measurement design (rows' ``design``; requests' ``session``, ``block``, ``seen_before``, ``compared_with``)
#    and what the server's counters allow (rows' ``counter_bound``).
SCHEMA_VERSION = 4
TOOL = "draftbench"
MADE_BY = ("sweep.py", "bench.py")      # a sweep, or bench.py's one-command A/B (older files: a sweep)


class WrittenSummary(Protocol):
    """What ``ResultsFile.summary`` holds: the analysis's typed ``analysis.summary.Summary`` (a layer above), or a
    file's :class:`StoredSummary`; either writes the file's ``summary`` object."""

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class StoredSummary:
    """A file's summary as it was read: only ever written back (a redacted copy keeps it), never rendered —
    every view analyses the rows again (``analysis.verdict.analyze``), which replaces it with the typed one."""

    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(self.data))      # a copy: what the file held, as it held it


@dataclass(frozen=True, kw_only=True)
class ResultsFile:
    """A results file: upstream's keys first, then this tool's; ``extra`` keeps unknown keys."""

    OTHER_KEYS: ClassVar[dict[str, Spec]] = {"redacted_paths": BOOL}   # a copy written by sweep.py --redact-paths

    timestamp: str | None = declare(STR, "ISO 8601", upstream=True)   # when saved, unless set
    # null in a file reads as "unnamed", "unknown", "unknown", ""
    name: str = declare(STR, default=NO_DEFAULT, upstream=True)
    hardware: str = declare(STR, default=NO_DEFAULT, upstream=True)
    backend: str = declare(STR, default=NO_DEFAULT, upstream=True)
    model_family: str = declare(STR, default=NO_DEFAULT, upstream=True)
    settings: dict = declare(SETTINGS, default=NO_DEFAULT, upstream=True)
    # draftbench additions (an upstream file is written back without those that are null)
    schema_version: int | None = declare(INT, default=SCHEMA_VERSION)   # None = an upstream draftbench file
    tool: str | None = declare(STR, default=TOOL)
    tool_version: str | None = declare(STR)
    config: dict | None = declare(CONFIG)               # what defines the sweep (for resume checks)
    host: dict | None = declare(HOST)
    # the verdicts (analysis.summary.Summary), recomputed by every analysis; a file's own only written back
    summary: WrittenSummary | None = declare(SUMMARY)
    prompt_set: dict | None = declare(PROMPT_SET)       # the prompts measured: sample size, seed, ids (config.prompts)
    made_by: str | None = declare(Str(choices=MADE_BY))   # the command that measured it: warnings name its flags
    load_before: list | None = declare(LOAD_BEFORE)     # the machine's load just before each run (a resume adds one)
    results: tuple[Row, ...] = declare(ListOf(spec_of(Row), nullable=False), required=True, factory=tuple,
                                       upstream=True)
    extra: dict = field(default_factory=dict)

    @property
    def is_upstream(self) -> bool:
        return self.schema_version is None

    def read_settings(self, backend: type[BackendSettings] = BackendSettings) -> Settings:
        """The settings the file was made with, typed (``backend``: which backend's own keys to read): a key
        the file lacks or holds an invalid value for reads as the declared default, or as its value for files
        older than the key (see :meth:`Settings.from_file`)."""
        return Settings.from_file(self.settings, backend, measured=bool(self.results))

    def recorded_settings(self, keys: Iterable[str]) -> dict[str, Any]:
        """Those of ``keys`` the file's settings hold, as written there (to show what a file says; to use
        the settings, :meth:`read_settings`)."""
        return {key: self.settings[key] for key in keys if self.records_setting(key)}

    def records_setting(self, key: str) -> bool:
        """Whether the file's settings hold ``key`` (an older or upstream file may not)."""
        return key in (self.settings or {})

    def row(self, key: tuple) -> Row | None:
        return self._by_key.get(key)

    # Indexes built once per (immutable) file, so that the analysis asking for every row's baseline
    # and every target's rows stays O(rows), not O(rows²) (a 50k-row export took minutes).
    @cached_property
    def _by_key(self) -> dict[tuple, Row]:
        found: dict[tuple, Row] = {}
        for r in self.results:
            found.setdefault(r.key, r)       # the first, as a scan would find it
        return found

    @cached_property
    def _baselines(self) -> dict[tuple[str, int], Row]:
        found: dict[tuple[str, int], Row] = {}
        for r in self.results:
            if r.role is Role.BASELINE and r.ok:
                found.setdefault((r.target, r.concurrency), r)
        return found

    @cached_property
    def _by_target(self) -> dict[str, tuple[Row, ...]]:
        found: dict[str, list[Row]] = {}
        for r in self.results:
            found.setdefault(r.target, []).append(r)
        return {target: tuple(rows) for target, rows in found.items()}

    def baseline_for(self, target: str, concurrency: int = 1) -> Row | None:
        """The target's measured baseline at ``concurrency`` streams (the first, as the file lists them)."""
        return self._baselines.get((target, concurrency))

    def rows_of(self, target: str) -> tuple[Row, ...]:
        """Every row of ``target``, in file order."""
        return self._by_target.get(target, ())

    def with_row(self, row: Row) -> ResultsFile:
        """Add or replace (same key) a row, keeping the order of first appearance."""
        rows = list(self.results)
        for i, existing in enumerate(rows):
            if existing.key == row.key:
                rows[i] = row
                break
        else:
            rows.append(row)
        return replace(self, results=tuple(rows))

    def to_dict(self) -> dict:
        out = write_fields(self)
        out["timestamp"] = self.timestamp or now_iso()
        if self.is_upstream:
            for name, declared in declarations(ResultsFile).items():
                if not declared.upstream and out[name] is None:
                    del out[name]
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out

    @classmethod
    def from_dict(cls, data: dict, source: str = "<results>", *, may_hold_surrogates: bool = True) -> ResultsFile:
        """``may_hold_surrogates=False``: the file's text was seen to hold no ``\\uD800``-style escape, so the
        walk that replaces lone surrogates is skipped (it was a third of loading a large file)."""
        if may_hold_surrogates:
            data = without_lone_surrogates(data)    # JSON allows them; UTF-8 files, terminals and reports do not
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            raise ResultsFileError(f"{source} is not a draftbench results file (no \"results\" list)",
                                   "pass a file written by draftbench, or choose a new --results path")
        version = data.get("schema_version")
        if version is not None:
            if isinstance(version, bool) or not isinstance(version, int) or version < 1:
                raise ResultsFileError(f"{source}: schema_version {version!r} is not a valid version number",
                                       "the file was edited or is from another tool; use a new --results path")
            if version > SCHEMA_VERSION:
                raise ResultsFileError(f"{source} was written by a newer draftbench (results schema {version}, this "
                                       f"version reads up to {SCHEMA_VERSION})", "upgrade draftbench "
                                       "(git pull && pip install -e .), or use a new --results path")
            if data.get("tool", TOOL) != TOOL:
                raise ResultsFileError(f"{source} was written by {data.get('tool')!r}, not draftbench",
                                       "use a new --results path")
        spec = spec_of(cls)
        problem = None if spec.valid(data) else spec.check(data, "$")     # the path is built only for a bad value
        if problem:
            where, what = problem
            raise ResultsFileError(f"{source}: {where} {what}; the file was left untouched",
                                   "fix that value (or restore the file from a backup), or pass a new --results "
                                   "path to start over")
        rows = []
        for i, raw in enumerate(data["results"]):
            try:
                rows.append(Row.from_checked(raw))      # checked by the walk above: not value by value again
            except (TypeError, ValueError) as exc:
                raise ResultsFileError(f"{source}: results[{i}] is not a valid row ({exc})",
                                       "restore the file from a backup, or use a new --results path") from None
        inconsistent = rows_problem(rows)
        if inconsistent:
            where, what, fix = inconsistent
            raise ResultsFileError(f"{source}: {where} {what}; the file was left untouched", fix)
        known = declarations(cls)

        def text(key, default):
            value = data.get(key)
            return value if isinstance(value, str) else default

        return cls(name=text("name", "unnamed"), hardware=text("hardware", "unknown"), backend=text("backend", "unknown"),
                   model_family=text("model_family", ""),
                   settings=settings if isinstance(settings := data.get("settings"), dict) else {},
                   results=tuple(rows), timestamp=data.get("timestamp"), schema_version=version,
                   tool=data.get("tool") if version is not None else None, tool_version=data.get("tool_version"),
                   config=data.get("config"), host=data.get("host"), summary=_stored_summary(data.get("summary")),
                   prompt_set=data.get("prompt_set"), made_by=data.get("made_by"),
                   load_before=data.get("load_before"),
                   extra={k: v for k, v in data.items() if k not in known})


def _stored_summary(value: Any) -> StoredSummary | None:
    return StoredSummary(value) if isinstance(value, dict) else None


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def load_results(path: str | os.PathLike, *, allow_gzip: bool = True) -> ResultsFile:
    """Read (bounded: see :mod:`draftbench.results.source`), parse and check a results file, with the rows its
    journal holds (:mod:`draftbench.results.journal`: a sweep that has not rewritten the file since)."""
    source = str(path)
    text = read_results_text(path, allow_gzip=allow_gzip)
    with collector_paused():
        results = ResultsFile.from_dict(parse_results_json(text, source), source=source,
                                        may_hold_surrogates=may_hold_surrogates(text))
        rows = replayed(results.results, Path(path))
    if rows is None:
        return results
    inconsistent = rows_problem(rows)
    if inconsistent:
        where, what, fix = inconsistent
        raise ResultsFileError(f"{source} with its journal {journal_for(Path(path))}: {where} {what}", fix)
    return replace(results, results=tuple(rows))


def save_results(results: ResultsFile, path: str | os.PathLike) -> None:
    """Write atomically (see :func:`draftbench.common.files.write_output_text`): a crash or Ctrl-C at any
    moment leaves either the old file or the new one, never half; a failure (disk full, no permission)
    leaves the old file as it was and raises :class:`ResultsFileError`."""
    p = Path(path)
    payload = json.dumps(finite_json(results.to_dict()), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    try:
        write_output_text(p, payload)
    except OSError as exc:
        raise ResultsFileError(f"cannot write results file {p}: {describe_write_error(exc)}"
                               + ("; the previous version was left untouched" if p.is_file() else ""),
                               "point the link at a real file, or pass another --results path" if exc.errno == errno.ELOOP
                               else "check free disk space and the folder's permissions, or pass another --results "
                               "path") from None
