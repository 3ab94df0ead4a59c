"""Race or measure everything? The adaptive search only starts where it can save time.

A race runs the same passes as the exhaustive search (``sweep/schedule.py``) and drops the
candidates it has decided about after each one, so it saves the blocks they would have had. In the
interleaved and bracketed designs each block is a server session either way, so the race can only
save; in the sequential design a candidate measured fully takes one server, but a raced one takes
one per block, and with few candidates, few requests or slow loads that trade loses. Both plans are
costed with the estimator ``--dry-run`` uses, step by step through the schedule; the race at its
best (the probe leaves one candidate, the cheapest to finish), so a race that would not save
:data:`MIN_SAVING` of the time even then is not started: the exhaustive search runs instead, and
says why. A race already under way in the results file is always continued. (Both plans then
confirm their choice on one block of fresh requests: the same cost, left out of both.)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..backends.base import Backend
from ..results.kinds import Role
from .config_file import SweepConfig
from .console import format_duration
from .estimate import Estimator, estimate_of
from .passes import TargetPasses, step_seconds, target_passes
from .plan import Combination
from .schedule import Design, Kind, Request, Side, Step, cost, pass_steps

MIN_SAVING = 0.10     # the race must promise at least this share of the exhaustive time


@dataclass(frozen=True)
class PlanCosts:
    """Estimated seconds and server loads of both plans for the same combinations."""

    exhaustive_s: float
    race_s: float                    # at its best: one candidate per target left after the probes
    exhaustive_loads: int
    race_loads: int
    known: bool                      # False: only guesses from model sizes (the race the user chose is kept)

    @property
    def race_saves_time(self) -> bool:
        return not self.known or self.race_s < (1 - MIN_SAVING) * self.exhaustive_s

    def describe(self) -> str:
        verdict = ("the race, which can save time" if self.race_saves_time else
                   "the exhaustive search: the race cannot save time here (its probes and second loads cost as "
                   "much as the requests it could skip)")
        guess = ("" if self.known else " — from model sizes only, so the race asked for is kept (--dry-run --probe "
                 "measures this machine)")
        return (f"exhaustive ~{format_duration(self.exhaustive_s)} ({self.exhaustive_loads} server loads); adaptive "
                f"race ~{format_duration(self.race_s)} at best ({self.race_loads} server loads, if its probes leave "
                f"one candidate per target) → {verdict}{guess}")


def race_steps(passes: TargetPasses, finisher: str) -> list[Step]:
    """The race's steps at its best: the probe (block 0) of every candidate, then the other blocks of
    ``finisher`` alone; the A/A control and the ceiling runs as in the exhaustive search."""
    group = passes.groups[0]
    racing = [n for n, c in group.combos.items() if c.role == Role.SPECULATIVE]
    rest = {n for g in passes.groups for n, c in g.combos.items() if c.role != Role.SPECULATIVE}
    steps: list[Step] = []
    if passes.design is Design.SEQUENTIAL:     # the baseline once, then a server per candidate block
        every = tuple(sorted(pair for block in passes.block_pairs for pair in block))
        steps.append(Step(Kind.BASELINE, None, None, tuple(Request(Side.BASELINE, r, p) for r, p in every)))
        for k, block in enumerate(passes.block_pairs):
            for name in racing if k == 0 else [finisher]:
                steps.append(Step(Kind.CANDIDATE, name, k, tuple(Request(Side.CANDIDATE, r, p) for r, p in block)))
    else:
        for k, block in enumerate(passes.block_pairs):
            steps += pass_steps(passes.design, k, block, racing if k == 0 else [finisher])
    steps += [s for g in passes.groups for s in g.steps if s.candidate in rest]
    return steps


def plan_costs(passes_by_target: list[TargetPasses], estimator: Estimator) -> PlanCosts:
    """Both plans' cost for each target's passes (one stream: the race runs at one stream only)."""
    exhaustive = race = 0.0
    loads_e = loads_r = 0
    known = False
    for passes in passes_by_target:
        combos = {n: c for g in passes.groups for n, c in g.combos.items()}
        for combo in [passes.baseline, *combos.values()]:
            known |= estimate_of(estimator, combo).source not in ("unknown", "model size")   # measured, not guessed

        def seconds(steps: list[Step], combos: dict = combos, passes: TargetPasses = passes) -> float:
            return sum(step_seconds(estimator, combos, s, passes.baseline) for s in steps)
        every = [s for g in passes.groups for s in g.steps]
        exhaustive += seconds(every)
        loads_e += cost(every).loads
        racing = [n for n, c in passes.groups[0].combos.items() if c.role == Role.SPECULATIVE]
        if len(racing) < 2:
            race += seconds(every)
            loads_r += cost(every).loads
            continue
        best = min((race_steps(passes, name) for name in racing), key=seconds)   # the cheapest to finish
        race += seconds(best)
        loads_r += cost(best).loads
    return PlanCosts(exhaustive, race, loads_e, loads_r, known)


def race_costs(config: SweepConfig, backend: Backend, combos: list[Combination], prompts: list, runs: int,
               results_path: Path, estimator: Estimator | None = None) -> PlanCosts:
    """:func:`plan_costs` for a sweep, from the results files the estimator reads (as ``--dry-run`` does)."""
    estimator = estimator or Estimator.for_results_path(config, len(prompts), results_path)
    passes = [p for target in config.targets
              if (p := target_passes(config, backend, combos, target.label, prompts, runs)) is not None]
    return plan_costs(passes, estimator)
