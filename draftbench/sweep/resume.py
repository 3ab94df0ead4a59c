"""A sweep's results file: start it, or resume it only when it was made by the same sweep."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import __version__
from ..backends import REGISTRY
from ..backends.base import Backend
from ..common.errors import ResultsFileError
from ..common.redact_secrets import redact_args
from ..config.field import UNRECORDED
from ..config.settings import COMMON_SETTINGS, measured_keys
from ..results.file import SCHEMA_VERSION, ResultsFile, load_results, now_iso
from ..results.host import host_info
from .config_file import ModelRef, SweepConfig
from .long_context import changed_documents


def measurement_keys() -> tuple[str, ...]:
    """Settings that change what is measured, for every backend: another value means another sweep."""
    return measured_keys(*(backend.settings_class for backend in REGISTRY.values()))


def older_value(key: str) -> Any:
    """What a file written before ``key`` existed was measured with (``Field.older``), for every backend."""
    for schema in (COMMON_SETTINGS, *(backend.settings_class.schema() for backend in REGISTRY.values())):
        if key in schema:
            return schema[key].older
    return UNRECORDED


def _model_entry(ref: ModelRef, backend: Backend) -> dict:
    entry: dict = {"label": ref.label, "path": ref.path, "size_label": backend.size_label(ref.path)}
    if ref.rpc:
        entry["rpc"] = list(ref.rpc)
    return entry


def config_snapshot(config: SweepConfig, backend: Backend) -> dict:
    """What defines the sweep (saved in the results file; compared on resume). Model sizes read from
    the files (GGUF metadata) are kept so the report can class drafts whose labels say no size."""
    return {
        "source": config.source,
        "targets": [_model_entry(t, backend) for t in config.targets],
        "drafts": [_model_entry(d, backend) for d in config.drafts],
        # secrets in extra_args are masked: the snapshot is written to the results file
        "measurement": {**config.settings.values_of(measurement_keys()),
                        "extra_args": redact_args(config.settings.extra_args)},
    }


def public_settings(config: SweepConfig) -> dict:
    """The settings as saved in the results file: secrets passed in extra_args are masked."""
    return {**config.settings.to_dict(), "extra_args": redact_args(config.settings.extra_args)}


def measured_with(results: ResultsFile, label: str) -> bool:
    """Does any row hold a measurement made with this model? A path fixed after its rows were skipped
    (the file was missing or broken) changes nothing measured: those rows are simply run again."""
    return any(label in (row.target, row.draft, (row.candidate or {}).get("draft") if isinstance(row.candidate, dict)
                         else None) and (row.measured or row.requests) for row in results.results)


def check_resumable(existing: ResultsFile, config: SweepConfig, backend: Backend, path: Path) -> None:
    """Refuse to mix rows from another config into a results file."""
    fix = (f"use --results with a new file name to start a separate sweep, or restore the config "
           f"that made {path}")
    if existing.is_upstream:
        raise ResultsFileError(f"{path} was written by upstream draftbench (no schema_version); it can be charted "
                               "(--chart-only) but not resumed", fix)
    differences = []
    for key in ("name", "hardware", "backend"):
        if getattr(existing, key) != getattr(config, key):
            differences.append(f"{key} {getattr(existing, key)!r} vs {getattr(config, key)!r}")
    old = existing.config or {}
    old_measure = old.get("measurement") or {}
    new_measure = config_snapshot(config, backend)["measurement"]
    for key in measurement_keys():
        if key in old_measure:
            then = old_measure[key]
        elif old_measure and existing.results and older_value(key) is not UNRECORDED:
            then = older_value(key)     # written before the key existed: measured as its Field says
        else:
            continue
        if then != new_measure[key] and not _more_lengths(key, then, new_measure[key]):
            differences.append(f"settings.{key} {then!r} vs {new_measure[key]!r}")
    for kind, refs in (("targets", config.targets), ("drafts", config.drafts)):
        old_entries = {m["label"]: m for m in old.get(kind) or [] if isinstance(m, dict) and "label" in m}
        for ref in refs:
            then = old_entries.get(ref.label)
            if then is None:
                continue
            if then.get("path") != ref.path and measured_with(existing, ref.label):
                differences.append(f"{kind} {ref.label!r} points to {ref.path} now, {then.get('path')} then")
            # rows measured on another split would be compared with these: a different machine
            if list(then.get("rpc") or []) != list(ref.rpc):
                differences.append(f"{kind} {ref.label!r} is split over {', '.join(ref.rpc) or 'no RPC endpoint'} "
                                   f"now, {', '.join(then.get('rpc') or []) or 'no RPC endpoint'} then")
    if differences:
        raise ResultsFileError(f"{path} was made with a different config: " + "; ".join(differences), fix)


def _more_lengths(key: str, old: object, new: object) -> bool:
    """Prompt lengths added to a context sweep measure new rows beside the old ones: a resume, not another sweep."""
    def as_set(value: object) -> set:
        return set(value) if isinstance(value, list) else {value}
    return key == "context_tokens" and old is not None and new is not None and as_set(old) <= as_set(new)


def open_results(config: SweepConfig, backend: Backend, path: Path) -> ResultsFile:
    """The results file to write into: the existing one (checked) or a new one."""
    snapshot = config_snapshot(config, backend)
    if path.exists():
        existing = load_results(path, allow_gzip=False)     # written back as plain JSON: never over a .gz
        check_resumable(existing, config, backend, path)
        changed = changed_documents(existing.prompt_set) if config.settings.context_tokens is not None else None
        if changed:      # refused before the file is touched (sweep/run.py checks the prompts as built too)
            raise ResultsFileError(f"{path} was measured on other long prompts: {changed}",
                                   "use --results with a new file name, or the Python that made the file")
        return replace(existing, config=snapshot, settings=public_settings(config), schema_version=SCHEMA_VERSION,
                       tool_version=__version__)
    return ResultsFile(name=config.name, hardware=config.hardware, backend=config.backend,
                       model_family=config.model_family, settings=public_settings(config), timestamp=now_iso(),
                       schema_version=SCHEMA_VERSION, tool_version=__version__, config=snapshot, host=host_info())
