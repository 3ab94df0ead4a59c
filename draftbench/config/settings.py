"""Settings: field specs, their validation, and the settings every backend shares.

A leaf module (only :mod:`draftbench.common.errors`), so backends can declare their own settings
without importing the config loader.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..common.errors import Problem
from ..common.suggest import did_you_mean


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
    measured: bool = False        # changes what is measured: a results file made with another value is not resumed



def unknown_key(path: str, key: str, known, *, other_backends: dict[str, str] | None = None) -> Problem:
    """An error for a key nobody reads: a typo must never fall back to the default quietly
    (``settings.max_token`` once ran 512 tokens). ``other_backends``: key → the backend that reads it."""
    owner = (other_backends or {}).get(key)
    if owner:
        return Problem(path, f"is a setting of backend {owner}, which this config does not use",
                       f"remove it, or set \"backend\": \"{owner}\"")
    return Problem(path, "unknown key", did_you_mean(key, sorted(known)))


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
                                    did_you_mean(value, spec.choices, quote=True)))
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
            dupes = sorted(v for v, n in Counter(clean).items() if n > 1)
            if dupes:
                problems.append(Problem(path, f"lists {', '.join(map(str, dupes))} more than once",
                                        "list every value once"))
            return clean
        return clean[0] if clean else spec.default
    return value


COMMON_SETTINGS: dict[str, Field] = {
    # upstream keys
    "llama_bin": Field("str", None, "path to llama-server (default: found on PATH, common build folders, "
                       "or the project's cached build)"),
    "runs": Field("int", 1, "repetitions of the whole prompt set per combination", min=1, max=1000, measured=True),
    "max_tokens": Field("int", 512, "tokens to generate per request", min=1, max=1_000_000, measured=True),
    "temperature": Field("float", 0.0, "sampling temperature (0 = greedy, needed for the output check)",
                         min=0, max=5, measured=True),
    "gpu_layers": Field("int", 99, "layers to offload to the GPU (-ngl); also used for the draft", min=-1,
                        max=100_000, measured=True),
    "ctx_size": Field("int", 4096, "context size (-c)", min=64, max=10_000_000, measured=True),
    "port": Field("int", 8080, "port for the server we start (0 = any free port)", min=0, max=65535),
    # draftbench additions
    "host": Field("str", "127.0.0.1", "address the server binds to"),
    "allow_remote": Field("bool", False, "allow a server address other than loopback (settings.host or --host "
                          "in extra_args): the server is then reachable from other machines"),
    "draft_max": Field("int_or_list", None, "draft length k (llama.cpp --spec-draft-n-max / --draft-max; LM Studio through its SDK); "
                       "a list sweeps several values; null = the server's default", min=1, max=256),
    "draft_placement": Field("any", None, "llama.cpp RPC: where each draft runs beside a target split over RPC "
                             "endpoints: \"local\" (this machine), \"rpc\" (split over the target's RPC devices), or "
                             "[\"local\", \"rpc\"] to measure both as candidates; null = llama-server's default "
                             "(the draft follows the target's devices)"),
    "draft_p_min": Field("float", None, "minimum draft probability (llama.cpp --spec-draft-p-min; LM Studio through its SDK)",
                         min=0, max=1, measured=True),
    "extra_args": Field("str_list", [], "extra arguments appended to every server command", measured=True),
    "prompts": Field("any", "builtin", "prompt set: \"builtin\", a list of built-in categories and standard sets "
                     "(\"mt-bench\", \"mt-bench:coding\", \"humaneval\"), or a path to a .txt/.jsonl prompt file",
                     measured=True),
    "prompts_per_category": Field("int", None, "take this many prompts (conversations: an MT-Bench question with "
                                  "both its turns) of each category, a sample drawn with settings.seed; null = all",
                                  min=1, max=100_000, measured=True),
    "warmup": Field("int", 1, "warm-up requests per server, excluded from statistics", min=0, max=100, measured=True),
    "seed": Field("int", 42, "sampling seed sent with every request", min=0, max=2**31 - 1, measured=True),
    "startup_timeout_s": Field("float", 600.0, "seconds to wait for a server to load", min=1, max=86400),
    "request_timeout_s": Field("float", 900.0, "seconds one request may take in total", min=1, max=86400),
    "stall_timeout_s": Field("float", 120.0, "seconds without a streamed data event (keep-alive comments do not "
                             "count) before a request is declared stalled", min=1, max=86400),
    "noise_floor": Field("float", 0.02, "speed-ups smaller than this fraction are never called significant",
                         min=0, max=1),
    "control_baseline": Field("bool", False, "run each target's baseline again after its drafts "
                              "(an A/A check that measures drift over the sweep)"),
    "design": Field("str", "auto", "how candidates are measured against the baseline so that a change in the "
                    "machine's speed hits both sides: \"interleaved\" (both servers up, requests in ABBA order), "
                    "\"bracketed\" (a baseline block before and after every candidate block), \"sequential\" "
                    "(upstream's order; drift-prone) or \"auto\" (interleaved where both fit in memory, else "
                    "bracketed)", choices=("auto", "interleaved", "bracketed", "sequential"), measured=True),
    "search": Field("str", "exhaustive", "\"exhaustive\" measures every candidate fully (upstream); \"adaptive\" "
                    "races them and stops measuring the ones that cannot win (see README \"Adaptive search\")",
                    choices=("exhaustive", "adaptive"), measured=True),
    "budget_s": Field("float", None, "adaptive search: seconds of measuring per target, after which the race "
                      "stops (null = no limit)", min=1, max=10_000_000),
    "draft_alone": Field("bool", False, "benchmark each draft alone too, to measure its cost ratio c "
                         "for the theory column"),
    "ceiling": Field("bool", False, "also run each draft at synthetic acceptance (llama.cpp --spec-synth-len): "
                     "at its measured mean accepted length and at full acceptance, to show what its cost allows "
                     "on this hardware"),
    "max_combinations": Field("int", 2000, "the most combinations a config may make (parameter lists multiply: "
                              "six lists of ten values are a million); beyond it the config is refused", min=1,
                              max=1_000_000),
    "concurrency": Field("int_or_list", [1], "concurrent streams: each value N starts the server with N slots "
                         "and measures N requests at once; a list ([1, 2, 4, 8]) measures every level",
                         min=1, max=1024, measured=True),
    "context_tokens": Field("int_or_list", None, "prompt lengths to measure (the context axis): each N measures "
                            "every candidate and its baseline on long prompts of N tokens (real documents cut with "
                            "the target's own tokenizer; llama.cpp), with -c sized to fit; a list ([512, 2048, "
                            "8192]) gives a verdict per length and the length up to which each candidate pays",
                            min=64, max=10_000_000, measured=True),
    "context_filler": Field("str", "documents", "what long prompts are made of: \"documents\" (real text and code, "
                            "see docs/long-context.md) or \"random-tokens\" (the same tokens shuffled; labelled, "
                            "overstates speculative gains)", choices=("documents", "random-tokens"), measured=True),
    "typical_output_tokens": Field("int", None, "the answer length the long-context end-to-end figure models "
                                   "(null = max_tokens)", min=1, max=1_000_000),
}


def default_settings(*schemas: dict[str, Field]) -> dict:
    """Every key of COMMON_SETTINGS (and of ``schemas``) at its default, as a validated config would hold it."""
    out = {k: f.default for k, f in COMMON_SETTINGS.items()}
    for schema in schemas:
        out.update({k: f.default for k, f in schema.items()})
    return out


def measured_keys(*schemas: dict[str, Field]) -> tuple[str, ...]:
    """Settings that change what is measured (in COMMON_SETTINGS and ``schemas``), in a stable order."""
    keys = [k for k, f in COMMON_SETTINGS.items() if f.measured]
    for schema in schemas:
        keys += [k for k, f in schema.items() if f.measured and k not in keys]
    return tuple(keys)
