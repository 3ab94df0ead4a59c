"""Grids with known truth, and the scenarios ``benchmarks/verdicts.py`` runs them in.

The reference grids are the upstream draftbench sweeps of Qwen2.5 on an M4 Max
(``tests/data/upstream``): each row's mean tok/s over the target's is taken as that draft's true
speed-up, and its acceptance as the draft's. The removed ``benchmarks/adaptive.py`` read them the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from draftbench.config.prompts import BUILTIN_PROMPTS, Prompt
from draftbench.config.settings import DEFAULTS

from .world import Cand, Grid, Machine

REPO = Path(__file__).resolve().parents[2]
REFERENCE = {"7b": REPO / "tests/data/upstream/m4max-128gb_llamacpp_qwen25-7b.json",
             "72b": REPO / "tests/data/upstream/m4max-128gb_llamacpp_qwen25-72b.json"}


@dataclass(frozen=True)
class Target:
    """One target of a reference file: its mean tok/s alone, and each draft's (mean tok/s, acceptance)."""

    name: str
    base_tps: float
    drafts: dict[str, tuple[float, float | None]]


def reference_targets(path: Path) -> list[Target]:
    """Targets with a baseline and at least two measured drafts (failed rows left out)."""
    data = json.loads(path.read_text())
    out = []
    for target in dict.fromkeys(r["target"] for r in data["results"]):
        rows = [r for r in data["results"] if r["target"] == target and r.get("mean_tps") and not r.get("error")]
        base = next((r["mean_tps"] for r in rows if r.get("draft") is None), None)
        drafts = {r["draft"]: (r["mean_tps"], r.get("acceptance_rate")) for r in rows if r.get("draft")}
        if base and len(drafts) >= 2:
            out.append(Target(target, base, drafts))
    return out


def reference_grids(path: Path, **noise) -> tuple[Grid, ...]:
    return tuple(Grid(f"{path.name}: {t.name}", tuple(Cand(d, tps / t.base_tps, acc or 0.05)
                                                      for d, (tps, acc) in t.drafts.items()),
                      base_tps=t.base_tps, **noise) for t in reference_targets(path))


def prompts(n: int) -> list[Prompt]:
    """``n`` prompts cycling through the built-in categories (the simulated servers never read their text)."""
    return [Prompt(f"{p.category}-{i}", p.category, p.messages)
            for i, p in ((i, BUILTIN_PROMPTS[i % len(BUILTIN_PROMPTS)]) for i in range(n))]


@dataclass(frozen=True)
class Noise:
    """A noise model: the spread of the per-prompt truth (on the grid) and the machine's."""

    name: str
    about: str
    grid: dict
    machine: Machine
    temperature: float = 0.0         # what the simulated sweeps ask for (the servers read only the machine)


# The project's simulator as it was (the removed benchmarks/adaptive.py's per-prompt spreads, a 2% session effect).
TODAY = Noise("today", "Gaussian request noise 3%, session effect 2% per server; per prompt: difficulty 10%, "
              "speculation effect shared by the drafts 10%, each draft's own 3%",
              {"prompt_sd": 0.10, "shared_sd": 0.10, "own_sd": 0.03}, Machine(session_sd=0.02))
# Harsher, and independent of it (issue 32): heavy tails, outliers, a larger session effect, three kinds
# of drift, and the drafts correlated by prompt category.
HARSH = Noise("harsh", "Student-t (4 df) request noise 3%, 2% of requests slowed to 0.6×, session effect 3% per "
              "server, drift: 3% linear + a 3% step half-way + a 2% random walk; per prompt: difficulty 10%, a "
              "category effect shared by the drafts 8%, a prompt effect shared 5%, each draft's own 3%",
              {"prompt_sd": 0.10, "shared_sd": 0.05, "category_sd": 0.08, "own_sd": 0.03},
              Machine(tail_df=4, outlier_rate=0.02, outlier_factor=0.6, session_sd=0.03, drift=0.03,
                      step_drift=0.03, wander_sd=0.02))
# The harsh model with bursts of another program's load, as make demo met them on 2 shared cores (7% of
# requests slowed to 0.15×, each recording other programs' CPU share: analysis/pairing.py leaves them out).
BURSTS = Noise("bursts", HARSH.about + "; bursts of another program's load: 7% of requests at 0.15×, their CPU "
               "share recorded", HARSH.grid, replace(HARSH.machine, burst_rate=0.07))
