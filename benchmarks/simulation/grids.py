"""Grids with known truth, and the scenarios ``benchmarks/verdicts.py`` runs them in.

The reference grids are the upstream draftbench sweeps of Qwen2.5 on an M4 Max
(``tests/data/upstream``): each row's mean tok/s over the target's is taken as that draft's true
speed-up, and its acceptance as the draft's. ``benchmarks/adaptive.py`` reads them the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
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
    """The built-in six, or ``n`` prompts cycling through their categories (their text is never read)."""
    if n == len(BUILTIN_PROMPTS):
        return list(BUILTIN_PROMPTS)
    return [Prompt(f"{p.category}-{i}", p.category, p.messages)
            for i, p in ((i, BUILTIN_PROMPTS[i % len(BUILTIN_PROMPTS)]) for i in range(n))]


@dataclass(frozen=True)
class Scenario:
    name: str
    about: str
    grids: tuple[Grid, ...]          # trial i runs grids[i % len(grids)]
    machine: Machine
    n_prompts: int = 6
    runs: int = 3
    max_tokens: int = 128
    noise_floor: float = DEFAULTS.noise_floor


def null(n: int, name: str = "d", **noise) -> Grid:
    """``n`` drafts that speculate (60% accepted) and gain exactly nothing: every one 1.00×."""
    return Grid(f"{n} × 1.00", tuple(Cand(f"{name}{i}", 1.0) for i in range(n)), **noise)


def scenarios() -> list[Scenario]:
    null6 = null(6)
    adaptive_noise = {"prompt_sd": 0.10, "shared_sd": 0.10, "own_sd": 0.03}    # adaptive.py's defaults
    session2 = Machine(session_sd=0.02)
    return [
        Scenario("null-quiet", "6 drafts at 1.00; no noise at all (a sanity check: nothing may be recommended)",
                 (null6,), Machine(run_sd=0.0)),
        Scenario("null-gaussian", "6 drafts at 1.00; Gaussian run noise 3%, no session effect, no drift (the model "
                 "the README's figures assume)", (null6,), Machine()),
        Scenario("null-session-2", "6 drafts at 1.00; session effect 2%", (null6,), session2),
        Scenario("null-session-5", "6 drafts at 1.00; session effect 5%", (null6,), Machine(session_sd=0.05)),
        Scenario("null-session-3-drift", "6 drafts at 1.00; session effect 3% and the machine 5% faster by the end "
                 "(linear drift)", (null6,), Machine(session_sd=0.03, drift=0.05)),
        Scenario("null-step-drift", "6 drafts at 1.00; session effect 2%, a 5% step in speed half-way through",
                 (null6,), Machine(session_sd=0.02, drift=0.05, step=True)),
        Scenario("null-heavy-tails", "6 drafts at 1.00; Student-t (3 df) run noise, 2% outliers at half speed, "
                 "session effect 2%", (null6,), Machine(tail_df=3, outlier_rate=0.02, session_sd=0.02)),
        Scenario("per-prompt", "1 draft at 1.00 whose effect differs by prompt (sd 5%)",
                 (null(1, own_sd=0.05),), Machine(), runs=5),
        Scenario("useless-22-gaussian", "22 drafts at 1.00, Gaussian run noise only: the best of many",
                 (null(22),), Machine()),
        Scenario("useless-22", "22 drafts at 1.00 whose effect differs by prompt (sd 3%): the best of many",
                 (null(22, own_sd=0.03),), Machine()),
        Scenario("single-1.01", "1 draft at 1.01 (inside the noise floor); Gaussian run noise 3%",
                 (Grid("1.01", (Cand("d101", 1.01),)),), Machine()),
        Scenario("near-tie", "drafts at 1.00, 1.01 and 1.02 (own effect per prompt, sd 3%)",
                 (Grid("1.00/1.01/1.02", (Cand("d100", 1.00), Cand("d101", 1.01), Cand("d102", 1.02)),
                       own_sd=0.03),), Machine()),
        Scenario("ngram-hetero", "n-gram methods drafting on some prompts only (1.02× over all: drafts on a third; "
                 "1.10×: on half), run noise ×3 where they draft, a 1.00 draft; session 2%, drift 3%",
                 (Grid("n-gram", (Cand("ngram-a", 1.02, 0.9, drafts_on=1 / 3, model_free=True),
                                  Cand("ngram-b", 1.10, 0.9, drafts_on=0.5, model_free=True), Cand("d0", 1.0)),
                       own_sd=0.03, hetero=3.0),), Machine(session_sd=0.02, drift=0.03)),
        Scenario("reference-7b-no-session", "the 7B grid under adaptive.py's own noise model (no session effect, "
                 "no drift: where benchmarks/adaptive.py's figures hold)",
                 reference_grids(REFERENCE["7b"], **adaptive_noise), Machine()),
        Scenario("reference-7b", "upstream Qwen2.5-7B grid (9 targets × 22 drafts, M4 Max means as truth), "
                 "adaptive.py's noise model, session effect 2%", reference_grids(REFERENCE["7b"], **adaptive_noise),
                 session2),
        Scenario("reference-72b", "upstream Qwen2.5-72B grid (2 targets × 31 drafts), adaptive.py's noise model, "
                 "session effect 2%", reference_grids(REFERENCE["72b"], **adaptive_noise), session2),
        # Many distinct prompts, one run each (a standard set sampled per category): the unit of "prompts
        # like these" is the prompt, so more of them, not more runs, is what narrows the interval.
        Scenario("reference-7b-24x1", "the reference-7b scenario with 24 prompts × 1 run instead of 6 × 3",
                 reference_grids(REFERENCE["7b"], **adaptive_noise), session2, n_prompts=24, runs=1),
        Scenario("reference-72b-24x1", "the reference-72b scenario with 24 prompts × 1 run instead of 6 × 3",
                 reference_grids(REFERENCE["72b"], **adaptive_noise), session2, n_prompts=24, runs=1),
    ]
