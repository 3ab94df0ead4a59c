"""Speculative candidates: what is tried against a target's baseline.

A candidate is one speculative *configuration*: a draft file (llama.cpp ``draft-simple``), a
model-free method (``ngram-mod``, vLLM's ``ngram``/``suffix``…), or a hybrid (a draft plus an
n-gram method), each with its parameters. Configs list them in ``candidates``; upstream's
``drafts`` × ``settings.draft_max`` are candidates too (a draft file with the backend's default
draft method). A parameter given as a list expands to one concrete candidate per value.

Parameter names are the backend's own (llama.cpp: its ``--spec-*`` flags without ``--spec-``,
``-`` written ``_``, e.g. ``ngram_mod_n_match``; vLLM: ``--speculative-config`` keys), plus
``draft_max`` for the draft length k on every backend. Backends check names against what
their binary offers.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..common.errors import Problem
from ..common.files import PathProblem
from ..common.suggest import closest
from .field import Field, check_value, unknown_key
from .labels import check_label
from .model_ref import ModelRef
from .rpc_endpoints import DRAFT_PLACEMENT, PLACEMENTS

DRAFT_MAX = "draft_max"
# How the draft model's tokens are chosen (llama.cpp --spec-draft-sampling, env LLAMA_ARG_SPEC_DRAFT_SAMPLING): "greedy"
# proposes the draft's argmax and the target accepts it when its own sample matches; "probabilistic" samples the draft
# and the target verifies by rejection sampling. Both leave the target's output distribution unchanged when correct;
# it is the sampling route of the output, so a row records it (``server.draft_sampling``) and it is a parameter, never
# an extra argument.
DRAFT_SAMPLING = "draft_sampling"
DRAFT_SAMPLINGS = ("greedy", "probabilistic")
# Names of the draft length k, shown as "k=…" in labels.
K_NAMES = (DRAFT_MAX, "draft_n_max", "num_speculative_tokens")


@dataclass(frozen=True)
class CandidateSpec:
    """A candidate as configured: parameters may hold lists (swept)."""

    label: str
    method: tuple[str, ...] = ()          # () = the backend's default method for a draft file
    draft: ModelRef | None = None
    params: dict[str, Any] = field(default_factory=dict)
    extra_args: tuple[str, ...] = ()
    where: str = ""                       # JSON path in the config ($.candidates[2], $.drafts[0])


@dataclass(frozen=True)
class Candidate:
    """One concrete configuration (every parameter has one value)."""

    label: str                            # shown everywhere and used as the row's "draft"
    base_label: str                       # the configured label
    method: tuple[str, ...] = ()
    draft: ModelRef | None = None
    params: tuple[tuple[str, Any], ...] = ()
    extra_args: tuple[str, ...] = ()

    @property
    def draft_max(self) -> int | None:
        return self.param(DRAFT_MAX)

    @property
    def draft_placement(self) -> str | None:
        return self.param(DRAFT_PLACEMENT)

    @property
    def draft_sampling(self) -> str | None:
        """How the draft is sampled, as the candidate asks (None: the server's default)."""
        return self.param(DRAFT_SAMPLING)

    @property
    def model_free(self) -> bool:
        return self.draft is None

    def param(self, name: str, default: Any = None) -> Any:
        return next((v for k, v in self.params if k == name), default)

    @property
    def settings_params(self) -> dict[str, Any]:
        """Parameters other than the draft length (its own row field) and the draft's placement (a device
        choice, not a speculative parameter)."""
        return {k: v for k, v in self.params if k not in (DRAFT_MAX, DRAFT_PLACEMENT)}

    def to_dict(self) -> dict:
        """How a row records the candidate (``draft`` is the draft model's label, or None)."""
        return {"label": self.base_label, "method": list(self.method), "draft": self.draft.label if self.draft else None,
                "params": dict(self.params)}


def short_name(name: str, method: tuple[str, ...]) -> str:
    """``ngram_mod_n_match`` → ``n_match`` for an ngram-mod candidate; the draft length → ``k``."""
    if name in K_NAMES:
        return "k"
    if name == DRAFT_PLACEMENT:
        return "placement"
    if name == DRAFT_SAMPLING:
        return "sampling"
    for m in method:
        prefix = m.replace("-", "_") + "_"
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def expand(spec: CandidateSpec) -> list[Candidate]:
    """One concrete candidate per combination of listed values, labelled so the report stays readable:
    ``ngram-mod n_match=24``. The draft length is not added to the label: it is its own row field
    (shown as ``(k=8)`` when several are swept), as upstream does for ``draft_max``."""
    names = sorted(spec.params)
    choices = [spec.params[n] if isinstance(spec.params[n], list) else [spec.params[n]] for n in names]
    # The placement is always named: a local and an RPC draft must never share a row, even when one is measured.
    swept = [n for n in names if (isinstance(spec.params[n], list) and len(spec.params[n]) > 1 and n != DRAFT_MAX)
             or n == DRAFT_PLACEMENT]
    out = []
    for values in itertools.product(*choices):
        params = tuple((n, v) for n, v in zip(names, values) if v is not None)
        suffix = ", ".join(f"{short_name(n, spec.method)}={v}" for n, v in zip(names, values) if n in swept)
        out.append(Candidate(label=f"{spec.label} {suffix}" if suffix else spec.label, base_label=spec.label,
                             method=spec.method, draft=spec.draft, params=params, extra_args=spec.extra_args))
    return out


def from_draft(draft: ModelRef, draft_max: int | list | None, where: str,
               placement: str | list | None = None) -> CandidateSpec:
    """An upstream ``drafts`` entry as a candidate: the draft file, swept over ``settings.draft_max`` (and
    ``settings.draft_placement``, for targets split over RPC endpoints)."""
    params: dict[str, Any] = {DRAFT_MAX: draft_max} if draft_max is not None else {}
    if placement is not None:
        params[DRAFT_PLACEMENT] = placement
    return CandidateSpec(label=draft.label, draft=draft, params=params, where=where)


# --------------------------------------------------------------------------- config

CANDIDATE_KEYS = {"label", "method", "draft", "params", "extra_args"}
_PARAM_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def _scalar(v: Any) -> bool:
    return isinstance(v, (str, int, bool)) or (isinstance(v, float) and math.isfinite(v))


def _check_params(where: str, value: Any, problems: list[Problem]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.append(Problem(where, f"must be an object of parameters, not {json.dumps(value)[:40]}",
                                "write e.g. {\"ngram_mod_n_match\": [16, 24], \"draft_max\": 8}"))
        return {}
    out = {}
    for name, v in value.items():
        at = f"{where}.{name}"
        if not _PARAM_NAME.fullmatch(name):
            problems.append(Problem(at, "is not a parameter name", "use the backend's own names in lower case with "
                                    "underscores, e.g. ngram_mod_n_match (llama.cpp --spec-ngram-mod-n-match)"))
            continue
        values = v if isinstance(v, list) else [v]
        if isinstance(v, list) and not v:
            problems.append(Problem(at, "is an empty list", "give at least one value"))
            continue
        bad = [x for x in values if not _scalar(x)]
        if bad:
            problems.append(Problem(at, f"must be a number, string or true/false (or a list of them), not "
                                    f"{json.dumps(bad[0])[:40]}", "write one value, or a list to sweep several"))
            continue
        if isinstance(v, list) and len({json.dumps(x) for x in v}) != len(v):
            problems.append(Problem(at, "lists a value more than once", "list every value once"))
            continue
        if name == DRAFT_MAX and any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in values):
            problems.append(Problem(at, "must be a whole number ≥ 1 (or a list of them)", "e.g. 8, or [4, 8, 16]"))
            continue
        if name == DRAFT_PLACEMENT and any(x not in PLACEMENTS for x in values):
            problems.append(Problem(at, "must be \"local\" or \"rpc\" (or a list of them)",
                                    "\"local\": the draft on the machine running llama-server; \"rpc\": split over the "
                                    "target's RPC devices"))
            continue
        if name == DRAFT_SAMPLING and any(x not in DRAFT_SAMPLINGS for x in values):
            problems.append(Problem(at, "must be \"greedy\" or \"probabilistic\" (or a list of them)",
                                    "\"greedy\" proposes the draft's most likely token; \"probabilistic\" samples it "
                                    "and the target verifies by rejection sampling (docs/temperature.md)"))
            continue
        out[name] = v
    return out


def _check_method(where: str, value: Any, problems: list[Problem]) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(m, str) and m.strip() for m in items):
        problems.append(Problem(where, f"must be a method name or a list of them, not {json.dumps(value)[:40]}",
                                "e.g. \"ngram-mod\", or [\"draft-simple\", \"ngram-mod\"] for a hybrid"))
        return ()
    if len(set(items)) != len(items):
        problems.append(Problem(where, "names a method more than once", "list every method once"))
    return tuple(m.strip() for m in items)


