"""A config's ``$.settings`` object, with the command line's overrides, checked key by key into one
:class:`~draftbench.config.settings.Settings`; and the rules between keys that no backend owns.

Overrides (``--search``, ``--design``, ``--budget``, ``--ceiling``, ``--more``) replace the file's values before
anything is checked, so each rule is written once and sees what will run; a problem with an
overridden value names the flag (:class:`~draftbench.config.settings.Origin`).
"""

from __future__ import annotations

from typing import Any

from ..common.errors import ConfigError, DraftbenchError, Problem, UsageError
from ..common.files import expand_path
from .field import check_value, unknown_key
from .prompts import check_prompt_setting
from .settings import BackendSettings, Origin, Settings


def check_settings(raw: Any, *, backend: type[BackendSettings], path_keys: tuple[str, ...], base_dir: str,
                   origin: Origin, other_backends: dict[str, str], problems: list[Problem]) -> Settings:
    """``$.settings`` (``raw``: the parsed JSON) with ``origin``'s overrides, every key checked against its
    Field (problems appended, a bad value read as its default); executable paths (``path_keys``) and a
    prompt file resolved against ``base_dir``."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        problems.append(Problem("$.settings", f"must be an object, not {type(raw).__name__}",
                                "write {\"max_tokens\": 512, …} (see configs/example_sweep.json)"))
        raw = {}
    raw = {**raw, **{o.key: o.value for o in origin.overrides}}
    schema = Settings.schema(backend)
    flat = {key: check_value(origin.where(key), raw.get(key), spec, problems) for key, spec in schema.items()}
    for key in sorted(set(raw) - set(schema)):
        problems.append(unknown_key(f"$.settings.{key}", key, schema, other_backends=other_backends))
    # Executable paths: relative to the config's folder, with ~ and $VARS (llama_bin, and a backend's own)
    for key in path_keys:
        if isinstance(flat.get(key), str):
            resolved, err = expand_path(flat[key], base_dir)
            if err:
                problems.append(Problem(f"$.settings.{key}", err.message, err.fix))
            flat[key] = resolved
    flat["prompts"] = check_prompt_setting("$.settings.prompts", flat["prompts"], base_dir, problems)
    return Settings.from_dict(flat, backend)


def refusal(source: str, problems: list[Problem]) -> DraftbenchError:
    """The error for a refused config: problems only with the command line's flags are a usage error (the
    first, named by its flag); any with the file list them all, flags included."""
    if all(p.path.startswith("--") for p in problems):
        return UsageError(f"{problems[0].path}: {problems[0].message}", problems[0].fix)
    return ConfigError(source, problems)
