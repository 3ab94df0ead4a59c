"""Model checks before a server starts: the one place that asks the backend about a combination's files.

The runner calls :func:`combination_problem` before each combination (a missing file is skipped, a
broken one is an error, a draft that cannot speculate for its target is skipped); ``--dry-run``
calls :func:`model_problems`, which asks the very same questions of every planned combination, so a
config that ``--dry-run`` accepts never meets a model problem the run would have found.
"""

from __future__ import annotations

from ..backends.base import Backend
from ..common.errors import ModelProblem, Problem
from ..config.model_ref import ModelRef
from ..results.kinds import Role
from .config_file import SweepConfig
from .plan import Combination

PAIRED_ROLES = (Role.SPECULATIVE, Role.CEILING)


def file_problem(backend: Backend, ref: ModelRef | None) -> ModelProblem | None:
    """Why a model file cannot be used (missing, unreadable, not a GGUF, truncated), or None."""
    return backend.model_problem(ref.path) if ref is not None else None


def pair_problem(backend: Backend, combo: Combination) -> ModelProblem | None:
    """Why the combination's draft cannot speculate for its target (llama.cpp: another vocabulary)."""
    if combo.draft is None or combo.role not in PAIRED_ROLES:
        return None
    return backend.pair_problem(combo.target.path, combo.draft.path, combo.candidate.method if combo.candidate else ())


def combination_problem(backend: Backend, combo: Combination) -> tuple[ModelProblem, bool] | None:
    """The first model problem of a combination and whether it is about the pair (not one file)."""
    for ref in (combo.target, combo.draft):
        problem = file_problem(backend, ref)
        if problem:
            return problem, False
    problem = pair_problem(backend, combo)
    return (problem, True) if problem else None


def _where(config: SweepConfig, ref: ModelRef) -> str:
    """The JSON path of a model entry (by label: labels are unique across targets and drafts)."""
    for kind, refs in (("targets", config.targets), ("drafts", config.drafts)):
        for i, candidate in enumerate(refs):
            if candidate.label == ref.label:
                return f"$.{kind}[{i}].path"
    spec = next((s for s in config.candidates if s.draft is not None and s.draft.label == ref.label), None)
    return f"{spec.where}.draft.path" if spec else "$"


def model_problems(config: SweepConfig, backend: Backend, combos: list[Combination]) -> list[Problem]:
    """Every model problem of the planned combinations, once each, with its JSON path and fix."""
    problems: list[Problem] = []
    seen_files: set[str] = set()
    bad_files: set[str] = set()
    seen_pairs: set[tuple[str, str]] = set()
    for combo in combos:
        for ref in (combo.target, combo.draft):
            if ref is None or ref.path in seen_files:
                continue
            seen_files.add(ref.path)
            problem = file_problem(backend, ref)
            if problem:
                bad_files.add(ref.path)
                problems.append(Problem(_where(config, ref), problem.message, problem.fix))
        if combo.draft is None or (combo.target.path, combo.draft.path) in seen_pairs:
            continue
        if {combo.target.path, combo.draft.path} & bad_files:
            continue            # a file that cannot be read has no vocabulary to compare
        seen_pairs.add((combo.target.path, combo.draft.path))
        problem = pair_problem(backend, combo)
        if problem:
            problems.append(Problem(_where(config, combo.draft), f"draft {combo.draft.label!r} with target "
                                    f"{combo.target.label!r}: {problem.message}", problem.fix))
    return problems