def parse_candidates(value: Any, drafts: tuple[ModelRef, ...], base_dir: str, problems: list[Problem],
                     resolve: Callable[[str, str], tuple[str, PathProblem | None]]) -> tuple[CandidateSpec, ...]:
    """``$.candidates``: a list of ``{label, method?, draft?, params?, extra_args?}``. ``draft`` names a
    ``drafts`` entry by label, or is a ``{label, path}`` object of its own."""
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.append(Problem("$.candidates", f"must be a list of candidate objects, not {type(value).__name__}",
                                "see configs/example_methods.json"))
        return ()
    by_label = {d.label: d for d in drafts}
    seen = {d.label: f"$.drafts[{i}].label" for i, d in enumerate(drafts)}
    out = []
    for i, entry in enumerate(value):
        ep = f"$.candidates[{i}]"
        if not isinstance(entry, dict):
            problems.append(Problem(ep, f"must be an object, not {json.dumps(entry)[:40]}",
                                    "write {\"label\": \"ngram-mod\", \"method\": \"ngram-mod\"}"))
            continue
        for extra in sorted(set(entry) - CANDIDATE_KEYS):
            problems.append(unknown_key(f"{ep}.{extra}", extra, CANDIDATE_KEYS))
        ok = check_label(f"{ep}.label", entry.get("label"), seen, problems)
        method = _check_method(f"{ep}.method", entry.get("method"), problems)
        draft = _check_draft(f"{ep}.draft", entry.get("draft"), by_label, base_dir, problems, resolve)
        if entry.get("method") is None and entry.get("draft") is None:
            problems.append(Problem(ep, "names neither a method nor a draft", "add \"method\" (e.g. \"ngram-mod\") "
                                    "or \"draft\" (a label from drafts)"))
            ok = False
        params = _check_params(f"{ep}.params", entry.get("params"), problems)
        extra_args = check_value(f"{ep}.extra_args", entry.get("extra_args"), Field("str_list", []), problems)
        if ok:
            out.append(CandidateSpec(label=entry["label"], method=method, draft=draft, params=params,
                                     extra_args=tuple(extra_args), where=ep))
    return tuple(out)


