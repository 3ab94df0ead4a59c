"""A sweep judges each row against its baseline once (issue 44): a target's rows are judged as the target ends,
and the final analysis reuses those judgements for the rows unchanged since — its figures exactly those of
analysing the saved file afresh. Simulated servers (benchmarks/simulation): no server starts."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from draftbench.analysis import comparison, row_analysis
from draftbench.analysis.verdict import analyze
from draftbench.results.file import ResultsFile
from draftbench.results.kinds import Role
from draftbench.sweep.run import run_sweep
from draftbench.sweep.store import RowStore, empty_results
from simulation.grids import prompts
from simulation.sweeps import LOGS, Setup, machine_world
from simulation.world import Cand, Grid, Machine, draw_truth

GRID = Grid("judged", (Cand("a", 1.2), Cand("b", 1.05), Cand("c", 0.9)), prompt_sd=0.05)


def sweep(monkeypatch) -> tuple[ResultsFile, RowStore, list[tuple]]:
    listed = prompts(6)
    setup = Setup.of(GRID, listed, max_tokens=32, noise_floor=0.02, search="exhaustive", stages=2, per_stage=3)
    rng = random.Random(3)
    truth = draw_truth(GRID, len(listed), rng, [p.category for p in listed])
    backend = machine_world(Machine(), setup)(GRID, truth, setup.names, listed, rng)
    calls: list[tuple] = []
    real = comparison.judged

    def counted(row, baseline, *args):
        calls.append((row, baseline))
        return real(row, baseline, *args)

    monkeypatch.setattr(comparison, "judged", counted)        # as the sweep's judgements call it
    monkeypatch.setattr(row_analysis, "judged", counted)      # as an analysis without them does
    store = RowStore(empty_results(setup.config))
    outcome = run_sweep(setup.config, backend, store=store, clock=backend.world.clock, logs_dir=LOGS)
    monkeypatch.undo()
    return outcome.results, store, calls


def test_no_row_is_judged_twice_against_the_same_baseline(monkeypatch):
    results, _, calls = sweep(monkeypatch)
    candidates = [r for r in results.results if r.role is Role.SPECULATIVE]
    assert candidates and calls, "the sweep judged its candidates' rows"
    seen = [(id(row), id(baseline)) for row, baseline in calls]
    assert len(seen) == len(set(seen)), "a row was judged again against the same baseline"


def test_the_final_analysis_is_that_of_the_saved_file_read_afresh(monkeypatch):
    results, store, _ = sweep(monkeypatch)
    afresh = analyze(store.current())
    assert [r.to_dict() for r in results.results] == [r.to_dict() for r in afresh.results]
    assert results.summary == afresh.summary
