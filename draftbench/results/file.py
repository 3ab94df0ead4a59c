"""Results files: rows as frozen dataclasses, a schema version, atomic saves, upstream loading.

A results file is upstream draftbench's JSON (top-level ``timestamp, name, hardware, backend,
model_family, settings, results``; rows with ``target, draft, mean_tps, median_tps, mean_ttft,
mean_total_time, wall_time, acceptance_rate``) plus fields this tool adds. Files without a
``schema_version`` are upstream files: they load everywhere (reports included) but are not
resumed into. Unknown row fields are kept and written back unchanged.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..common.errors import ResultsFileError
from ..common.files import atomic_write_text
from .findings import Finding
from .kinds import ROLES, STATUSES
from .schema import first_problem
from .speedup import Speedup
from .theory import Theory

# 2: warnings are objects ({code, message, setting}); requests record where their draft counts came from.
# 3: ceiling rows (role "ceiling": synthetic acceptance); acceptance by draft position, diagnosis, k prediction.
# 4: the measurement design (rows' ``design``; requests' ``session``, ``block``, ``seen_before``, ``compared_with``)
#    and what the server's counters allow (rows' ``counter_bound``).
SCHEMA_VERSION = 4
TOOL = "draftbench"

UPSTREAM_ROW_KEYS = ("target", "draft", "mean_tps", "median_tps", "mean_ttft", "mean_total_time", "wall_time",
                     "acceptance_rate")



def combination_title(role: str, target: str, draft: str | None, draft_max: int | None, *, show_k: bool,
                      concurrency: int = 1, synthetic: str | None = None) -> str:
    """How a combination is named to people (console, report, log file names); ``synthetic`` is a
    ceiling run's level (see :mod:`draftbench.analysis.draft.ceiling`)."""
    streams = f" [{concurrency} streams]" if concurrency != 1 else ""
    if role == "baseline":
        return f"{target} (baseline){streams}"
    if role == "control":
        return f"{target} (baseline again, drift check){streams}"
    if role == "draft_alone":
        return f"{target} (draft alone, for its cost ratio){streams}"
    k = f" (k={draft_max})" if show_k and draft_max is not None else ""
    if role == "ceiling":
        what = "full acceptance" if synthetic == "full" else "its measured acceptance"
        return f"{target} + {draft}{k}{streams} [synthetic: {what}]"
    return f"{target} + {draft}{k}{streams}"


