"""Race or measure everything? The adaptive search only starts where it can save time.

A race saves the requests of the candidates it eliminates, and pays for them with server loads:
every candidate is loaded once for its probe, and each survivor once more to finish. With few
candidates, few requests each or models that load slowly, that trade loses (a five-candidate race
once took 169 s against the exhaustive 148 s: 8 server loads against 6). Both plans are costed
with the estimator ``--dry-run`` uses; the race at its best (its probes leave one candidate, which
finishes), so a race that would not save time even then is not started: the exhaustive search runs
instead, and says why. A race already under way in the results file is always continued.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..analysis.racing import RaceRules
from ..results.kinds import Role
from .config_file import SweepConfig
from .console import format_duration
from .estimate import Estimator, estimate_of
from .plan import Combination

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


def plan_costs(combos: list[Combination], estimator: Estimator, n_prompts: int, runs: int, noise_floor: float,
               n_categories: int) -> PlanCosts:
    """Both plans' cost for ``combos`` (one stream: the race runs at one stream only)."""
    exhaustive = race = 0.0
    loads_e = loads_r = 0
    known = False
    targets = dict.fromkeys(c.target.label for c in combos)
    for target in targets:
        group = [c for c in combos if c.target.label == target]
        candidates = [c for c in group if c.role == Role.SPECULATIVE]
        rules = RaceRules(len(candidates), n_prompts, runs, n_categories, noise_floor)
        finishing = []
        for combo in group:
            estimate = estimate_of(estimator, combo)
            known |= estimate.source not in ("unknown", "model size")     # measured, not guessed
            exhaustive += estimate.seconds
            loads_e += 1
            if combo.role != Role.SPECULATIVE or len(candidates) < 2:
                race += estimate.seconds          # measured as in an exhaustive sweep
                loads_r += 1
                continue
            race += estimate.fixed_s + rules.probe_requests * estimate.request_s
            loads_r += 1
            rest = rules.total_requests - rules.probe_requests
            if rest > 0:
                finishing.append(estimate.fixed_s + rest * estimate.request_s)
        if finishing:     # at best one survivor finishes: the cheapest to finish
            race += min(finishing)
            loads_r += 1
    return PlanCosts(exhaustive, race, loads_e, loads_r, known)


def race_costs(config: SweepConfig, combos: list[Combination], prompts: list, runs: int, results_path: Path,
               estimator: Estimator | None = None) -> PlanCosts:
    """:func:`plan_costs` for a sweep, from the results files the estimator reads (as ``--dry-run`` does)."""
    estimator = estimator or Estimator.for_results_path(config, len(prompts), results_path)
    floor = config.settings.get("noise_floor")
    return plan_costs(combos, estimator, len(prompts), runs, floor if isinstance(floor, (int, float)) else 0.02,
                      len({p.category for p in prompts}))
