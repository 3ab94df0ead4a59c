"""A staged row's fields are summarised once per step (issue 44; the stage's baseline, which every step adds to, once
per stage), never left behind its requests: each request is saved as it finishes, the row's fields are summarised
when its step ends (the baseline's when its stage does) — also when Ctrl-C cuts the step — and a
row a killed sweep saved in the middle of a step is summarised again when the sweep resumes. Simulated servers
(benchmarks/simulation): no server starts."""

from __future__ import annotations

import random
import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from draftbench.analysis.verdict import summarize_records
from draftbench.results.file import ResultsFile, Row
from draftbench.results.kinds import Status
from draftbench.sweep.console import Reporter
from draftbench.sweep.run import run_sweep
from draftbench.sweep.store import RowStore, empty_results
from simulation.grids import prompts
from simulation.sweeps import LOGS, Setup, machine_world
from simulation.world import Cand, Grid, Machine, draw_truth

GRID = Grid("rows", (Cand("a", 1.2), Cand("b", 1.05)), prompt_sd=0.05)


def setup_and_backend(seed: int = 5):
    listed = prompts(6)
    setup = Setup.of(GRID, listed, max_tokens=32, noise_floor=0.02, search="exhaustive", stages=2, per_stage=3)
    rng = random.Random(seed)
    truth = draw_truth(GRID, len(listed), rng, [p.category for p in listed])
    return setup, machine_world(Machine(), setup)(GRID, truth, setup.names, listed, rng)


def summarised_whole(row: Row) -> bool:
    fields = summarize_records(list(row.requests), max_tokens=32, runs=1)
    return all(getattr(row, k) == v for k, v in fields.items() if k != "warnings")


class CutAfter(Reporter):
    """Ctrl-C after ``n`` requests, in the middle of a step."""

    def __init__(self, n: int):
        self.n = n

    def request_done(self, done: int, total: int) -> None:
        self.n -= 1
        if self.n == 0:
            assert done < total, "the cut is meant to fall inside a step"
            raise KeyboardInterrupt


class Snapshots(RowStore):
    """Every state the results file's journal held, row by row, as a killed sweep would leave it."""

    def __init__(self, results: ResultsFile):
        super().__init__(results)
        self.states: list[tuple[Row, ...]] = []

    def record(self, row: Row) -> Row:
        row = super().record(row)
        self.states.append(self.current().results)
        return row


def test_a_request_recorded_mid_step_keeps_the_rows_fields_until_its_step_ends():
    setup, backend = setup_and_backend()
    store = Snapshots(empty_results(setup.config))
    outcome = run_sweep(setup.config, backend, store=store, clock=backend.world.clock, logs_dir=LOGS)
    stale = [r for state in store.states for r in state if r.requests and not summarised_whole(r)]
    assert stale, "some request was saved before its row's fields were summarised again"
    assert all(summarised_whole(r) for r in store.current().results if r.status is Status.OK)
    assert all(summarised_whole(r) for r in outcome.results.results if r.requests)


def test_the_stages_baseline_is_summarised_as_its_stage_ends_not_at_every_step():
    """Each step adds to the stage's baseline row; summarising all its stages' requests after every candidate's step
    cost a sweep's analysis the square of its steps. Whole at each stage's end, and on no state between."""
    setup, backend = setup_and_backend()
    store = Snapshots(empty_results(setup.config))
    run_sweep(setup.config, backend, store=store, clock=backend.world.clock, logs_dir=LOGS)
    baselines = [next(r for r in state if r.draft is None and r.requests) for state in store.states
                 if any(r.draft is None and r.requests for r in state)]
    whole = [len(b.requests) for b in baselines if summarised_whole(b)]
    stages = sorted({q.block for q in baselines[-1].requests})
    assert len(stages) == 2
    # summarised on its first request, then only when a stage had ended (its requests all of whole stages)
    ends = {sum(1 for q in baselines[-1].requests if q.block is not None and q.block <= s) for s in stages}
    assert set(whole) - {1} <= ends and set(whole) >= ends


@pytest.mark.parametrize("cut", [2, 4, 9])
def test_ctrl_c_in_a_step_leaves_every_row_summarised_on_every_request_it_kept(cut):
    setup, backend = setup_and_backend()
    store = RowStore(empty_results(setup.config))
    with pytest.raises(KeyboardInterrupt):
        run_sweep(setup.config, backend, store=store, reporter=CutAfter(cut), clock=backend.world.clock,
                  logs_dir=LOGS)
    rows = [r for r in store.current().results if r.requests]
    assert rows and sum(len(r.requests) for r in rows) >= cut
    assert all(summarised_whole(r) for r in rows)


