"""benchmarks/verdicts.py, the whole-sweep simulator: its mechanics, and one seeded subset of its rates.

The simulated machine sits behind the backend contract, so these sweeps run the sweep's own plan,
runner, analysis and race; the checks are on what the simulator feeds them (truth, sessions,
drift in schedule order, counters) and on what it reads back. No timing is asserted: the clock is
simulated."""

from __future__ import annotations

import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import verdicts
from simulation.grids import Scenario, prompts, scenarios
from simulation.sweeps import Setup, exhaustive, race
from simulation.world import Cand, Grid, Machine, draw_truth

QUIET = Machine(run_sd=0.0)


def one_sweep(grid: Grid, machine: Machine, *, search: str = "exhaustive", design: str = "sequential",
              n_prompts: int = 6, runs: int = 2, seed: int = 3):
    listed = prompts(n_prompts)
    rng = random.Random(seed)
    truth = draw_truth(grid, n_prompts, rng)
    setup = Setup.of(grid, listed, runs=runs, max_tokens=64, noise_floor=0.02, search=search, design=design)
    world = setup.world(grid, machine, truth, rng)
    sweep = race(setup, world) if search == "adaptive" else exhaustive(setup, world)
    return sweep, truth, world


def mean_tps(sweep) -> dict[str | None, float]:
    return {r.draft: r.mean_tps for r in sweep.results.results}


def stage_tps(sweep) -> dict[str | None, float]:
    """Mean tok/s of each row's planned blocks (a confirmation block, measured last, left out)."""
    return {r.draft: statistics.fmean(q.decode_tps for q in r.requests if q.run < 2) for r in sweep.results.results}


def test_a_null_grid_without_noise_never_recommends():
    scenario = next(s for s in scenarios() if s.name == "null-quiet")
    figures = verdicts.run_scenario(scenario, trials=2, seed=5)
    for strategy in ("exhaustive", "race"):
        assert figures[strategy]["recommends"] == 0.0 and figures[strategy]["false_1"] == 0.0
        assert figures[strategy]["coverage_these"] == 1.0 and figures[strategy]["within_2pct"] == 1.0


def test_drift_is_applied_in_schedule_order_and_the_interleaved_design_cancels_it():
    grid = Grid("flat", tuple(Cand(f"d{i}", 1.0) for i in range(3)), prompt_sd=0.0)
    drifting = Machine(run_sd=0.0, drift=0.3)
    sequential, _, _ = one_sweep(grid, drifting)
    speeds = list(stage_tps(sequential).values())      # plan order: baseline, d0, d1, d2, one after another
    assert speeds == sorted(speeds) and speeds[-1] > speeds[0] * 1.15
    # the one that looked fastest is measured again on fresh requests, beside a fresh baseline: not confirmed
    assert sequential.results.summary["targets"][0]["recommended_draft"] is None
    interleaved, _, _ = one_sweep(grid, drifting, design="interleaved")
    rows = [r for r in interleaved.results.results if r.role == "speculative"]
    # each pair is measured seconds apart: the drift hits both sides, so every ratio stays near 1.00
    assert all(abs(r.speedup.ratio - 1) < 0.02 for r in rows)
    assert interleaved.results.summary["targets"][0]["recommended_draft"] is None


def test_a_session_offset_is_shared_by_every_request_of_the_session():
    grid = Grid("flat", (Cand("d0", 1.0), Cand("d1", 1.0)))
    sweep, _, world = one_sweep(grid, Machine(run_sd=0.0, session_sd=0.05))
    # sequential: the baseline and each draft once, then (if one looked faster) a confirmation's two servers
    assert len(world.sessions) == sweep.loads and sweep.loads in (3, 5)
    base, *rows = sweep.results.results
    first = {(b.prompt_id, b.run): b.decode_tps for b in base.requests if b.run < 2}
    for row in rows:
        ratios = {round(r.decode_tps / first[(r.prompt_id, r.run)], 4) for r in row.requests if r.run < 2}
        assert len(ratios) == 1 and ratios != {1.0}    # one offset per session, and the sessions differ


def test_counters_never_allow_more_than_the_true_speedup():
    grid = Grid("mixed", (Cand("draft", 1.3, 0.7), Cand("ngram", 1.1, 0.9, drafts_on=0.5, model_free=True)),
                shared_sd=0.1, own_sd=0.05)
    sweep, truth, _ = one_sweep(grid, Machine())
    index = {p.id: i for i, p in enumerate(prompts(6))}
    drafted_nothing = 0
    for row in sweep.results.results[1:]:
        for r in row.requests:
            true = truth.speedup[row.draft][index[r.prompt_id]]
            bound = r.completion_tokens / (r.completion_tokens - r.draft_n_accepted)
            assert bound >= true * 0.99 and r.draft_n_accepted <= r.draft_n
            drafted_nothing += r.draft_n == 0
            assert (r.draft_n == 0) == (true == 1.0)   # a model-free method draws nothing where it gains nothing
    assert drafted_nothing == 6                        # ngram: 3 of 6 prompts, 2 runs


def test_the_race_is_the_sweeps_own_race():
    grid = Grid("one winner", (Cand("slow0", 0.7), Cand("best", 1.5), Cand("slow1", 0.7), Cand("slow2", 0.7)),
                prompt_sd=0.0)
    raced, truth, world = one_sweep(grid, Machine(run_sd=0.01), search="adaptive", runs=3)
    full, _, _ = one_sweep(grid, Machine(run_sd=0.01), runs=3)
    status = {r.draft: r.status for r in raced.results.results}
    assert status == {None: "ok", "best": "ok", "slow0": "eliminated", "slow1": "eliminated", "slow2": "eliminated"}
    for sweep in (raced, full):
        assert sweep.results.summary["targets"][0]["recommended_draft"] == "best"
    assert raced.requests < full.requests and raced.loads == len(world.sessions)
    score = verdicts.score(raced, truth, tuple(prompts(6)), 0.02)
    assert score.recommended and not score.false_1 and score.within_2pct and score.pick_covered is not None


def test_the_command_line_runs_a_seeded_scenario(capsys, tmp_path):
    out = tmp_path / "figures.json"
    assert verdicts.main(["--scenario", "null-quiet", "--trials", "1", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "null-quiet" in printed and "false ≤1.00" in printed and out.read_text().startswith("{")
    assert isinstance(scenarios()[0], Scenario)


def test_seeded_rates_on_the_drifting_null_grid_keep_the_promise():
    """Issue 23's null grid (six useless drafts, a 3% session effect, the machine 5% faster by the end),
    30 seeded sweeps of each strategy: a fast subset of the 200-sweep figures in docs/statistics.md.
    Seeded, so the figures are fixed; the bounds leave room for a change of seed-to-draw order, not for a
    rule that stops keeping its promise (the old rules recommended a useless draft in 80-91% of sweeps)."""
    scenario = next(s for s in scenarios() if s.name == "null-session-3-drift")
    figures = verdicts.run_scenario(scenario, trials=30, seed=1)
    for strategy in ("exhaustive", "race"):
        rates = figures[strategy]
        assert rates["false_1"] <= 0.10, (strategy, rates)           # 1.0-1.5% over 200 sweeps
        assert rates["coverage_like"] >= 0.85, (strategy, rates)     # 95% over 200 sweeps
