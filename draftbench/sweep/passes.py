"""A target's schedule as the sweep runs it: the design chosen, its blocks, and its groups of steps.

The candidates (and the A/A control, when asked for) run in the design's passes; ceiling runs,
which read their draft's measured acceptance, run in passes of their own after them. What a
design costs (server loads, requests) against upstream's sequential order is what ``--dry-run``
prints.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..analysis import decision
from ..analysis.verdict import analyze
from ..backends.base import Backend
from ..config.prompts import Prompt
from ..config.settings import Settings
from ..config.workloads import SESSION_CATEGORY
from ..measure.sequential import MeasureOptions
from ..results.file import ResultsFile
from ..results.kinds import Role
from .config_file import SweepConfig
from .console import Reporter
from .estimate import Estimator, estimate_of
from .plan import Combination, shows_k
from .runner import CombinationRunner
from .schedule import Design, Kind, Side, Step, blocks, confirmation_steps, cost, is_stateful, sweep_steps
from .steps import RowStore, StepRunner


def choose_design(settings: Settings, backend: Backend, target: Combination, candidates: Sequence[Combination]
                  ) -> tuple[Design, str]:
    """The design to run and why: ``settings.design`` when given, else interleaved where the baseline and
    the largest candidate fit side by side, bracketed where they do not."""
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
        return Design.INTERLEAVED, "the baseline and candidate servers fit side by side"
    return Design.BRACKETED, why_not


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


PASS_ROLES = (Role.BASELINE, Role.SPECULATIVE, Role.CONTROL, Role.CEILING)


def conversation(prompt: Prompt) -> str:
    """Prompts that must share a server, in order: a second turn goes with its first (it is sent after that
    answer), and the session workload's turns go together (they build on each other on one server)."""
    if prompt.category == SESSION_CATEGORY:
        return SESSION_CATEGORY
    return prompt.context_from or prompt.id


def in_passes(combo: Combination) -> bool:
    """Measured in a design's passes (one stream); the rest runs on its own server in plan order."""
    return combo.concurrency == 1 and combo.role in PASS_ROLES


@dataclass(frozen=True)
class Group:
    combos: dict[str, Combination]         # candidates by name
    steps: list[Step]


@dataclass(frozen=True)
class TargetPasses:
    baseline: Combination
    design: Design
    why: str
    block_pairs: list[list[tuple[int, int]]]
    groups: list[Group]


def _baseline_only(design: Design, block_pairs: list[list[tuple[int, int]]]) -> list[Step]:
    """Without candidates, the baseline alone (a block per session, or one session sequentially)."""
    return sweep_steps(Design.SEQUENTIAL if design is Design.SEQUENTIAL else Design.BRACKETED, block_pairs, [])


def target_passes(config: SweepConfig, backend: Backend, combos: list[Combination], target: str,
                  prompts: list[Prompt], runs: int, results: ResultsFile | None = None) -> TargetPasses | None:
    """The passes of ``target`` (None: it has no one-stream baseline in the plan)."""
    mine = [c for c in combos if c.target.label == target and in_passes(c)]
    baseline = next((c for c in mine if c.role == Role.BASELINE), None)
    if baseline is None:
        return None
    candidates = {c.name: c for c in mine if c.role in (Role.SPECULATIVE, Role.CONTROL)}
    ceilings = {c.name: c for c in mine if c.role == Role.CEILING}
    recorded = next((r.design["name"] for r in (results.results if results else ())
                     if r.target == target and r.concurrency == 1 and r.design and r.design.get("name")), None)
    if recorded in {d.value for d in Design}:
        design, why = Design(recorded), "as recorded in the results file being resumed"
    else:
        design, why = choose_design(config.settings, backend, baseline, list(candidates.values()))
    block_pairs = blocks([p.category for p in prompts], runs, [conversation(p) for p in prompts])

    def stateful(group: dict[str, Combination]) -> frozenset[str]:
        return frozenset(n for n, c in group.items() if c.candidate is not None and is_stateful(c.candidate.method))

    groups = [Group(candidates, sweep_steps(design, block_pairs, list(candidates), stateful(candidates))
                    if candidates else _baseline_only(design, block_pairs))]
    if ceilings:
        steps = sweep_steps(design, block_pairs, list(ceilings), stateful(ceilings))
        if design is Design.SEQUENTIAL:      # compared with the baseline measured above
            steps = [s for s in steps if s.kind is not Kind.BASELINE]
        groups.append(Group(ceilings, steps))
    return TargetPasses(baseline, design, why, block_pairs, groups)


def step_seconds(estimator: Estimator, combos: dict[str, Combination], step: Step, baseline: Combination) -> float:
    """A step's estimated duration: each side's load and warm-up, and its share of the side's requests."""
    total = 0.0
    for side in (Side.BASELINE, Side.CANDIDATE):
        n = sum(1 for r in step.requests if r.side is side)
        if not n and not (side is Side.BASELINE and step.kind is Kind.PAIRED):
            continue
        combo = baseline if side is Side.BASELINE else combos.get(step.candidate or "")
        if combo is None:
            continue
        load, per_request = estimator.parts(estimate_of(estimator, combo), combo)
        total += load + n * per_request
    return total