@dataclass(frozen=True)
class RequestRecord:
    """One measured request. Times in seconds on the client clock unless the name says otherwise."""

    prompt_id: str
    category: str
    run: int
    ttft_s: float | None = None
    total_s: float | None = None
    decode_tps: float | None = None          # client: (completion_tokens - 1) / (t_last - t_first)
    server_decode_tps: float | None = None   # server's own figure (llama.cpp timings.predicted_per_second)
    server_ttft_s: float | None = None       # server's own TTFT (LM Studio's SDK: timeToFirstTokenSec)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    draft_n: int | None = None
    draft_n_accepted: int | None = None
    verify_steps: int | None = None
    accepted_per_pos: list | None = None     # accepted draft tokens by draft position (0 = first drafted token)
    draft_source: str | None = None          # where the draft counts came from (backends.CountsSource)
    draft_details: dict | None = None        # backend-specific draft statistics, as reported
    draft_fragments: str | None = None       # LM Studio SDK: fragment trace, see draftbench.results.fragments
    finish_reason: str | None = None
    text: str | None = None
    error: str | None = None
    # where it was measured (schema 4; see sweep/schedule.py): None in older files
    session: str | None = None               # the server session (one process) that answered it
    block: int | None = None                 # the schedule's block (a repetition, or half the prompts)
    seen_before: bool | None = None          # the method's state could have seen this prompt on this server
    compared_with: list | None = None        # candidate requests: the baseline sessions they are compared with

    def to_dict(self) -> dict:
        out = asdict(self)
        for name in ("session", "block", "seen_before", "compared_with"):
            if out[name] is None:
                del out[name]      # files from before schema 4 write back as they were
        return out

    @classmethod
    def from_dict(cls, data: dict) -> RequestRecord:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class Row:
    """One combination: a target alone (baseline), with a draft, or a draft alone."""

    target: str
    draft: str | None = None
    # upstream's summary keys (seconds; tok/s)
    mean_tps: float | None = None
    median_tps: float | None = None
    mean_ttft: float | None = None
    mean_total_time: float | None = None
    wall_time: float | None = None
    acceptance_rate: float | None = None
    # draftbench additions
    status: str = "ok"
    reason: str | None = None                 # why it errored or was skipped
    role: str = "baseline"
    draft_max: int | None = None
    target_path: str | None = None
    draft_path: str | None = None
    speculation_active: bool | None = None
    candidate: dict | None = None             # what was tried: {label, method, draft, params} (see candidates.py)
    active_methods: list | None = None        # speculative methods the server said it ran ([] = plain decoding)
    draft_n: int | None = None
    draft_n_accepted: int | None = None
    verify_steps: int | None = None
    mean_accepted_len: float | None = None    # tokens per verify step, 1 + accepted/steps (llama-server's "mean len")
    accepted_per_pos: list | None = None      # Σ accepted draft tokens by draft position over the requests
    diagnosis: Finding | None = None          # where the draft's tokens are rejected, in one line (see perpos.py)
    k_prediction: dict | None = None          # tok/s predicted for every k from this row (see kpredict.py)
    synthetic: dict | None = None             # ceiling rows: {level, synth_len, k, from_mean_accepted_len}
    ceiling: dict | None = None               # speculative rows: this draft against its ceiling (see ceiling.py)
    draft_fragments: dict | None = None       # LM Studio SDK: runs and placement of drafted fragments
    tps: dict | None = None                   # summary of per-request decode tok/s
    server_tps: dict | None = None            # summary of the server's own decode tok/s
    ttft_s: dict | None = None
    total_s: dict | None = None
    load_time_s: float | None = None
    run_to_run_cv: float | None = None
    by_category: dict | None = None           # category -> {mean_tps, acceptance_rate, n}
    speedup: Speedup | None = None            # vs the target's baseline (see stats.speedup)
    speedup_by_category: dict[str, Speedup] | None = None   # category -> speed-up on its requests (categories.py)
    method_stats: dict | None = None          # speculative implementation -> its counters (method_stats.py)
    degenerate_output: dict | None = None     # requests resting on the target's looping output (degenerate.py)
    equivalence: dict | None = None           # output vs the baseline's at temperature 0
    theory: Theory | None = None              # the textbook model beside the measurement (theory.py)
    warnings: tuple[Finding, ...] = ()
    server: dict | None = None                # backend, command, version, log, port
    started_at: str | None = None
    race: dict | None = None                  # adaptive search: loads, requests planned, interval, decision
    design: dict | None = None                # how it was measured against its baseline (sweep/schedule.py)
    counter_bound: dict | None = None         # the most its counters allow, and whether the measurement exceeds it
    requests: tuple[RequestRecord, ...] = ()
    concurrency: int = 1                      # requests in flight at once (server slots); 1 in older files
    load: dict | None = None                  # N > 1: what the N streams did together (see measure_concurrent)
    extra: dict = field(default_factory=dict)  # unknown keys from the file, written back as they were

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role {self.role!r} is not one of {', '.join(ROLES)}")
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {', '.join(STATUSES)}")
        if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise ValueError(f"concurrency {self.concurrency!r} is not a whole number of at least 1")
        if not all(isinstance(w, Finding) for w in self.warnings):
            object.__setattr__(self, "warnings", tuple(w if isinstance(w, Finding) else Finding.from_value(w)
                                                       for w in self.warnings))
        if self.diagnosis is not None and not isinstance(self.diagnosis, Finding):
            object.__setattr__(self, "diagnosis", Finding.from_value(self.diagnosis))
        # Read from a file (or written as a dict by hand): validated into their classes here.
        if self.speedup is not None and not isinstance(self.speedup, Speedup):
            object.__setattr__(self, "speedup", Speedup.from_dict(self.speedup))
        if self.speedup_by_category is not None:
            if not isinstance(self.speedup_by_category, dict):
                raise ValueError("speedup_by_category is not an object")
            object.__setattr__(self, "speedup_by_category", {category: speed if isinstance(speed, Speedup) else
                                                             Speedup.from_dict(speed)
                                                             for category, speed in self.speedup_by_category.items()})
        if self.theory is not None and not isinstance(self.theory, Theory):
            object.__setattr__(self, "theory", Theory.from_dict(self.theory))

    @property
    def key(self) -> tuple:
        """Identity for resume: what was measured, not how it turned out. One stream keeps the key it
        always had, so older files resume; a ceiling row is one of several levels for the same draft."""
        key: tuple = (self.role, self.target, self.draft, self.draft_max)
        if self.role == "ceiling":
            key += ((self.synthetic or {}).get("level"),)
        return key if self.concurrency == 1 else (*key, self.concurrency)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def measured(self) -> bool:
        """It holds measurements: a finished row, or one an adaptive race eliminated after its probe."""
        return self.status in ("ok", "eliminated")

    @property
    def is_speculative(self) -> bool:
        return self.role == "speculative" and self.draft is not None

    def counts_as_speedup(self) -> bool:
        """Only a measured, speculating row may ever be shown as a speed-up."""
        return self.ok and self.is_speculative and self.speculation_active is not False

    def to_dict(self) -> dict:
        out: dict[str, Any] = {k: getattr(self, k) for k in UPSTREAM_ROW_KEYS}
        for f in fields(self):
            if f.name in out or f.name in ("extra", "requests", "warnings"):
                continue
            out[f.name] = getattr(self, f.name)
        out["warnings"] = [w.to_dict() for w in self.warnings]
        out["diagnosis"] = self.diagnosis.to_dict() if self.diagnosis else None
        out["speedup"] = self.speedup.to_dict() if self.speedup else None
        out["speedup_by_category"] = None if self.speedup_by_category is None else {
            category: speed.to_dict() for category, speed in self.speedup_by_category.items()}
        out["theory"] = self.theory.to_dict() if self.theory else None
        out["requests"] = [r.to_dict() for r in self.requests]
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Row:
        if not isinstance(data, dict) or not isinstance(data.get("target"), str):
            raise ValueError("a result row needs a string 'target'")
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known and k not in ("extra", "requests", "warnings")}
        extra = {k: v for k, v in data.items() if k not in known}
        if "error" in data and "status" not in data:
            # upstream marks failed runs with {"error": "server_failed"}
            kwargs["status"] = "error"
            kwargs["reason"] = str(data["error"])
            extra.pop("error", None)
        if "role" not in data:
            kwargs["role"] = "baseline" if data.get("draft") is None else "speculative"
        if kwargs.get("role") == "speculative" and "speculation_active" not in data:
            kwargs["speculation_active"] = None  # upstream never checked
        kwargs["warnings"] = tuple(Finding.from_value(w) for w in data.get("warnings") or ())
        kwargs["requests"] = tuple(RequestRecord.from_dict(r) for r in data.get("requests") or () if isinstance(r, dict))
        return cls(extra=extra, **kwargs)


