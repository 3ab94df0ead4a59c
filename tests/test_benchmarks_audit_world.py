"""benchmarks/simulation/audit_world.py, the second noise model (issue 43's audit), written apart from world.py:
what it feeds the sweep (sessions per server, heavy tails, outliers, drift, correlated prompt effects, shares,
a candidate's own helper load, counters within the truth) and that ``verdicts.py --world`` runs it. No
timing is asserted: the clock is simulated."""

from __future__ import annotations

import ast
import math
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import verdicts
from simulation import audit_world
from simulation.grids import HARSH, Scenario, grids_for, prompts
from simulation.sweeps import Setup, sweep
from simulation.world import Cand, Grid, draw_truth

MODULE = Path(audit_world.__file__)


def one(grid: Grid, factory=audit_world.session3, n_prompts: int = 24, stages: int = 3, seed: int = 2):
    listed = prompts(n_prompts)
    rng = random.Random(seed)
    truth = draw_truth(grid, n_prompts, rng, [p.category for p in listed])
    setup = Setup.of(grid, listed, max_tokens=64, noise_floor=0.02, search="exhaustive", stages=stages, per_stage=6)
    backend = factory(grid, truth, setup.names, listed, rng)
    return sweep(setup, backend), truth, backend


def test_it_shares_no_code_with_the_first_model():
    """A second check only if it is a second model: it imports nothing from world.py, grids.py or sweeps.py."""
    tree = ast.parse(MODULE.read_text())
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m.split(".")[-1] in ("world", "grids", "sweeps")}


def test_its_noise_is_the_audits():
    n3 = audit_world.Noise(session_sd=0.03)
    assert n3.tail_df == 3 and n3.outlier_rate == 0.02 and n3.outlier_factor == 0.6 and n3.step > 0
    backend = audit_world.session5(Grid("g", (Cand("a", 1.1),)), draw_truth(Grid("g", (Cand("a", 1.1),)), 4,
                                   random.Random(1)), {}, prompts(4), random.Random(1))
    assert backend.noise.session_sd == 0.05
    draws = [math.log(backend.request_noise()) for _ in range(20000)]
    slowed = sum(d < math.log(0.6) + 0.15 for d in draws) / len(draws)
    assert 0.015 < slowed < 0.03                                     # the 0.6× outliers, and little else that low
    body = [d for d in draws if d > -0.3]
    assert 0.025 < statistics.pstdev(body) < 0.04                     # 3% request noise, heavy-tailed


def test_every_server_has_its_own_session_and_every_request_a_share_and_counters_within_the_truth():
    grid = Grid("two", (Cand("a", 1.2), Cand("b", 1.0, helper_rate=1.0, helper_share=0.3)))
    result, _truth, _backend = one(grid)
    sessions = {r.session for row in result.results.results for r in row.requests}
    assert len(sessions) == result.loads
    rows = {row.draft or "": row for row in result.results.results}
    assert all(r.other_cpu_share is not None and r.other_cpu_share < 0.06 for r in rows[""].requests + rows["a"].requests)
    assert all(r.other_cpu_share >= 0.3 for r in rows["b"].requests)          # its own helper, read as others'
    for name in ("a", "b"):
        for r in rows[name].requests:
            assert 0 < r.draft_n_accepted <= r.draft_n and r.draft_n_accepted < r.completion_tokens


def test_prompt_effects_move_the_drafts_together_around_their_truth():
    grid = Grid("three", (Cand("a", 1.1), Cand("b", 1.1), Cand("c", 1.1)))
    listed = prompts(400)
    truth = draw_truth(grid, 400, random.Random(3), [p.category for p in listed])
    backend = audit_world.session3(grid, truth, {}, listed, random.Random(3))
    logs = {c: [math.log(g) for g in backend.gain[c]] for c in "abc"}
    assert abs(statistics.fmean(logs["a"]) - math.log(truth.population["a"])) < 0.01
    assert statistics.correlation(logs["a"], logs["b"]) > 0.3


def test_verdicts_runs_it_with_the_audits_prompt_set():
    about, grids = grids_for(HARSH)["best10"]
    scenario = Scenario("best10/audit", about, grids, HARSH.machine, n_prompts=96, stages=2)
    figures = verdicts.run_scenario(scenario, trials=1, seed=3, world=verdicts.load_world(
        "simulation.audit_world:session3"), stages=2)
    assert figures["exhaustive"]["trials"] == 1 and figures["race"]["false"] == 0.0