# The harsh model at a sampling temperature (issue 46): each request samples its own answer, so the request beside
# it decodes other text (a 3% path effect on speed, not shared), the candidate's acceptance varies with the path
# (8% on its speed-up, the counters following), and 30% of answers end early (8 to max_tokens tokens).
SAMPLING = Noise("sampling", HARSH.about + "; sampling at temperature > 0: each request's own path 3% (not shared "
                 "with the request beside it), the candidate's acceptance along it 8%, 30% of answers ending early",
                 HARSH.grid, replace(HARSH.machine, path_sd=0.03, spec_path_sd=0.08, early_stop=0.3), 0.7)
NOISES = (TODAY, HARSH, BURSTS, SAMPLING)


@dataclass(frozen=True)
class Scenario:
    name: str
    about: str
    grids: tuple[Grid, ...]          # trial i runs grids[i % len(grids)]
    machine: Machine
    n_prompts: int = 48              # the prompt set (stages draw fresh prompts from it)
    stages: int = DEFAULTS.stages
    per_stage: int = DEFAULTS.prompts_per_stage
    max_tokens: int = 128
    noise_floor: float = DEFAULTS.noise_floor
    temperature: float = 0.0

    @property
    def today_cost(self) -> tuple[float, float]:
        """Requests and server loads of the exhaustive sweep before issue 32 (6 prompts × 3 runs, interleaved:
        36 requests and 6 loads per candidate, and a confirmation of 12 requests on 2 loads), per trial."""
        sizes = [len(g.candidates) for g in self.grids]
        c = sum(sizes) / len(sizes)
        return 36 * c + 12, 6 * c + 2


def null(n: int, name: str = "d", **noise) -> Grid:
    """``n`` drafts that speculate (60% accepted) and gain exactly nothing: every one 1.00×."""
    return Grid(f"{n} × 1.00", tuple(Cand(f"{name}{i}", 1.0) for i in range(n)), **noise)


def grids_for(noise: Noise) -> dict[str, tuple[str, tuple[Grid, ...]]]:
    """The grids the guarantees are measured on, with ``noise``'s per-prompt spreads."""
    kw = noise.grid
    best10 = Grid("+10%, +5%, +5%, 0, 0, 0", (Cand("b10", 1.10), Cand("b5a", 1.05), Cand("b5b", 1.05),
                                               Cand("z0", 1.0), Cand("z1", 1.0), Cand("z2", 1.0)), **kw)
    clear = Grid("+20%, +10%, +5%, 0, 0, 0", (Cand("c20", 1.20), Cand("c10", 1.10), Cand("c5", 1.05),
                                                Cand("z0", 1.0), Cand("z1", 1.0), Cand("z2", 1.0)), **kw)
    tie = Grid("+10%, +10%, +5%, 0, 0, 0", (Cand("t10a", 1.10), Cand("t10b", 1.10), Cand("t5", 1.05),
                                           Cand("z0", 1.0), Cand("z1", 1.0), Cand("z2", 1.0)), **kw)
    helper = Grid("1.00 with a helper, 5 × 1.00", (Cand("h0", 1.0, helper_rate=0.25, helper_factor=0.6),)
                  + null(5, **kw).candidates, **kw)
    steady = Grid("+10% with a steady helper, +5%, +5%, 0, 0, 0",
                  (replace(best10.candidates[0], helper_rate=1.0),) + best10.candidates[1:], **kw)
    return {"null": ("6 drafts at 1.00", (null(6, **kw),)),
            "best10": ("the best draft +10%, the others +5%, +5%, 0, 0, 0", (best10,)),
            "reference-7b": ("upstream Qwen2.5-7B (9 targets × 22 drafts, M4 Max means as truth)",
                             reference_grids(REFERENCE["7b"], **kw)),
            "reference-72b": ("upstream Qwen2.5-72B (2 targets × 31 drafts)", reference_grids(REFERENCE["72b"], **kw)),
            "clear-55": ("one draft +55% (issue 32's clear case)", (Grid("+55%", (Cand("c55", 1.55, 0.83),), **kw),)),
            "clear": ("a clear best: +20%, the others +10%, +5%, 0, 0, 0", (clear,)),
            "tie": ("two tied at the top: +10%, +10%, the others +5%, 0, 0, 0", (tie,)),
            "helper": ("six useless drafts, one with its own helper load (outside its server's process tree) that "
                       "slows a quarter of its requests to 0.6× (true 1.00 with it)", (helper,)),
            "steady": ("the best10 grid, its +10% draft with a steady own load (30% of the machine, outside its "
                       "server's process tree) that does not slow it", (steady,))}


def scenarios() -> list[Scenario]:
    out = []
    for noise in NOISES:
        for grid_name, (about, grids) in grids_for(noise).items():
            out.append(Scenario(f"{grid_name}/{noise.name}", f"{about}; {noise.about}", grids, noise.machine,
                                temperature=noise.temperature))
    return out