@dataclass(frozen=True)
class ResultsFile:
    name: str
    hardware: str
    backend: str
    model_family: str
    settings: dict
    results: tuple[Row, ...] = ()
    timestamp: str | None = None
    schema_version: int | None = SCHEMA_VERSION   # None = an upstream draftbench file
    tool: str | None = TOOL
    tool_version: str | None = None
    config: dict | None = None                    # what defines the sweep (for resume checks)
    host: dict | None = None
    summary: dict | None = None                   # recommendations etc., recomputed on save
    extra: dict = field(default_factory=dict)

    @property
    def is_upstream(self) -> bool:
        return self.schema_version is None

    def row(self, key: tuple) -> Row | None:
        return next((r for r in self.results if r.key == key), None)

    def baseline_for(self, target: str, concurrency: int = 1) -> Row | None:
        """The target's measured baseline at ``concurrency`` streams."""
        return next((r for r in self.results if r.role == "baseline" and r.target == target and r.ok
                     and r.concurrency == concurrency), None)

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
        out = {
            "timestamp": self.timestamp or now_iso(),
            "name": self.name, "hardware": self.hardware, "backend": self.backend,
            "model_family": self.model_family, "settings": self.settings,
            "schema_version": self.schema_version, "tool": self.tool, "tool_version": self.tool_version,
            "config": self.config, "host": self.host, "summary": self.summary,
            "results": [r.to_dict() for r in self.results],
        }
        if self.is_upstream:
            for k in ("schema_version", "tool", "tool_version", "config", "host", "summary"):
                if out[k] is None:
                    del out[k]
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out

    @classmethod
    def from_dict(cls, data: dict, source: str = "<results>") -> ResultsFile:
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
        problem = first_problem(data)
        if problem:
            where, what = problem
            raise ResultsFileError(f"{source}: {where} {what}; the file was left untouched",
                                   "fix that value (or restore the file from a backup), or pass a new --results "
                                   "path to start over")
        rows = []
        for i, raw in enumerate(data["results"]):
            try:
                rows.append(Row.from_dict(raw))
            except (TypeError, ValueError) as exc:
                raise ResultsFileError(f"{source}: results[{i}] is not a valid row ({exc})",
                                       "restore the file from a backup, or use a new --results path") from None
        known = {"timestamp", "name", "hardware", "backend", "model_family", "settings", "results", "schema_version",
                 "tool", "tool_version", "config", "host", "summary"}

        def text(key, default):
            value = data.get(key)
            return value if isinstance(value, str) else default

        return cls(name=text("name", "unnamed"), hardware=text("hardware", "unknown"), backend=text("backend", "unknown"),
                   model_family=text("model_family", ""),
                   settings=settings if isinstance(settings := data.get("settings"), dict) else {},
                   results=tuple(rows), timestamp=data.get("timestamp"), schema_version=version,
                   tool=data.get("tool") if version is not None else None, tool_version=data.get("tool_version"),
                   config=data.get("config"), host=data.get("host"), summary=data.get("summary"),
                   extra={k: v for k, v in data.items() if k not in known})


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def load_results(path: str | os.PathLike) -> ResultsFile:
    p = Path(path)
    if not p.exists():
        raise ResultsFileError(f"results file {p} does not exist", "check the path given to --results")
    if p.is_dir():
        raise ResultsFileError(f"{p} is a folder, not a results file", "pass the .json file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultsFileError(f"cannot read results file {p}: {exc}", "check its permissions") from None
    try:
        data = json.loads(text)
    except RecursionError:
        raise ResultsFileError(f"results file {p} is nested too deeply to be a results file; it was left untouched",
                               "restore it from a backup, or pass a new --results path to start over") from None
    except json.JSONDecodeError as exc:
        raise ResultsFileError(f"results file {p} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                               f"{exc.msg}); it was left untouched",
                               "restore it from a backup, or pass a new --results path to start over") from None
    return ResultsFile.from_dict(data, source=str(p))


def finite_json(value: Any) -> Any:
    """``value`` with every NaN/±Infinity replaced by None: results files are strict JSON, and a
    non-finite number is never a measurement."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def save_results(results: ResultsFile, path: str | os.PathLike) -> None:
    """Write atomically (see :func:`paths.atomic_write_text`): a crash or Ctrl-C at any moment
    leaves either the old file or the new one, never half; a failure (disk full, no permission)
    leaves the old file as it was and raises :class:`ResultsFileError`."""
    p = Path(path)
    payload = json.dumps(finite_json(results.to_dict()), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    try:
        atomic_write_text(p, payload)
    except OSError as exc:
        raise ResultsFileError(f"cannot write results file {p}: {exc.strerror or exc}"
                               + ("; the previous version was left untouched" if p.is_file() else ""),
                               "check free disk space and the folder's permissions, or pass another --results path"
                               ) from None
