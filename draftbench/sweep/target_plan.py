"""What one target's stages will measure: the design (and why), the stage plan, its candidates by name.

The design is ``settings.design`` when given; else interleaved where a baseline server and the largest
candidate's fit side by side (a CPU or Apple Silicon maps the GGUF once; a GPU needs room for both),
bracketed where they do not (vLLM, LM Studio, a target split over RPC endpoints, which serve one
llama-server at a time). A results file being resumed keeps the design it was measured in.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from ..backends.base import Backend
from ..config.prompts import Prompt
from ..config.settings import Settings
from ..config.workloads import SESSION_CATEGORY
from ..results.file import ResultsFile
from ..results.kinds import Role
from .estimate import Estimator, estimate_of
from .plan import Combination
from .schedule import Design, Side, stage_cost, stage_steps
from .stage_plan import StagePlan, plan_stages
from .stage_rows import in_stages


@dataclass(frozen=True)
class TargetPlan:
    """What one target's stages measure: its baseline, its candidates by name, the design and the prompts."""

    baseline: Combination
    candidates: dict[str, Combination]
    design: Design
    why: str
    stages: StagePlan
    prompts: tuple[Prompt, ...]

    @property
    def label(self) -> str:
        return self.baseline.target.label


def choose_design(settings: Settings, backend: Backend, target: Combination, candidates: Sequence[Combination]
                  ) -> tuple[Design, str]:
    """The design to run and why."""
    asked = settings.design
    if asked != "auto":
        return Design(asked), f"settings.design is {asked!r}"
    if target.target.rpc:     # an rpc-server serves one client at a time, on the same remote devices
        return Design.BRACKETED, (f"the target is split over RPC endpoints ({', '.join(target.target.rpc)}), "
                                  "which serve one llama-server at a time")
    drafts = [c.draft.path for c in candidates if c.draft is not None]
    biggest = max(drafts, key=_size, default=None)
    # A backend that can run a baseline server and a candidate server together says so with
    # side_by_side(settings, target, draft) -> None (llama.cpp: backends/llamacpp/memory.py); else why not.
    side_by_side = getattr(backend, "side_by_side", None)
    why_not = side_by_side(settings, target.target.path, biggest) if side_by_side is not None else \
        f"the {backend.config_name} backend runs one model server at a time"
    if why_not is None:
        return Design.INTERLEAVED, "a baseline server and a candidate server fit side by side"
    return Design.BRACKETED, why_not


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def conversation(prompt: Prompt) -> str:
    """Prompts that must share a server, in order: a second turn goes with its first (it is sent after that
    answer), and the session workload's turns go together (they build on each other on one server)."""
    if prompt.category == SESSION_CATEGORY:
        return SESSION_CATEGORY
    return prompt.conversation or prompt.context_from or prompt.id


def name_of(combo: Combination) -> str:
    """How the stages, the decision and the verdict name a candidate (its label, with k when one is set)."""
    if combo.role is Role.CONTROL:
        return "control (the target alone again)"
    label = combo.candidate.label if combo.candidate else ""
    return label + (f" (k={combo.draft_max})" if combo.draft_max else "")     # as analysis.categories.candidate_name


def target_plan(settings: Settings, backend: Backend, combos: Sequence[Combination], target: str,
                prompts: Sequence[Prompt], results: ResultsFile | None = None) -> TargetPlan | None:
    """The stages of ``target`` (None: it has no one-stream baseline in the plan)."""
    mine = [c for c in combos if c.target.label == target and in_stages(c)]
    baseline = next((c for c in mine if c.role is Role.BASELINE), None)
    if baseline is None:
        return None
    candidates = {name_of(c): c for c in mine if c.role in (Role.SPECULATIVE, Role.CONTROL)}
    recorded = next((r.design.get("name") for r in (results.results if results else ())
                     if r.target == target and r.concurrency == 1 and r.design and r.design.get("horizon")), None)
    if recorded in {d.value for d in Design}:
        design, why = Design(recorded), "as recorded in the results file being resumed"
    else:
        design, why = choose_design(settings, backend, baseline, list(candidates.values()))
    stages = plan_stages([p.category for p in prompts], [conversation(p) for p in prompts],
                         horizon=settings.stages, size=settings.prompts_per_stage, seed=settings.seed)
    return TargetPlan(baseline, candidates, design, why, stages, tuple(prompts))


def describe_cost(plan: TargetPlan, warmup: int) -> str:
    """'up to 6 stage(s) of 6 fresh prompt(s) each, …; a stage with every candidate: 5 server loads, 48 requests —
    at most 30 loads and 288 requests, …'."""
    names = list(plan.candidates)
    one = stage_cost(stage_steps(plan.design, 0, plan.stages.stage(0), 0, names), warmup)
    return (f"{plan.stages.describe()}; a stage with every candidate: {one.loads} server "
            f"loads, {one.requests} requests — at most {one.loads * plan.stages.horizon} loads and "
            f"{one.requests * plan.stages.horizon} requests, fewer when it is decided early"
            + (" or a race leaves candidates behind" if names else ""))



def stages_seconds(plan: TargetPlan, estimator: Estimator) -> float:
    """The most a target's stages may take: every planned stage with every candidate (each server's load and
    warm-up, and its requests), as ``--dry-run``'s estimator sees them."""
    n = len(plan.stages.stage(0))
    base_load, base_request = estimator.parts(estimate_of(estimator, plan.baseline), plan.baseline)
    steps = stage_steps(plan.design, 0, plan.stages.stage(0), 0, list(plan.candidates))
    seconds = base_load * len({s.baseline for s in steps if s.baseline is not None})
    for step in steps:
        seconds += base_request * sum(1 for r in step.requests if r.side is Side.BASELINE)
        if step.candidate is not None:
            combo = plan.candidates[step.candidate]
            load, per_request = estimator.parts(estimate_of(estimator, combo), combo)
            seconds += load + per_request * n
    return seconds * plan.stages.horizon