def test_a_row_a_killed_sweep_saved_mid_step_is_summarised_again_on_resume():
    setup, backend = setup_and_backend()
    store = Snapshots(empty_results(setup.config))
    run_sweep(setup.config, backend, store=store, clock=backend.world.clock, logs_dir=LOGS)
    # the last state with a row not summarised on its requests: the sweep killed just after that request was saved
    state = next(s for s in reversed(store.states) if any(r.requests and not summarised_whole(r) for r in s))
    _, fresh = setup_and_backend(seed=6)
    resumed = RowStore(replace(empty_results(setup.config), results=state))
    outcome = run_sweep(setup.config, fresh, store=resumed, clock=fresh.world.clock, logs_dir=LOGS)
    assert all(summarised_whole(r) for r in resumed.current().results if r.status is Status.OK)
    assert all(summarised_whole(r) for r in outcome.results.results if r.requests)


def test_a_file_left_by_a_kill_mid_step_says_which_rows_figures_are_behind_until_it_is_resumed():
    """``--chart-only`` or an export before the resume: the row's summarised figures miss that step's requests, and
    the analysis says so on that row (its speed-up counts them); the resumed sweep's file says nothing of it."""
    from draftbench.analysis.verdict import analyze
    from draftbench.results.findings import Code

    setup, backend = setup_and_backend()
    store = Snapshots(empty_results(setup.config))
    run_sweep(setup.config, backend, store=store, clock=backend.world.clock, logs_dir=LOGS)
    state = next(s for s in reversed(store.states) if any(r.requests and not summarised_whole(r) for r in s))
    killed = analyze(replace(empty_results(setup.config), results=state))
    behind = {r.key for r in killed.results if any(w.code is Code.SUMMARY_BEHIND for w in r.warnings)}
    assert behind == {r.key for r in state if r.requests and not summarised_whole(r)}
    _, fresh = setup_and_backend(seed=6)
    resumed = RowStore(replace(empty_results(setup.config), results=state))
    outcome = run_sweep(setup.config, fresh, store=resumed, clock=fresh.world.clock, logs_dir=LOGS)
    assert not any(w.code is Code.SUMMARY_BEHIND for r in outcome.results.results for w in r.warnings)


def test_a_sweep_run_from_python_records_its_prompt_set_as_the_command_line_does():
    """The forecast reads the prompt set (past it, its prompts come back): ``run_sweep`` without a store recorded
    none, so a sweep run from Python — the forecast harness's — forecast as if fresh prompts never ran out, which
    the command line's sweep does not."""
    setup, backend = setup_and_backend()
    recorded = empty_results(setup.config).prompt_set
    assert recorded is not None and len(recorded["ids"]) == 6
    outcome = run_sweep(setup.config, backend, clock=backend.world.clock, logs_dir=LOGS)
    assert outcome.results.prompt_set == recorded


def test_a_candidate_whose_first_stage_all_met_bursts_is_measured_on_and_no_look_ends_the_target_without_it():
    """make demo (2026-11-29, 347M on a busy machine): ngram-simple's four requests of stage 1 all met a burst of
    other programs' load on the target alone's side and were left out; the race never measured it again, and the
    target ended "nothing gains" at look 4 with it "not in the decision"."""
    from draftbench.analysis.decision import Outcome, decide
    from draftbench.analysis.stage_records import AbsenceKind
    grid = Grid("bursts", (Cand("slow", 0.5), Cand("fast", 1.3)), prompt_sd=0.05)
    listed = prompts(6)
    setup = Setup.of(grid, listed, max_tokens=32, noise_floor=0.02, search="adaptive", stages=2, per_stage=3)
    rng = random.Random(2)
    truth = draw_truth(grid, len(listed), rng, [p.category for p in listed])
    backend = machine_world(Machine(), setup)(grid, truth, setup.names, listed, rng)
    outcome = run_sweep(setup.config, backend, clock=backend.world.clock, logs_dir=LOGS)
    results = outcome.results
    fast = next(r for r in results.results if r.draft is not None and "fast" in (r.draft or ""))
    beside_fast = {q.session for q in fast.requests if q.block == 0}
    base = results.baseline_for(fast.target)
    assert base is not None and beside_fast

    def share(q, burst: bool):
        return replace(q, other_cpu_share=0.6 if burst else 0.02)
    rows = tuple(replace(r, requests=tuple(share(q, r is base and q.block == 0 and q.beside in beside_fast)
                                           for q in r.requests)) for r in results.results)
    busy = replace(results, results=rows)
    look1 = decide(busy, before={fast.target: 1})[fast.target]
    assert len(look1.evidence.awaiting) == 1, "every stage-1 pair of 'fast' met a burst on the target alone's side"
    assert look1.evidence.left_out[look1.evidence.awaiting[0]].why is AbsenceKind.NO_PAIRS
    assert look1.last is not None and look1.last.outcome is not Outcome.NOTHING_GAINS and not look1.final()
    assert set(look1.evidence.awaiting) <= set(look1.members(list(look1.evidence.rows)))
