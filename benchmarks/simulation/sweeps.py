"""Whole sweeps of a simulated machine through the sweep's own code.

Both strategies plan with ``draftbench.sweep.plan``, measure through ``CombinationRunner`` (the real
request records, ``summarize_records``, speculation checks) against :class:`SimBackend`, and end with
``analyze`` (speed-ups, intervals, ``recommend``'s verdict). The race is ``AdaptiveSearch`` itself
(``draftbench/sweep/race.py`` deciding with ``racing.judge``), with a store that re-analyses after
every row as the session does (without writing a file). Only the server and the clock are simulated.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from draftbench.analysis.verdict import analyze
from draftbench.config.prompts import Prompt
from draftbench.measure.sequential import MeasureOptions, Schedule
from draftbench.results.file import SCHEMA_VERSION, ResultsFile, Row
from draftbench.sweep.config_file import SweepConfig, validate_config
from draftbench.sweep.console import Reporter
from draftbench.sweep.plan import Combination, plan
from draftbench.sweep.race import AdaptiveSearch, MemoryStore
from draftbench.sweep.runner import CombinationRunner

from .schedule import Step, runner_order, sequential
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
           search: str) -> Setup:
        drafts = [c for c in grid.candidates if not c.model_free]
        data = {"name": "sim", "hardware": "sim", "backend": "llamacpp",
                "targets": [{"label": "target", "path": "/sim/target.gguf"}],
                "drafts": [{"label": c.name, "path": f"/sim/draft-{i}.gguf"} for i, c in enumerate(drafts)],
                "candidates": [{"label": c.name, "method": c.name} for c in grid.candidates if c.model_free],
                "settings": {"runs": runs, "max_tokens": max_tokens, "noise_floor": noise_floor, "port": 0,
                             "search": search}}
        config = validate_config(data)
        combos = tuple(plan(config))
        names = {(c.candidate.draft.path if c.candidate.draft else None, c.candidate.method): c.candidate.label
                 for c in combos if c.candidate}
        return cls(config, combos, tuple(prompts), MeasureOptions.from_settings(config.settings), names)

    def empty_results(self) -> ResultsFile:
        c = self.config
        return ResultsFile(name=c.name, hardware=c.hardware, backend=c.backend, model_family=c.model_family,
                           settings=dict(c.settings), schema_version=SCHEMA_VERSION)

    def runner(self, world: World) -> CombinationRunner:
        return CombinationRunner(SimBackend(world, self.names), self.config.backend, self.config.settings,
                                 list(self.prompts), self.options, LOGS, clock=world.clock)

    def world(self, grid: Grid, machine: Machine, truth: Truth, rng: random.Random) -> World:
        return World(grid, machine, truth, list(self.prompts), seed=self.options.seed, runs=self.options.runs,
                     warmup=self.options.warmup, expected_s=self.expected_s(grid, machine, truth), rng=rng)

    def expected_s(self, grid: Grid, machine: Machine, truth: Truth) -> float:
        """How long today's exhaustive sweep takes on the truth (the drift's time scale)."""
        per_row = []
        for combo in self.combos:
            name = combo.candidate.label if combo.candidate else None
            gain = [truth.speedup[name][p] if name else 1.0 for p in range(len(self.prompts))]
            seconds = sum(self.options.max_tokens / (truth.base_tps[p] * gain[p]) for p in range(len(self.prompts)))
            per_row.append(machine.load_s + self.options.runs * seconds)
        return sum(per_row)


@dataclass(frozen=True)
class Sweep:
    """One simulated sweep: the analysed results file and what it cost."""

    results: ResultsFile
    requests: int            # measured requests (warm-ups not counted)
    loads: int               # server sessions started
    wall_s: float            # simulated wall time: loads, warm-ups and requests


ScheduleFn = Callable[[int, Sequence[tuple[int, int]]], Sequence[Step]]


def exhaustive(setup: Setup, world: World, schedule: ScheduleFn = sequential) -> Sweep:
    """Every combination fully measured, in the order ``schedule`` gives; then analysed once, as the
    sweep's final analysis is. Consecutive steps of one session run on one server (one runner call);
    a row measured in several sessions keeps its earlier requests, as the race does."""
    runner = setup.runner(world)
    steps = schedule(len(setup.combos), runner_order(len(setup.prompts), setup.options.runs))
    rows: dict[int, Row] = {}
    failed: dict[str, str] = {}
    seen: set[int] = set()
    for session, group in itertools.groupby(steps, key=lambda s: s.session):
        block = list(group)
        if session in seen or len({s.row for s in block}) != 1:
            raise ValueError(f"session {session} of the schedule interleaves with another: this executor runs "
                             "one server session at a time (an interleaved design needs the sweep's own runner)")
        seen.add(session)
        index = block[0].row
        prior = rows.get(index)
        order = tuple((s.run, s.prompt) for s in block)
        row = runner.run(setup.combos[index], index + 1, failed, Schedule(order, prior.requests if prior else ()))
        if prior is not None:
            row = replace(row, wall_time=round((prior.wall_time or 0.0) + (row.wall_time or 0.0), 3))
        rows[index] = row
    results = analyze(replace(setup.empty_results(), results=tuple(rows[i] for i in sorted(rows))))
    return _sweep(results, world)


def race(setup: Setup, world: World) -> Sweep:
    """``settings.search: "adaptive"``: the baseline fully, then the race of ``AdaptiveSearch``."""
    store = MemoryStore(setup.empty_results())
    AdaptiveSearch(setup.config, setup.runner(world), store, Reporter(), list(setup.prompts), setup.options,
                   clock=world.clock).run(list(setup.combos))
    return _sweep(analyze(store.current()), world)


def _sweep(results: ResultsFile, world: World) -> Sweep:
    return Sweep(results, sum(len(r.requests) for r in results.results), len(world.sessions), world.now)
