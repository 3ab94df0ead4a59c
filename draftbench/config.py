"""Sweep configs: load, validate completely, and freeze.

The format is upstream draftbench's (``name``, ``hardware``, ``backend``, ``model_family``,
``targets``/``drafts`` of ``{label, path}``, ``settings``) plus optional keys documented in
the README. Validation collects *every* problem with its JSON path before anything starts.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .errors import ConfigError, Problem

# --------------------------------------------------------------------------- field specs


@dataclass(frozen=True)
class Field:
    """One settings key: its type, default, bounds and a line of documentation."""

    kind: str                     # "int" | "float" | "bool" | "str" | "str_list" | "int_or_list" | "any"
    default: Any = None
    doc: str = ""
    min: float | None = None
    max: float | None = None
    choices: tuple | None = None
    nullable: bool = True         # null means "use the default"
    min_exclusive: bool = False


COMMON_SETTINGS: dict[str, Field] = {
    # upstream keys
    "llama_bin": Field("str", None, "path to llama-server (default: found on PATH, common build folders, "
                       "or the project's cached build)"),
    "runs": Field("int", 1, "repetitions of the whole prompt set per combination", min=1, max=1000),
    "max_tokens": Field("int", 512, "tokens to generate per request", min=1, max=1_000_000),
    "temperature": Field("float", 0.0, "sampling temperature (0 = greedy, needed for the output check)",
                         min=0, max=5),
    "gpu_layers": Field("int", 99, "layers to offload to the GPU (-ngl); also used for the draft", min=-1,
                        max=100_000),
    "ctx_size": Field("int", 4096, "context size (-c)", min=64, max=10_000_000),
    "port": Field("int", 8080, "port for the server we start (0 = any free port)", min=0, max=65535),
    # draftbench additions
    "host": Field("str", "127.0.0.1", "address the server binds to"),
    "draft_max": Field("int_or_list", None, "draft length k (llama.cpp --spec-draft-n-max / --draft-max); "
                       "a list sweeps several values; null = the server's default", min=1, max=256),
    "draft_p_min": Field("float", None, "minimum draft probability (llama.cpp --spec-draft-p-min)",
                         min=0, max=1),
    "extra_args": Field("str_list", [], "extra arguments appended to every server command"),
    "prompts": Field("any", "builtin", "prompt set: \"builtin\", a list of built-in categories, or a path "
                     "to a .txt/.jsonl prompt file"),
    "warmup": Field("int", 1, "warm-up requests per server, excluded from statistics", min=0, max=100),
    "seed": Field("int", 42, "sampling seed sent with every request", min=0, max=2**31 - 1),
    "startup_timeout_s": Field("float", 600.0, "seconds to wait for a server to load", min=1, max=86400),
    "request_timeout_s": Field("float", 900.0, "seconds one request may take in total", min=1, max=86400),
    "stall_timeout_s": Field("float", 120.0, "seconds without any streamed byte before a request is "
                             "declared stalled", min=1, max=86400),
    "noise_floor": Field("float", 0.02, "speed-ups smaller than this fraction are never called significant",
                         min=0, max=1),
    "control_baseline": Field("bool", False, "run each target's baseline again after its drafts "
                              "(an A/A check that measures drift over the sweep)"),
    "draft_alone": Field("bool", False, "benchmark each draft alone too, to measure its cost ratio c "
                         "for the theory column"),
}

_SAFE_LABEL = re.compile(r"^[^\x00-\x1f\x7f/\\]+$")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+\- ]*$")
TOP_LEVEL_KEYS = {"name", "hardware", "backend", "model_family", "targets", "drafts", "settings"}
MODEL_KEYS = {"label", "path", "extra_args"}


@dataclass(frozen=True)
class ModelRef:
    label: str
    path: str                   # resolved (absolute) path, or a backend-specific model id
    extra_args: tuple[str, ...] = ()
    raw_path: str = ""          # as written in the config


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
    warnings: tuple[str, ...] = ()
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def draft_max_values(self) -> tuple:
        value = self.settings.get("draft_max")
        if isinstance(value, list):
            return tuple(value)
        return (value,)

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
    if not p.exists():
        raise ConfigError(source, [Problem("$", "file not found", "check the path given to --config")])
    if p.is_dir():
        raise ConfigError(source, [Problem("$", "is a folder", "use --config-dir for a folder of configs")])
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(source, [Problem("$", f"is not UTF-8 text (byte {exc.start})",
                                           "save the file as UTF-8 JSON")]) from None
    except OSError as exc:
        raise ConfigError(source, [Problem("$", f"cannot be read ({exc.strerror or exc})",
                                           "check the file's permissions")]) from None
    try:
        data = json.loads(text, object_pairs_hook=_pairs_hook)
    except json.JSONDecodeError as exc:
        raise ConfigError(source, [Problem("$", f"invalid JSON at line {exc.lineno}, column {exc.colno}: "
                                           f"{exc.msg}", "fix the syntax (a trailing comma or a missing quote?)")]
                          ) from None
    dup_problems = _duplicate_key_problems(data)
    data = _plain(data)
    return validate_config(data, source=source, base_dir=str(p.resolve().parent), extra_problems=dup_problems)


_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# ${NAME}, ${NAME:-default}, ${NAME-default}, or $NAME
_VAR_RE = re.compile(r"\$\{(?P<name>" + _NAME + r")(?:(?P<op>:?-)(?P<default>[^}]*))?\}|\$(?P<plain>" + _NAME + ")")


def expand_env(raw: str) -> tuple[str, list[str], str | None]:
    """Shell-style expansion of ``$NAME``, ``${NAME}``, ``${NAME:-default}`` and ``${NAME-default}``.

    ``:-`` uses the default when NAME is unset *or empty*, ``-`` only when it is unset (as in
    POSIX shells). A default may itself hold ``~`` and ``$NAME`` (not another ``${…}``).
    Values taken from the environment are not expanded again. Returns
    ``(text, unresolved names, syntax error or None)``; unresolved references are left as written.
    """
    unresolved: list[str] = []
    syntax: list[str] = []

    def sub(m: re.Match) -> str:
        name = m.group("name") or m.group("plain")
        value = os.environ.get(name)
        op = m.group("op")
        if op is not None:
            if value is None or (op == ":-" and value == ""):
                default, missing, bad = expand_env(m.group("default"))
                unresolved.extend(n for n in missing if n not in unresolved)
                if bad:
                    syntax.append(f"{m.group(0)!r} nests a variable reference in a default, which is not supported")
                return os.path.expanduser(default) if default.startswith("~") else default
            return value
        if value is None:
            if name not in unresolved:
                unresolved.append(name)
            return m.group(0)
        return value

    out = _VAR_RE.sub(sub, raw)
    # a "${" that none of the forms above matched ("${NAME:?x}", "${1}", an unclosed "${"); a lone "$" stays literal
    bad = re.search(r"\$\{[^}]*\}?", _VAR_RE.sub("", raw))
    if bad:
        syntax.append(f"{bad.group(0)!r} is not a supported variable reference (use $NAME, ${{NAME}} or "
                      "${NAME:-default})")
    return out, unresolved, (syntax[0] if syntax else None)


def _expand_path(raw: str, base_dir: str) -> tuple[str, str | None]:
    """Expand ``$VARS`` (with ``${VAR:-default}``) and ``~``; resolve relative paths against the config's folder.

    Returns ``(path, error)``; the error names every unset variable.
    """
    expanded, unresolved, syntax = expand_env(raw)
    if unresolved:
        names = ", ".join(f"${n}" for n in unresolved)
        plural = "s" if len(unresolved) > 1 else ""
        verb = "are" if len(unresolved) > 1 else "is"
        return expanded, f"environment variable{plural} {names} {verb} not set (in {raw!r})"
    if syntax:
        return expanded, f"{syntax} (in {raw!r})"
    if not expanded.strip():
        return expanded, f"{raw!r} expands to an empty path"
    expanded = os.path.expanduser(expanded)
    if not os.path.isabs(expanded):
        expanded = os.path.normpath(os.path.join(base_dir, expanded))
    return expanded, None


def path_fix(error: str) -> str:
    """The fix for an error from :func:`_expand_path`, naming the variable where there is one."""
    m = re.search(r"environment variables? \$(" + _NAME + ")", error)
    if m:
        name = m.group(1)
        return (f"set it (export {name}=/path/to/folder), write the path out, or give a default: "
                f"${{{name}:-~/models}}")
    if "variable reference" in error:
        return "write variables as $NAME, ${NAME} or ${NAME:-default}, or write the path out"
    return "give the file's path (relative paths are resolved against the config file's folder)"


def check_value(path: str, value: Any, spec: Field, problems: list[Problem]) -> Any:
    """Validate one value against its spec; append problems; return the cleaned value."""
    if value is None:
        if spec.nullable:
            return spec.default
        problems.append(Problem(path, "must not be null", "give a value or remove the key to use the default"))
        return spec.default

    def bounded(v, kind_name, where=path):
        if spec.min is not None and (v < spec.min or (spec.min_exclusive and v == spec.min)):
            problems.append(Problem(where, f"is {v}; must be {'>' if spec.min_exclusive else '≥'} {spec.min:g}",
                                    f"use a {kind_name} of at least {spec.min:g}"))
        if spec.max is not None and v > spec.max:
            problems.append(Problem(where, f"is {v}; must be ≤ {spec.max:g}", f"use a {kind_name} of at most "
                                    f"{spec.max:g}"))
        return v

    def numeric_text(v) -> bool:
        try:
            return isinstance(v, str) and math.isfinite(float(v))
        except ValueError:
            return False

    kind = spec.kind
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            hint = f"write {value} without quotes" if isinstance(value, str) and value.strip().lstrip("-").isdigit() \
                else "use a whole number"
            problems.append(Problem(path, f"must be an integer, not {type(value).__name__} {json.dumps(value)}", hint))
            return spec.default
        return bounded(value, "number")
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            hint = f"write {value} without quotes" if numeric_text(value) else "use a finite number"
            problems.append(Problem(path, f"must be a number, not {type(value).__name__} {json.dumps(value)}", hint))
            return spec.default
        return bounded(float(value), "number")
    if kind == "bool":
        if not isinstance(value, bool):
            hint = f"write {value.strip().lower()} without quotes" if isinstance(value, str) and \
                value.strip().lower() in ("true", "false") else "write true or false"
            problems.append(Problem(path, f"must be true or false, not {json.dumps(value)}", hint))
            return spec.default
        return value
    if kind == "str":
        if not isinstance(value, str) or not value:
            problems.append(Problem(path, f"must be a non-empty string, not {json.dumps(value)}",
                                    "write it in double quotes, or remove the key to use the default"))
            return spec.default
        if spec.choices and value not in spec.choices:
            problems.append(Problem(path, f"is {value!r}; must be one of {', '.join(map(repr, spec.choices))}",
                                    f"use one of {', '.join(map(repr, spec.choices))}"))
        return value
    if kind == "str_list":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            problems.append(Problem(path, "must be a list of strings, e.g. [\"--threads\", \"8\"]",
                                    "quote every argument separately"))
            return list(spec.default or [])
        return list(value)
    if kind == "int_or_list":
        items = value if isinstance(value, list) else [value]
        if isinstance(value, list) and not value:
            problems.append(Problem(path, "is an empty list", "give at least one value or remove the key"))
        clean = []
        for i, item in enumerate(items):
            sub = f"{path}[{i}]" if isinstance(value, list) else path
            if isinstance(item, bool) or not isinstance(item, int):
                hint = f"write {item} without quotes" if isinstance(item, str) and item.strip().isdigit() else \
                    "use a whole number, or a list of them such as [4, 8, 16]"
                problems.append(Problem(sub, f"must be an integer, not {json.dumps(item)}", hint))
                continue
            clean.append(bounded(item, "number", sub))
        if isinstance(value, list):
            dupes = sorted({v for v in clean if clean.count(v) > 1})
            if dupes:
                problems.append(Problem(path, f"lists {', '.join(map(str, dupes))} more than once",
                                        "list every value once"))
            return clean
        return clean[0] if clean else spec.default
    return value


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
    if filename_safe and (not _SAFE_NAME.fullmatch(value) or ".." in value):
        problems.append(Problem(path, f"{value!r} cannot be used in a file name",
                                "use letters, digits, '.', '_', '-', '+' and spaces only"))
    return value


def _check_models(key: str, value: Any, base_dir: str, problems: list[Problem], *, required: bool,
                  resolve: Callable[[str, str], tuple[str, str | None]], warnings: list[str]) -> tuple[ModelRef, ...]:
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
    refs, seen = [], {}
    for i, entry in enumerate(value):
        ep = f"{path}[{i}]"
        if not isinstance(entry, dict):
            problems.append(Problem(ep, f"must be an object with \"label\" and \"path\", not {json.dumps(entry)[:40]}",
                                    "write {\"label\": \"7B Q4_K_M\", \"path\": \"/models/model.gguf\"}"))
            continue
        for extra in sorted(set(entry) - MODEL_KEYS):
            warnings.append(f"{ep}.{extra}: unknown key, ignored (known: {', '.join(sorted(MODEL_KEYS))})")
        label = entry.get("label")
        ok = True
        if not isinstance(label, str) or not label.strip():
            problems.append(Problem(f"{ep}.label", "is missing or empty" if label is None or isinstance(label, str)
                                    else f"must be a string, not {json.dumps(label)}",
                                    "add a short display name like \"7B Q4_K_M\""))
            ok = False
        elif not _SAFE_LABEL.fullmatch(label) or label.strip() in (".", "..") or len(label) > 100:
            problems.append(Problem(f"{ep}.label", f"{label!r} cannot be used in file names (no '/', '\\', "
                                    "control characters, '.' or '..'; at most 100 characters)", "rename it"))
            ok = False
        elif label in seen:
            problems.append(Problem(f"{ep}.label", f"duplicates {seen[label]}.label ({label!r})",
                                    "give every entry its own label"))
            ok = False
        else:
            seen[label] = ep
        raw_path = entry.get("path")
        resolved = ""
        if not isinstance(raw_path, str) or not raw_path.strip():
            problems.append(Problem(f"{ep}.path", "is missing or empty" if raw_path is None or isinstance(raw_path, str) else
                                    f"must be a string, not {json.dumps(raw_path)}", "give the model file's path"))
            ok = False
        else:
            resolved, err = resolve(raw_path, base_dir)
            if err:
                problems.append(Problem(f"{ep}.path", err, path_fix(err)))
                ok = False
        extra_args = entry.get("extra_args", [])
        extra_args = check_value(f"{ep}.extra_args", extra_args, Field("str_list", []), problems)
        if ok:
            refs.append(ModelRef(label=label, path=resolved, extra_args=tuple(extra_args), raw_path=raw_path))
    return tuple(refs)


def validate_config(data: Any, *, source: str = "<config>", base_dir: str = ".",
                    extra_problems: list[Problem] | None = None) -> SweepConfig:
    from .backends import backend_names, get_backend

    problems: list[Problem] = list(extra_problems or [])
    warnings: list[str] = []
    if not isinstance(data, dict):
        raise ConfigError(source, problems + [Problem("$", f"must be a JSON object, not {type(data).__name__}",
                                                      "see configs/example_sweep.json")])

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
                                    f"use one of: {', '.join(backend_names())}"))
    backend_name = backend.config_name if backend else "llamacpp"

    resolve = backend.resolve_model if backend else _expand_path
    targets = _check_models("targets", data.get("targets"), base_dir, problems, required=True, resolve=resolve,
                            warnings=warnings)
    drafts = _check_models("drafts", data.get("drafts", []), base_dir, problems, required=False, resolve=resolve,
                           warnings=warnings)

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
        warnings.append(f"$.settings.{key}: unknown key, ignored (known: {', '.join(sorted(schema))})")
    # Executable paths: relative to the config's folder, with ~ and $VARS (llama_bin, and a backend's own)
    path_keys = ("llama_bin",) if backend_name == "llamacpp" else tuple(getattr(backend, "path_settings", ()))
    for key in path_keys:
        if isinstance(settings.get(key), str):
            resolved, err = _expand_path(settings[key], base_dir)
            if err:
                problems.append(Problem(f"$.settings.{key}", err, path_fix(err)))
            settings[key] = resolved
    from .prompts import check_prompt_setting
    settings["prompts"] = check_prompt_setting("$.settings.prompts", settings.get("prompts"), base_dir, problems)
    if backend:
        problems.extend(backend.validate_settings(settings))

    for key in sorted(set(data) - TOP_LEVEL_KEYS):
        warnings.append(f"$.{key}: unknown key, ignored (known: {', '.join(sorted(TOP_LEVEL_KEYS))})")

    if problems:
        raise ConfigError(source, problems)
    return SweepConfig(name=name, hardware=hardware, backend=backend_name, model_family=model_family,
                       targets=targets, drafts=drafts, settings=settings, source=source, base_dir=base_dir,
                       warnings=tuple(warnings), raw=data)