def describe_cost(passes: TargetPasses, warmup: int) -> str:
    """'interleaved: 12 server loads, 96 requests (+6 loads, +48 requests against sequential)'."""
    steps = [s for g in passes.groups for s in g.steps]
    names = [n for g in passes.groups for n in g.combos]
    this = cost(steps, warmup)
    stateful = frozenset(n for g in passes.groups for n, c in g.combos.items()
                         if c.candidate is not None and is_stateful(c.candidate.method))
    upstream = cost(sweep_steps(Design.SEQUENTIAL, passes.block_pairs, names, stateful), warmup) if names else this
    text = f"{passes.design.value}: {this.loads} server loads, {this.requests} requests"
    if passes.design is not Design.SEQUENTIAL:
        text += (f" ({this.loads - upstream.loads:+d} loads, {this.requests - upstream.requests:+d} requests against "
                 "the sequential order, which is drift-prone)")
    n_prompts = len({i for b in passes.block_pairs for _, i in b})
    confirmation = cost(confirmation_steps(passes.design, len(passes.block_pairs), [(0, i) for i in range(n_prompts)],
                                           "selected"), warmup)
    if any(c.role == Role.SPECULATIVE for g in passes.groups for c in g.combos.values()):
        text += (f"; then {confirmation.loads} loads and {n_prompts} requests a side to confirm the best candidate "
                 "above the noise floor on fresh requests")
    return text


def run_passes(config: SweepConfig, backend: Backend, combos: list[Combination], store: RowStore,
               reporter: Reporter, runner: CombinationRunner, prompts: list[Prompt], options: MeasureOptions,
               estimator: Estimator | None = None, clock: Callable[[], float] = time.perf_counter) -> None:
    """Every target's one-stream combinations in its design's passes, rows recorded in ``store`` after
    every step (the session's store saves the file; the simulator's keeps it in memory)."""
    failed: dict[str, str] = {}
    started = clock()
    passes = [p for target in config.targets
              if (p := target_passes(config, backend, combos, target.label, prompts, options.runs,
                                     store.current())) is not None]
    remaining = [step for p in passes for group in p.groups for step in group.steps]
    total = len(remaining)

    def progress(_step: Step, ran: bool) -> None:
        remaining.pop(0)
        if not ran or estimator is None:
            return
        estimator.add(store.current())
        left = sum(step_seconds(estimator, group.combos, step, p.baseline)
                   for p in passes for group in p.groups for step in group.steps if step in remaining)
        reporter.progress(clock() - started, left or None)

    done_steps = 0
    for target_pass in passes:
        reporter.note(f"{target_pass.baseline.target.label}: {target_pass.design.label} — {target_pass.why}")
        for group in target_pass.groups:
            steps = StepRunner(runner, store, reporter, target_pass.design, prompts, options,
                               target_pass.block_pairs, target_pass.baseline, group.combos, failed, clock=clock,
                               show_k=shows_k(config))
            steps.step_number = done_steps
            steps.run(group.steps, total, after_step=progress)
            done_steps += len(group.steps)
            if group is target_pass.groups[0] and any(c.role == Role.SPECULATIVE for c in group.combos.values()):
                confirm(target_pass, steps, store, reporter, config.settings.noise_floor)


def confirm(passes: TargetPasses, steps: StepRunner, store: RowStore, reporter: Reporter, noise_floor: float,
            chosen: str | None = None) -> str | None:
    """Measure the selected candidate once more on fresh requests (``analysis/decision.py``): the
    candidate named ``chosen`` (a race's leader) or the best estimate above 1 + floor; a confirmation
    already begun (resume) is finished instead. The name confirmed, or None."""
    results = analyze(store.current())        # the session's store is analysed already; the simulator's is not
    names = {c.key: n for n, c in steps.candidates.items()}
    rows = [r for r in results.results if r.key in names]
    begun = next((r for r in rows if any(q.block == len(passes.block_pairs) for q in r.requests)), None)
    if begun is not None:
        name: str | None = names[begun.key]
    elif chosen is not None:
        row = results.row(steps.candidates[chosen].key)
        name = chosen if row is not None and row in decision.selectable(rows, noise_floor) else None
    else:
        best = decision.selected(rows, noise_floor)
        name = names[best.key] if best is not None else None
    if name is None or name in steps.dead:
        return None
    reporter.note(f"{name}: measured once more on fresh requests, to confirm it (selected among {len(rows)} "
                  "candidate(s); the verdict rests on this block alone)")
    steps.run(confirmation_steps(passes.design, len(passes.block_pairs), steps.confirmation, name))
    return name
