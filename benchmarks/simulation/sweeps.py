"""Whole sweeps of a simulated machine through the sweep's own code.

Both strategies plan with ``draftbench.sweep.plan``, take their order from the sweep's schedule
(``draftbench/sweep/schedule.py``: the design's blocks, sessions and passes), measure through the
sweep's own executor (``sweep/passes.run_passes`` and ``sweep/steps.StepRunner``: the runner's
launch and checks, the real request records) against :class:`SimBackend`, and end with ``analyze``
(speed-ups, intervals, ``recommend``'s verdict). The race is ``AdaptiveSearch`` itself
(``draftbench/sweep/race.py`` deciding with ``racing.judge``). Rows are kept in memory and analysed
once at the end (the race decides on raw rows: its decisions are the same). Only the servers and
the clock are simulated.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from draftbench.analysis.verdict import analyze
from draftbench.config.prompts import Prompt
from draftbench.measure.sequential import MeasureOptions
from draftbench.results.file import SCHEMA_VERSION, ResultsFile
from draftbench.sweep.config_file import SweepConfig, validate_config
from draftbench.sweep.console import Reporter
from draftbench.sweep.passes import run_passes, target_passes
from draftbench.sweep.plan import Combination, plan
from draftbench.sweep.race import AdaptiveSearch, MemoryStore
from draftbench.sweep.runner import CombinationRunner
from draftbench.sweep.schedule import Side

from .world import Grid, Machine, SimBackend, Truth, World

LOGS = Path("/nonexistent/draftbench-sim-logs")     # servers are simulated: nothing is written there


@dataclass(frozen=True)
class Setup:
    """One scenario's sweep, as a user would configure it: the config, its plan and prompts."""

    config: SweepConfig
    combos: tuple[Combination, ...]
    prompts: tuple[Prompt, ...]
    options: MeasureOptions
    names: dict[tuple, str]          # (draft path, method) -> candidate name, for SimBackend

    @classmethod
    def of(cls, grid: Grid, prompts: Sequence[Prompt], *, runs: int, max_tokens: int, noise_floor: float,
           search: str, design: str = "interleaved") -> Setup:
        drafts = [c for c in grid.candidates if not c.model_free]
        data = {"name": "sim", "hardware": "sim", "backend": "llamacpp",
                "targets": [{"label": "target", "path": "/sim/target.gguf"}],
                "drafts": [{"label": c.name, "path": f"/sim/draft-{i}.gguf"} for i, c in enumerate(drafts)],
                "candidates": [{"label": c.name, "method": c.name} for c in grid.candidates if c.model_free],
                "settings": {"runs": runs, "max_tokens": max_tokens, "noise_floor": noise_floor, "port": 0,
                             "search": search, "design": design}}
        config = validate_config(data)
        combos = tuple(plan(config))
        names = {(c.candidate.draft.path if c.candidate.draft else None, c.candidate.method): c.candidate.label
                 for c in combos if c.candidate}
        return cls(config, combos, tuple(prompts), MeasureOptions.from_settings(config.settings), names)

    def empty_results(self) -> ResultsFile:
        c = self.config
        return ResultsFile(name=c.name, hardware=c.hardware, backend=c.backend, model_family=c.model_family,
                           settings=c.settings.to_dict(), schema_version=SCHEMA_VERSION)

    def runner(self, world: World) -> CombinationRunner:
        return CombinationRunner(SimBackend(world, self.names), self.config.backend, self.config.settings,
                                 list(self.prompts), self.options, LOGS, clock=world.clock)

    def world(self, grid: Grid, machine: Machine, truth: Truth, rng: random.Random) -> World:
        return World(grid, machine, truth, list(self.prompts), seed=self.options.seed, runs=self.options.runs,
                     warmup=self.options.warmup, expected_s=self.expected_s(grid, machine, truth), rng=rng)

    def expected_s(self, grid: Grid, machine: Machine, truth: Truth) -> float:
        """How long the exhaustive sweep of the config's design takes on the truth (the drift's time scale:
        "5% faster by the end" means by the end of this design's sweep)."""
        passes = target_passes(self.config, SimBackend(None, self.names), list(self.combos), "target",
                               list(self.prompts), self.options.runs)
        assert passes is not None
        seconds = 0.0
        for group in passes.groups:
            for step in group.steps:
                seconds += step.loads * machine.load_s
                name = group.combos[step.candidate].candidate.label if step.candidate else None
                for r in step.requests:
                    gain = truth.speedup[name][r.prompt] if name and r.side is Side.CANDIDATE else 1.0
                    seconds += self.options.max_tokens / (truth.base_tps[r.prompt] * gain)
        return seconds


@dataclass(frozen=True)
class Sweep:
    """One simulated sweep: the analysed results file and what it cost."""

    results: ResultsFile
    requests: int            # measured requests (warm-ups not counted)
    loads: int               # server sessions started
    wall_s: float            # simulated wall time: loads, warm-ups and requests


def exhaustive(setup: Setup, world: World) -> Sweep:
    """Every combination fully measured, in the passes of the config's design; analysed once at the end,
    as the sweep's final analysis is."""
    store = MemoryStore(setup.empty_results(), analyse=False)
    runner = setup.runner(world)
    run_passes(setup.config, runner.backend, list(setup.combos), store, Reporter(), runner, list(setup.prompts),
               setup.options, clock=world.clock)
    return _sweep(analyze(store.current()), world)


def race(setup: Setup, world: World) -> Sweep:
    """``settings.search: "adaptive"``: the race of ``AdaptiveSearch``, in the config's design."""
    store = MemoryStore(setup.empty_results(), analyse=False)
    AdaptiveSearch(setup.config, setup.runner(world), store, Reporter(), list(setup.prompts), setup.options,
                   clock=world.clock).run(list(setup.combos))
    return _sweep(analyze(store.current()), world)


def _sweep(results: ResultsFile, world: World) -> Sweep:
    return Sweep(results, sum(len(r.requests) for r in results.results), len(world.sessions), world.now)
