"""Sweep configs: load, validate completely, and freeze.

The format is upstream draftbench's (``name``, ``hardware``, ``backend``, ``model_family``,
``targets``/``drafts`` of ``{label, path}``, ``settings``) plus optional keys documented in
the README. Validation collects *every* problem with its JSON path before anything starts.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.concurrency import levels
from ..analysis.concurrency import settings_problems as concurrency_problems
from ..common.errors import ConfigError, Problem
from ..common.files import PathProblem, expand_path
from ..common.reading import CONFIG_LIMIT, UnreadableFile, read_limited
from ..common.suggest import did_you_mean
from ..common.text_safety import lone_surrogate_paths, safe_text, text_problem
from ..config.candidates import CandidateSpec, expanded_label_problems, from_draft, parse_candidates
from ..config.extra_args import check_server_args, host_problems
from ..config.labels import check_label
from ..config.model_ref import ModelRef
from ..config.rpc_endpoints import DRAFT_PLACEMENT, RPC_KEY, check_rpc_entry, sweep_problems
from ..config.settings import COMMON_SETTINGS, Field, check_value, unknown_key
from .cap import cap_problem, count

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+\- ]*$")
# name and hardware make the default file names (<hardware>_<backend>_<name>.json, .logs, .lock):
# 100 characters each keeps those within the file systems' 255-byte limit.
MAX_NAME_CHARS = 100
TOP_LEVEL_KEYS = {"name", "hardware", "backend", "model_family", "targets", "drafts", "candidates", "settings"}
MODEL_KEYS = {"label", "path", "extra_args", "rpc"}


@dataclass(frozen=True)
class SweepConfig:
    name: str
    hardware: str
    backend: str
    model_family: str
    targets: tuple[ModelRef, ...]
    drafts: tuple[ModelRef, ...]
    settings: dict                  # validated settings, defaults filled in
    source: str = "<config>"
    base_dir: str = "."
    warnings: tuple[Problem, ...] = ()
    candidates: tuple[CandidateSpec, ...] = ()   # from $.candidates (drafts are candidates too: see specs())

    @property
    def draft_max_values(self) -> tuple:
        value = self.settings.get("draft_max")
        if isinstance(value, list):
            return tuple(value)
        return (value,)

    def specs(self) -> tuple[CandidateSpec, ...]:
        """Every candidate to try against each target: the drafts (each swept over settings.draft_max),
        then the configured candidates."""
        k, placement = self.settings.get("draft_max"), self.settings.get(DRAFT_PLACEMENT)
        return tuple(from_draft(d, k, f"$.drafts[{i}]", placement) for i, d in enumerate(self.drafts)) + self.candidates

    def default_stem(self) -> str:
        return "_".join(part.replace(" ", "-") for part in (self.hardware, self.backend, self.name))


# --------------------------------------------------------------------------- loading

class _ObjectWithDupes(dict):
    """A parsed JSON object that remembers which keys appeared more than once."""

    dupes: tuple = ()


def _pairs_hook(pairs):
    obj = _ObjectWithDupes()
    dupes = []
    for key, value in pairs:
        if key in obj and key not in dupes:
            dupes.append(key)
        obj[key] = value
    obj.dupes = tuple(dupes)
    return obj


def _duplicate_key_problems(value: Any, path: str = "$") -> list[Problem]:
    """Problems for keys written twice in one object, each with its JSON path."""
    problems = []
    if isinstance(value, dict):
        for key in getattr(value, "dupes", ()):
            problems.append(Problem(f"{path}.{key}", "appears twice in the same object; the last one would win",
                                    "keep one"))
        for key, item in value.items():
            problems.extend(_duplicate_key_problems(item, f"{path}.{key}"))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            problems.extend(_duplicate_key_problems(item, f"{path}[{i}]"))
    return problems


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def load_config(path: str | os.PathLike) -> SweepConfig:
    """Read and validate a config file; raise :class:`ConfigError` listing every problem."""
    p = Path(path)
    source = str(p)
    try:
        text = read_limited(p, CONFIG_LIMIT).decode("utf-8-sig")     # never waits on a pipe, never reads 1 GB
    except UnreadableFile as problem:
        folder = problem.message == "is a folder, not a regular file"
        fix = ("check the path given to --config" if problem.missing else
               "use --config-dir for a folder of configs" if folder else problem.fix)
        message = "file not found" if problem.missing else "is a folder" if folder else problem.message
        raise ConfigError(source, [Problem("$", message, fix)]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(source, [Problem("$", f"is not UTF-8 text (byte {exc.start})",
                                           "save the file as UTF-8 JSON")]) from None
    try:
        data = json.loads(text, object_pairs_hook=_pairs_hook)
        dup_problems = _duplicate_key_problems(data)
        data = _plain(data)
    except json.JSONDecodeError as exc:
        raise ConfigError(source, [Problem("$", f"invalid JSON at line {exc.lineno}, column {exc.colno}: "
                                           f"{exc.msg}", "fix the syntax (a trailing comma or a missing quote?)")]
                          ) from None
    except RecursionError:
        raise ConfigError(source, [Problem("$", "is nested too deeply to be a sweep config (lists or objects "
                                           "inside each other hundreds of levels deep)",
                                           "see configs/example_sweep.json for the expected shape")]) from None
    return validate_config(data, source=source, base_dir=str(p.resolve().parent), extra_problems=dup_problems)


def _check_text(path: str, value: Any, problems: list[Problem], *, required: bool, filename_safe: bool,
                default: str) -> str:
    if value is None:
        if required:
            problems.append(Problem(path, "is missing", "add it (a short identifier)"))
        return default
    if not isinstance(value, str) or not value.strip():
        problems.append(Problem(path, f"must be a non-empty string, not {json.dumps(value)}",
                                "write a short identifier in double quotes"))
        return default
    if filename_safe and len(value) > MAX_NAME_CHARS:
        problems.append(Problem(path, f"is {len(value)} characters long; it becomes part of file names, which "
                                f"file systems limit", f"shorten it to at most {MAX_NAME_CHARS} characters"))
    elif filename_safe and (not _SAFE_NAME.fullmatch(value) or ".." in value):
        problems.append(Problem(path, f"{safe_text(repr(value))} cannot be used in a file name",
                                "use letters, digits, '.', '_', '-', '+' and spaces only"))
    elif not filename_safe and text_problem(value):
        problems.append(Problem(path, str(text_problem(value)), "write it in plain text"))
    return value


def _check_models(key: str, value: Any, base_dir: str, problems: list[Problem], *, required: bool,
                  resolve: Callable[[str, str], tuple[str, PathProblem | None]], warnings: list[Problem],
                  allow_remote: bool = False) -> tuple[ModelRef, ...]:
    path = f"$.{key}"
    if value is None:
        if required:
            problems.append(Problem(path, "is missing", "add a list of {\"label\": …, \"path\": …} objects"))
        return ()
    if not isinstance(value, list):
        problems.append(Problem(path, f"must be a list of {{\"label\", \"path\"}} objects, not {type(value).__name__}",
                                "write [{\"label\": …, \"path\": …}, …] (see configs/example_sweep.json)"))
        return ()
    if required and not value:
        problems.append(Problem(path, "is empty", "add at least one target model"))
    refs: list[ModelRef] = []
    seen: dict[str, str] = {}
    for i, entry in enumerate(value):
        ep = f"{path}[{i}]"
        if not isinstance(entry, dict):
            problems.append(Problem(ep, f"must be an object with \"label\" and \"path\", not {json.dumps(entry)[:40]}",
                                    "write {\"label\": \"7B Q4_K_M\", \"path\": \"/models/model.gguf\"}"))
            continue
        for extra in sorted(set(entry) - MODEL_KEYS):
            problems.append(unknown_key(f"{ep}.{extra}", extra, MODEL_KEYS))
        label = entry.get("label")
        ok = check_label(f"{ep}.label", label, seen, problems)
        raw_path = entry.get("path")
        resolved = ""
        if not isinstance(raw_path, str) or not raw_path.strip():
            problems.append(Problem(f"{ep}.path", "is missing or empty" if raw_path is None or isinstance(raw_path, str) else
                                    f"must be a string, not {json.dumps(raw_path)}", "give the model file's path"))
            ok = False
        else:
            resolved, err = resolve(raw_path, base_dir)
            if err:
                problems.append(Problem(f"{ep}.path", err.message, err.fix))
                ok = False
        extra_args = entry.get("extra_args", [])
        extra_args = check_value(f"{ep}.extra_args", extra_args, Field("str_list", []), problems)
        rpc: tuple[str, ...] = ()
        if RPC_KEY in entry and key != "targets":
            problems.append(Problem(f"{ep}.{RPC_KEY}", "only a target is split over RPC endpoints; a draft's place is "
                                    "settings.draft_placement", "move \"rpc\" to the target, and set "
                                    "settings.draft_placement to \"local\" or \"rpc\""))
        elif RPC_KEY in entry:
            rpc = check_rpc_entry(f"{ep}.{RPC_KEY}", entry[RPC_KEY], allow_remote=allow_remote, problems=problems,
                                  warnings=warnings)
        if ok and isinstance(label, str) and isinstance(raw_path, str):
            refs.append(ModelRef(label=label, path=resolved, extra_args=tuple(extra_args), raw_path=raw_path, rpc=rpc))
    return tuple(refs)


def _other_backend_keys(backend: Any) -> dict[str, str]:
    """Settings keys of the other backends (key → backend): a vllm_* key in a llamacpp config is no typo."""
    from ..backends import REGISTRY

    return {key: other.config_name for other in REGISTRY.values() if other is not backend
            for key in other.settings_schema}


def ceiling_problems(backend: Any, settings: dict, where: str = "$.settings.ceiling") -> list[Problem]:
    """settings.ceiling needs a backend that can fake acceptance (llama.cpp's --spec-synth-len)."""
    if settings.get("ceiling") and not backend.synthetic_acceptance:
        return [Problem(where, f"{backend.config_name} cannot run drafts at synthetic acceptance (only llama.cpp's "
                        "--spec-synth-len can)", "remove settings.ceiling, or use backend llamacpp")]
    return []


def second_turn_problems(settings: dict) -> list[Problem]:
    """MT-Bench's second turns are sent after the target's own first answers, which its one-stream
    baseline writes: a sweep of them needs concurrency level 1."""
    chosen = settings.get("prompts")
    if isinstance(chosen, list) and any(isinstance(v, str) and v.split(":")[0] == "mt-bench" for v in chosen) \
            and 1 not in levels(settings):
        return [Problem("$.settings.concurrency", f"is {settings.get('concurrency')}, but mt-bench's second turns are "
                        "sent after the target's own first answers, which its one-stream baseline writes",
                        f"add 1: [1, {', '.join(str(n) for n in levels(settings))}]")]
    return []


def _as_problem(note: str, default_path: str) -> Problem:
    """A server-argument note (``"$.x.extra_args[0]: the server will listen on …"``) as a typed warning."""
    path, sep, message = note.partition(": ")
    return Problem(path, message) if sep and path.startswith("$") else Problem(default_path, note)


def _check_server_args(data: dict, settings: dict, problems: list[Problem], warnings: list[Problem]) -> None:
    """Every extra_args list under the sweep's rules (config/extra_args.py): a flag that changes what is measured
    is refused with the key to use; a non-loopback --host (or settings.host) needs allow_remote."""
    allow_remote = settings.get("allow_remote") is True
    lists = [("$.settings.extra_args", settings.get("extra_args"))]
    for kind in ("targets", "drafts", "candidates"):
        entries = data.get(kind)
        for i, entry in enumerate(entries if isinstance(entries, list) else []):
            if isinstance(entry, dict):
                lists.append((f"$.{kind}[{i}].extra_args", entry.get("extra_args")))
    for path, args in lists:
        if isinstance(args, list) and all(isinstance(a, str) for a in args):
            found, notes = check_server_args(path, args, allow_remote=allow_remote)
            problems.extend(found)
            warnings.extend(_as_problem(note, path) for note in notes)
    if isinstance(settings.get("host"), str):
        notes = []
        problems.extend(host_problems("$.settings.host", settings["host"], allow_remote=allow_remote,
                                      allow_flag="settings.allow_remote", warnings=notes))
        warnings.extend(_as_problem(note, "$.settings.host") for note in notes)


def _requests_per_level(settings: dict) -> int:
    from ..config.prompts import prompt_count
    return prompt_count(settings.get("prompts"), settings.get("prompts_per_category")) * (settings.get("runs") or 1)


def validate_config(data: Any, *, source: str = "<config>", base_dir: str = ".",
                    extra_problems: list[Problem] | None = None) -> SweepConfig:
    from ..backends import backend_names, get_backend

    problems: list[Problem] = list(extra_problems or [])
    warnings: list[Problem] = []
    if not isinstance(data, dict):
        raise ConfigError(source, problems + [Problem("$", f"must be a JSON object, not {type(data).__name__}",
                                                      "see configs/example_sweep.json")])
    surrogates = lone_surrogate_paths(data)
    if surrogates:
        # Such text cannot be written to a results file, a log or a terminal: stop before anything else.
        raise ConfigError(source, problems + [Problem(where, "holds a lone surrogate (a \\ud800-\\udfff escape "
                                                      "without its pair), which is not valid Unicode text",
                                                      "remove the escape or write the character itself")
                                              for where in surrogates])

    name = _check_text("$.name", data.get("name"), problems, required=True, filename_safe=True, default="unnamed")
    hardware = _check_text("$.hardware", data.get("hardware"), problems, required=False, filename_safe=True,
                           default="unknown")
    model_family = _check_text("$.model_family", data.get("model_family"), problems, required=False,
                               filename_safe=False, default="")
    backend_raw = data.get("backend", "llamacpp")
    backend = None
    if not isinstance(backend_raw, str):
        problems.append(Problem("$.backend", f"must be a string, not {json.dumps(backend_raw)}",
                                f"use one of: {', '.join(backend_names())}"))
    else:
        try:
            backend = get_backend(backend_raw)
        except KeyError:
            problems.append(Problem("$.backend", f"unknown backend {backend_raw!r}",
                                    did_you_mean(backend_raw, backend_names(), quote=True)))
    backend_name = backend.config_name if backend else "llamacpp"

    resolve = backend.resolve_model if backend else expand_path
    raw_settings = data.get("settings")
    allow_remote = isinstance(raw_settings, dict) and raw_settings.get("allow_remote") is True
    targets = _check_models("targets", data.get("targets"), base_dir, problems, required=True, resolve=resolve,
                            warnings=warnings, allow_remote=allow_remote)
    drafts = _check_models("drafts", data.get("drafts", []), base_dir, problems, required=False, resolve=resolve,
                           warnings=warnings)

    candidates = parse_candidates(data.get("candidates"), drafts, base_dir, problems, resolve)

    schema = dict(COMMON_SETTINGS)
    if backend:
        schema.update(backend.settings_schema)
    settings_raw = data.get("settings", {})
    settings: dict = {}
    if settings_raw is None:
        settings_raw = {}
    if not isinstance(settings_raw, dict):
        problems.append(Problem("$.settings", f"must be an object, not {type(settings_raw).__name__}",
                                "write {\"runs\": 3, …} (see configs/example_sweep.json)"))
        settings_raw = {}
    for key, spec in schema.items():
        settings[key] = check_value(f"$.settings.{key}", settings_raw.get(key), spec, problems)
    for key in sorted(set(settings_raw) - set(schema)):
        problems.append(unknown_key(f"$.settings.{key}", key, schema, other_backends=_other_backend_keys(backend)))
    # Executable paths: relative to the config's folder, with ~ and $VARS (llama_bin, and a backend's own)
    path_keys = backend.path_settings if backend else ()
    for key in path_keys:
        if isinstance(settings.get(key), str):
            resolved, err = expand_path(settings[key], base_dir)
            if err:
                problems.append(Problem(f"$.settings.{key}", err.message, err.fix))
            settings[key] = resolved
    from ..config.prompts import check_prompt_setting
    settings["prompts"] = check_prompt_setting("$.settings.prompts", settings.get("prompts"), base_dir, problems)
    if backend:
        problems.extend(backend.validate_settings(settings))
        problems.extend(ceiling_problems(backend, settings))
    _check_server_args(data, settings, problems, warnings)
    prompts_ok = not any(p.path.startswith("$.settings.prompts") or p.path == "$.settings.runs" for p in problems)
    problems.extend(concurrency_problems(settings, _requests_per_level(settings) if prompts_ok else None))
    problems.extend(second_turn_problems(settings))
    raw_targets = data.get("targets")
    rpc_of = {t.label: t.rpc for t in targets}
    problems.extend(sweep_problems(
        {f"$.targets[{i}]": rpc_of.get(str(e.get("label")), ()) for i, e in enumerate(raw_targets or [])
         if isinstance(raw_targets, list) and isinstance(e, dict) and RPC_KEY in e},
        settings, backend=backend_name, backend_has_rpc=bool(backend and backend.rpc_endpoints),
        candidate_placements={c.where: c.params[DRAFT_PLACEMENT] for c in candidates if DRAFT_PLACEMENT in c.params}))

    for key in sorted(set(data) - TOP_LEVEL_KEYS):
        problems.append(unknown_key(f"$.{key}", key, TOP_LEVEL_KEYS))

    # Counted before anything is expanded: a million combinations are refused at once, not listed.
    specs = tuple(from_draft(d, settings.get("draft_max"), f"$.drafts[{i}]") for i, d in enumerate(drafts)) + candidates
    too_many = cap_problem(count(len(targets), specs, settings, len(drafts)), settings)
    if too_many:
        problems.append(too_many)
    else:
        problems.extend(expanded_label_problems(tuple(from_draft(d, None, f"$.drafts[{i}]")
                                                      for i, d in enumerate(drafts)) + candidates))
    if problems:
        raise ConfigError(source, problems)
    return SweepConfig(name=name, hardware=hardware, backend=backend_name, model_family=model_family,
                       targets=targets, drafts=drafts, settings=settings, source=source, base_dir=base_dir,
                       warnings=tuple(warnings), candidates=candidates)