def _check_draft(where: str, value: Any, by_label: dict[str, ModelRef], base_dir: str, problems: list[Problem],
                 resolve: Callable[[str, str], tuple[str, PathProblem | None]]) -> ModelRef | None:
    if value is None:
        return None
    if isinstance(value, str):
        if value in by_label:
            return by_label[value]
        near = closest(value, by_label)
        problems.append(Problem(where, f"{value!r} is not the label of a drafts entry",
                                f"did you mean {near[0]!r}?" if near else
                                f"use one of: {', '.join(map(repr, by_label)) or '(no drafts listed)'}, or write "
                                "{\"label\": …, \"path\": …}"))
        return None
    if isinstance(value, dict) and isinstance(value.get("label"), str) and isinstance(value.get("path"), str):
        resolved, err = resolve(value["path"], base_dir)
        if err:
            problems.append(Problem(f"{where}.path", err.message, err.fix))
            return None
        return ModelRef(label=value["label"], path=resolved, raw_path=value["path"])
    problems.append(Problem(where, f"must be a drafts label or a {{\"label\", \"path\"}} object, not "
                            f"{json.dumps(value)[:40]}", "e.g. \"135M Q4_1\""))
    return None


def expanded_label_problems(specs: tuple[CandidateSpec, ...]) -> list[Problem]:
    """Two candidates whose expanded labels collide would share result rows."""
    seen: dict[str, str] = {}
    problems = []
    for spec in specs:
        for cand in expand(spec):
            if cand.label in seen and seen[cand.label] != spec.where:
                problems.append(Problem(f"{spec.where}.label", f"expands to {cand.label!r}, which {seen[cand.label]} "
                                        "also produces", "give the candidates distinct labels"))
            seen.setdefault(cand.label, spec.where)
    return problems
