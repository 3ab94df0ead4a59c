"""Whole sweeps of a simulated machine through the sweep's own entry point.

A trial is ``draftbench.sweep.run.run_sweep`` — the function the command line calls: the plan, the
design's stages (fresh prompts on fresh server pairs, the looks and their decisions), the request
records and ``analyze``'s verdict — on a backend that implements the contract
(``draftbench/backends/base.py``). By default that backend is :class:`world.SimBackend` on a
:class:`world.Machine`; ``benchmarks/verdicts.py --world MODULE:FACTORY`` puts an outside noise model
in its place (:data:`WorldFactory`). Only the servers and the clock are simulated.
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from draftbench.analysis.stage_verdict import StagedVerdict
from draftbench.backends.base import Backend
from draftbench.config.prompts import Prompt
from draftbench.results.file import ResultsFile
from draftbench.sweep.config_file import SweepConfig, validate_config
from draftbench.sweep.plan import plan
from draftbench.sweep.run import run_sweep

from .world import Grid, Machine, SimBackend, Truth, World

LOGS = Path("/nonexistent/draftbench-sim-logs")     # servers are simulated: nothing is written there

# An outside noise model: (grid, truth, candidate names by (draft path, methods), prompts, rng) → a backend
# (its ``clock`` attribute, when it has one, is the sweep's clock: simulated time).
WorldFactory = Callable[[Grid, Truth, dict, Sequence[Prompt], random.Random], Backend]


@dataclass(frozen=True)
class Setup:
    """One scenario's sweep as a user would configure it: the config (its prompt file), the prompts, the names."""

    config: SweepConfig
    prompts: tuple[Prompt, ...]
    names: dict[tuple, str]          # (draft path, method) -> candidate name, for the simulated servers

    @classmethod
    def of(cls, grid: Grid, prompts: Sequence[Prompt], *, max_tokens: int, noise_floor: float, search: str,
           design: str = "interleaved", stages: int = 6, per_stage: int = 6, budget_s: float | None = None,
           folder: Path | None = None, temperature: float = 0.0) -> Setup:
        folder = folder or Path(tempfile.mkdtemp(prefix="draftbench-sim-"))
        prompt_file = folder / "prompts.jsonl"
        prompt_file.write_text("".join(json.dumps({"id": p.id, "category": p.category, "prompt": p.text}) + "\n"
                                       for p in prompts))
        drafts = [c for c in grid.candidates if not c.model_free]
        data = {"name": "sim", "hardware": "sim", "backend": "llamacpp",
                "targets": [{"label": "target", "path": "/sim/target.gguf"}],
                "drafts": [{"label": c.name, "path": f"/sim/draft-{i}.gguf"} for i, c in enumerate(drafts)],
                "candidates": [{"label": c.name, "method": c.name} for c in grid.candidates if c.model_free],
                "settings": {"max_tokens": max_tokens, "noise_floor": noise_floor, "port": 0, "search": search,
                             "design": design, "stages": stages, "prompts_per_stage": per_stage,
                             "prompts": str(prompt_file), "budget_s": budget_s, "temperature": temperature}}
        config = validate_config(data, source=str(folder / "sim.json"), base_dir=str(folder))
        names = {(c.candidate.draft.path if c.candidate.draft else None, c.candidate.method): c.candidate.label
                 for c in plan(config) if c.candidate}
        return cls(config, tuple(prompts), names)


def machine_world(machine: Machine, setup: Setup) -> WorldFactory:
    """The built-in noise model: :class:`world.World` on ``machine``; drift runs over the longest the sweep may
    take (every planned stage with every candidate)."""
    def factory(grid: Grid, truth: Truth, names: dict, prompts: Sequence[Prompt], rng: random.Random) -> Backend:
        settings = setup.config.settings
        world = World(grid, machine, truth, list(prompts), seed=settings.seed, runs=settings.stages,
                      warmup=settings.warmup, expected_s=expected_s(grid, machine, truth, settings), rng=rng)
        return SimBackend(world, names)
    return factory


def expected_s(grid: Grid, machine: Machine, truth: Truth, settings) -> float:
    """How long every planned stage with every candidate takes on the truth (the drift's time scale)."""
    n, c = settings.prompts_per_stage, len(grid.candidates)
    base = sum(truth.base_tps) / len(truth.base_tps)
    gains = [sum(truth.speedup[k.name]) / len(truth.speedup[k.name]) for k in grid.candidates]
    per_stage = (1 + c) * machine.load_s + sum(n * settings.max_tokens / base * (1 + 1 / g) for g in gains)
    return settings.stages * per_stage


@dataclass(frozen=True)
class Sweep:
    """One simulated sweep: the analysed results, the staged verdict, and what it cost."""

    results: ResultsFile
    verdict: StagedVerdict | None
    requests: int            # measured requests (warm-ups not counted)
    loads: int               # server sessions started
    wall_s: float            # simulated wall time: loads, warm-ups and requests


def sweep(setup: Setup, backend: Backend) -> Sweep:
    """``run_sweep`` on ``backend`` (simulated time when it has a ``clock``)."""
    world = getattr(backend, "world", None)
    clock = getattr(backend, "clock", None) or (world.clock if world is not None else None)
    outcome = run_sweep(setup.config, backend, clock=clock or _wall(), logs_dir=LOGS)
    results = outcome.results
    sessions = {r.session for row in results.results for r in row.requests if r.session}
    wall = clock() if clock is not None else 0.0
    return Sweep(results, outcome.verdicts.get("target"), sum(len(r.requests) for r in results.results),
                 len(sessions), wall)


def _wall() -> Callable[[], float]:
    import time
    return time.perf_counter
