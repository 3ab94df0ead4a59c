"""Sweep configs: load, validate completely, and freeze.

The format is upstream draftbench's (``name``, ``hardware``, ``backend``, ``model_family``,
``targets``/``drafts`` of ``{label, path}``, ``settings``) plus optional keys documented in
docs/config.md. Validation collects *every* problem with its JSON path before anything starts.
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
from ..analysis.context_length import settings_problems as context_problems
from ..analysis.temperature_axis import settings_problems as temperature_problems
from ..common.errors import ConfigError, Problem
from ..common.files import PathProblem, expand_path
from ..common.reading import CONFIG_LIMIT, UnreadableFile, read_limited
from ..common.strict_json import loads_all_duplicates
from ..common.suggest import did_you_mean
from ..common.text_safety import lone_surrogate_paths, safe_text, text_problem
from ..config.candidates import CandidateSpec, expanded_label_problems, from_draft, parse_candidates
from ..config.extra_args import check_server_args, host_problems
from ..config.field import Field, check_value, unknown_key
from ..config.flag_rules import SWEEP, SWEEP_CANDIDATE
from ..config.labels import check_label
from ..config.model_ref import ModelRef
from ..config.rpc_endpoints import DRAFT_PLACEMENT, RPC_KEY, check_rpc_entry, sweep_problems
from ..config.settings import FROM_FILE, BackendSettings, Origin, Override, Settings
from ..config.settings_check import check_settings, refusal
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
    settings: Settings              # validated settings, defaults filled in, the command line's overrides applied
    source: str = "<config>"
    base_dir: str = "."
    warnings: tuple[Problem, ...] = ()
    candidates: tuple[CandidateSpec, ...] = ()   # from $.candidates (drafts are candidates too: see specs())

    @property
    def draft_max_values(self) -> tuple:
        value = self.settings.draft_max
        if isinstance(value, list):
            return tuple(value)
        return (value,)

    def specs(self) -> tuple[CandidateSpec, ...]:
        """Every candidate to try against each target: the drafts (each swept over settings.draft_max),
        then the configured candidates."""
        k, placement = self.settings.draft_max, self.settings.draft_placement
        return tuple(from_draft(d, k, f"$.drafts[{i}]", placement) for i, d in enumerate(self.drafts)) + self.candidates

    def default_stem(self) -> str:
        return "_".join(part.replace(" ", "-") for part in (self.hardware, self.backend, self.name))


# --------------------------------------------------------------------------- loading

def load_config(path: str | os.PathLike, overrides: tuple[Override, ...] = ()) -> SweepConfig:
    """Read and validate a config file with the command line's ``overrides`` applied; raise
    :class:`ConfigError` listing every problem (a :class:`UsageError` when only a flag is wrong)."""
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
        data, twice = loads_all_duplicates(text)
        dup_problems = [Problem(where, "appears twice in the same object; the last one would win", "keep one")
                        for where in twice]
    except json.JSONDecodeError as exc:
        raise ConfigError(source, [Problem("$", f"invalid JSON at line {exc.lineno}, column {exc.colno}: "
                                           f"{exc.msg}", "fix the syntax (a trailing comma or a missing quote?)")]
                          ) from None
    except RecursionError:
        raise ConfigError(source, [Problem("$", "is nested too deeply to be a sweep config (lists or objects "
                                           "inside each other hundreds of levels deep)",
                                           "see configs/example_sweep.json for the expected shape")]) from None
    return validate_config(data, source=source, base_dir=str(p.resolve().parent), extra_problems=dup_problems,
                           overrides=overrides)


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
            for key in other.settings_class.schema()}


def ceiling_problems(backend: Any, settings: Settings, origin: Origin = FROM_FILE) -> list[Problem]:
    """settings.ceiling needs a backend that can fake acceptance (llama.cpp's --spec-synth-len)."""
    if settings.ceiling and not backend.synthetic_acceptance:
        return [Problem(origin.where("ceiling"), f"{backend.config_name} cannot run drafts at synthetic acceptance (only llama.cpp's "
                        "--spec-synth-len can)", "remove settings.ceiling, or use backend llamacpp")]
    return []


def second_turn_problems(settings: Settings) -> list[Problem]:
    """MT-Bench's second turns are sent after the target's own first answers, which its one-stream
    baseline writes: a sweep of them needs concurrency level 1."""
    chosen = settings.prompts
    if isinstance(chosen, list) and any(isinstance(v, str) and v.split(":")[0] == "mt-bench" for v in chosen) \
            and 1 not in levels(settings):
        return [Problem("$.settings.concurrency", f"is {settings.concurrency}, but mt-bench's second turns are "
                        "sent after the target's own first answers, which its one-stream baseline writes",
                        f"add 1: [1, {', '.join(str(n) for n in levels(settings))}]")]
    return []


def _as_problem(note: str, default_path: str) -> Problem:
    """A server-argument note (``"$.x.extra_args[0]: the server will listen on …"``) as a typed warning."""
    path, sep, message = note.partition(": ")
    return Problem(path, message) if sep and path.startswith("$") else Problem(default_path, note)


def _check_server_args(data: dict, settings: Settings, backend: str, problems: list[Problem],
                       warnings: list[Problem]) -> None:
    """Every extra_args list under the sweep's rules (config/extra_args.py): a flag that changes what is measured
    is refused with the key to use, and so is a sampling flag where it reaches one side only (a draft's or a
    candidate's list); a non-loopback --host (or settings.host) needs allow_remote."""
    allow_remote = settings.allow_remote
    lists: list[tuple[str, Any]] = [("$.settings.extra_args", settings.extra_args)]
    for kind in ("targets", "drafts", "candidates"):
        entries = data.get(kind)
        for i, entry in enumerate(entries if isinstance(entries, list) else []):
            if isinstance(entry, dict):
                lists.append((f"$.{kind}[{i}].extra_args", entry.get("extra_args")))
    for path, args in lists:
        if isinstance(args, list) and all(isinstance(a, str) for a in args):
            # a draft's or a candidate's own arguments reach its servers only (no sampling flag there)
            entry = SWEEP if path.startswith(("$.settings", "$.targets")) else SWEEP_CANDIDATE
            found, notes = check_server_args(path, args, allow_remote=allow_remote, entry=entry, backend=backend)
            problems.extend(found)
            warnings.extend(_as_problem(note, path) for note in notes)
    host_notes: list[str] = []
    problems.extend(host_problems("$.settings.host", settings.host, allow_remote=allow_remote,
                                  allow_flag="settings.allow_remote", warnings=host_notes))
    warnings.extend(_as_problem(note, "$.settings.host") for note in host_notes)


def _requests_per_level(settings: Settings) -> int:
    from ..config.prompts import prompt_count
    return prompt_count(settings.prompts, settings.prompts_per_category) * settings.runs


def validate_config(data: Any, *, source: str = "<config>", base_dir: str = ".",
                    extra_problems: list[Problem] | None = None, overrides: tuple[Override, ...] = ()) -> SweepConfig:
    """A parsed config checked whole, with the command line's ``overrides`` applied before any check."""
    problems: list[Problem] = list(extra_problems or [])
    warnings: list[Problem] = []
    _refuse_unreadable(data, source, problems)
    name = _check_text("$.name", data.get("name"), problems, required=True, filename_safe=True, default="unnamed")
    hardware = _check_text("$.hardware", data.get("hardware"), problems, required=False, filename_safe=True,
                           default="unknown")
    model_family = _check_text("$.model_family", data.get("model_family"), problems, required=False,
                               filename_safe=False, default="")
    backend = _backend_of(data.get("backend", "llamacpp"), problems)
    backend_name = backend.config_name if backend else "llamacpp"
    resolve = backend.resolve_model if backend else expand_path
    origin = Origin(overrides)
    settings_problems: list[Problem] = []      # said after the models', as the file orders them
    settings = check_settings(data.get("settings", {}), backend=backend.settings_class if backend else BackendSettings,
                              path_keys=backend.path_settings if backend else (), base_dir=base_dir, origin=origin,
                              other_backends=_other_backend_keys(backend), problems=settings_problems)
    targets = _check_models("targets", data.get("targets"), base_dir, problems, required=True, resolve=resolve,
                            warnings=warnings, allow_remote=settings.allow_remote)
    drafts = _check_models("drafts", data.get("drafts", []), base_dir, problems, required=False, resolve=resolve,
                           warnings=warnings)
    candidates = parse_candidates(data.get("candidates"), drafts, base_dir, problems, resolve)
    problems.extend(settings_problems)
    if backend:
        problems.extend(backend.validate_settings(settings))
        settings = backend.settled(settings)       # e.g. LM Studio's client "auto" → the path it takes
        problems.extend(ceiling_problems(backend, settings, origin))
    _check_server_args(data, settings, backend_name, problems, warnings)
    warnings.extend(_runs_warning(settings, origin))
    _check_between_keys(data, settings, origin, backend, targets, candidates, problems)
    for key in sorted(set(data) - TOP_LEVEL_KEYS):
        problems.append(unknown_key(f"$.{key}", key, TOP_LEVEL_KEYS))
    _check_count(len(targets), drafts, candidates, settings, origin, problems)
    if problems:
        raise refusal(source, problems)
    return SweepConfig(name=name, hardware=hardware, backend=backend_name, model_family=model_family,
                       targets=targets, drafts=drafts, settings=settings, source=source, base_dir=base_dir,
                       warnings=tuple(warnings), candidates=candidates)


def _refuse_unreadable(data: Any, source: str, problems: list[Problem]) -> None:
    """Not a JSON object, or text no file, log or terminal can hold: refused before anything else."""
    if not isinstance(data, dict):
        raise ConfigError(source, problems + [Problem("$", f"must be a JSON object, not {type(data).__name__}",
                                                      "see configs/example_sweep.json")])
    surrogates = lone_surrogate_paths(data)
    if surrogates:
        raise ConfigError(source, problems + [Problem(where, "holds a lone surrogate (a \\ud800-\\udfff escape "
                                                      "without its pair), which is not valid Unicode text",
                                                      "remove the escape or write the character itself")
                                              for where in surrogates])


def _backend_of(raw: Any, problems: list[Problem]) -> Any:
    """The backend the config names (None, with its problem, when it names none we know)."""
    from ..backends import backend_names, get_backend

    if not isinstance(raw, str):
        problems.append(Problem("$.backend", f"must be a string, not {json.dumps(raw)}",
                                f"use one of: {', '.join(backend_names())}"))
        return None
    try:
        return get_backend(raw)
    except KeyError:
        problems.append(Problem("$.backend", f"unknown backend {raw!r}", did_you_mean(raw, backend_names(), quote=True)))
        return None


def _runs_warning(settings: Settings, origin: Origin) -> list[Problem]:
    """runs > 1 where nothing it repeats is measured: the stages measure each fresh prompt once."""
    levels = settings.concurrency if isinstance(settings.concurrency, list) else [settings.concurrency]
    if settings.runs <= 1 or max(levels) > 1 or settings.draft_alone or settings.ceiling:
        return []
    return [Problem(origin.where("runs"), f"runs is {settings.runs}, but repeating prompts no longer adds "
                    "precision to the verdict: each stage measures fresh prompts once on fresh servers, "
                    "so precision comes from more stages (settings.stages, budget_s, --more); runs still "
                    "repeats the prompts of other concurrency levels, drafts alone and ceiling runs",
                    "remove settings.runs, or raise settings.stages")]


def _check_between_keys(data: dict, settings: Settings, origin: Origin, backend: Any, targets: tuple[ModelRef, ...],
                        candidates: tuple, problems: list[Problem]) -> None:
    """Rules across keys: concurrency against the prompts, second turns, the context axis, RPC placement."""
    prompts_ok = not any(p.path.startswith("$.settings.prompts") or p.path == "$.settings.runs" for p in problems)
    problems.extend(concurrency_problems(settings, _requests_per_level(settings) if prompts_ok else None, origin))
    problems.extend(second_turn_problems(settings))
    problems.extend(context_problems(settings, tokenizes=bool(backend and backend.tokenizes)))
    problems.extend(temperature_problems(settings))
    raw_targets = data.get("targets")
    rpc_of = {t.label: t.rpc for t in targets}
    problems.extend(sweep_problems(
        {f"$.targets[{i}]": rpc_of.get(str(e.get("label")), ()) for i, e in enumerate(raw_targets or [])
         if isinstance(raw_targets, list) and isinstance(e, dict) and RPC_KEY in e},
        settings, origin, backend=backend.config_name if backend else "llamacpp",
        backend_has_rpc=bool(backend and backend.rpc_endpoints),
        candidate_placements={c.where: c.params[DRAFT_PLACEMENT] for c in candidates if DRAFT_PLACEMENT in c.params}))


def _check_count(n_targets: int, drafts: tuple[ModelRef, ...], candidates: tuple, settings: Settings, origin: Origin,
                 problems: list[Problem]) -> None:
    """Counted before anything is expanded: a million combinations are refused at once, not listed."""
    specs = tuple(from_draft(d, settings.draft_max, f"$.drafts[{i}]") for i, d in enumerate(drafts)) + candidates
    cap_given = not any(p.path == origin.where("max_combinations") for p in problems)   # else the cap is said wrong
    too_many = cap_problem(count(n_targets, specs, settings, len(drafts)), settings) if cap_given else None
    if too_many:
        problems.append(too_many)
    else:
        problems.extend(expanded_label_problems(tuple(from_draft(d, None, f"$.drafts[{i}]")
                                                      for i, d in enumerate(drafts)) + candidates))
