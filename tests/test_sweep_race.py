"""Adaptive search (settings.search "adaptive"): the racing rules, and the race driven through the
sweep with the in-process backend (no processes; deterministic; nothing here depends on speed).
The race against real llama-servers is in test_sweep_race_llama.py."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from draftbench.analysis.pairing import Pair
from draftbench.analysis.racing import RaceRules, Standing, Why, judge, race_bound
from draftbench.analysis.replication import SessionVariance, Unit
from draftbench.analysis.student_t import t_quantile
from draftbench.common.errors import ConfigError
from draftbench.config.prompts import BUILTIN_PROMPTS
from draftbench.measure.sequential import MeasureOptions
from draftbench.results.file import ResultsFile, Row, load_results, save_results
from draftbench.results.kinds import Role
from draftbench.sweep import EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_OK, CombinationRunner, Sweep, plan
from draftbench.sweep.config_file import load_config, validate_config
from draftbench.sweep.console import Reporter
from draftbench.sweep.race import AdaptiveSearch, MemoryStore
from draftbench.sweep.schedule import blocks

from fakes.inprocess import FakeBackend, Script
from helpers import run_cli, tiny_gguf

TARGET = "/m/target.gguf"
BEST, GOOD, BAD, SLOW = "/m/best.gguf", "/m/good.gguf", "/m/bad.gguf", "/m/slow.gguf"
DRAFTS = (("best", BEST), ("good", GOOD), ("bad", BAD), ("slow", SLOW))


def config(tmp_path: Path, drafts=DRAFTS, **settings):
    data = {"name": "race", "hardware": "box", "backend": "llamacpp", "targets": [{"label": "7B", "path": TARGET}],
            "drafts": [{"label": label, "path": path} for label, path in drafts],
            "settings": {"runs": 3, "max_tokens": 64, "prompts": "builtin", "port": 0, "search": "adaptive",
                         **settings}}
    return validate_config(data, source=str(tmp_path / "c.json"), base_dir=str(tmp_path))


def script(**kw) -> Script:
    base = dict(tps={TARGET: 50.0}, speedup={BEST: 2.0, GOOD: 1.5, BAD: 0.6, SLOW: 0.97},
                acceptance={BEST: 0.9, GOOD: 0.8, BAD: 0.02, SLOW: 0.5})
    base.update(kw)
    return Script(**base)


def sweep(tmp_path, backend, cfg=None, reporter=None, name="r.json") -> tuple[int, ResultsFile]:
    path = tmp_path / name
    code = Sweep(cfg or config(tmp_path), path, None, reporter=reporter or Reporter(), backend=backend).run()
    return code, load_results(path)


def by_draft(results: ResultsFile) -> dict:
    return {r.draft: r for r in results.results}


def launches(backend: FakeBackend) -> list:
    return [entry[2] for entry in backend.log if entry[0] == "launch"]


# --------------------------------------------------------------------------- the rules

def pairs_of(ratios: dict[str, float], *, runs: int = 1, wobble: float = 0.0, session: str = "s",
             shift: int = 0) -> list[Pair]:
    """Paired log ratios: one per prompt and repetition, each repetition its own session (block);
    ``wobble``: a deterministic ±spread, its pattern moved by ``shift``."""
    return [Pair(p, p, run, f"{session}{run}", math.log(r) + wobble * ((i + shift) % 3 - 1 + (i + run) % 2 - 0.5),
                 None, None) for run in range(runs) for i, (p, r) in enumerate(ratios.items())]


SIX = "abcdef"


def test_t_quantiles_are_exact():
    assert t_quantile(0.975, 5) == pytest.approx(2.5706, abs=1e-4)
    assert t_quantile(0.9995, 3) == pytest.approx(12.924, abs=1e-3)
    assert t_quantile(0.975, 10_000) == pytest.approx(1.960, abs=1e-3)


def test_alpha_is_spent_over_every_look_of_every_candidate():
    rules = RaceRules(n_candidates=4, n_looks=3)
    assert rules.error == pytest.approx(0.05 / 12)
    assert "bonferroni-over-looks" in rules.method and "futility" in rules.method


def test_the_probe_is_the_first_block_and_covers_every_prompt():
    categories = [p.category for p in BUILTIN_PROMPTS] + ["code"]
    first = blocks(categories, runs=3)[0]
    assert sorted(i for _, i in first) == list(range(7))                   # every prompt, once
    assert {categories[i] for _, i in first[:6]} == set(categories)         # categories interleaved
    halves = blocks(categories, runs=1)
    assert {categories[i] for _, i in halves[0]} == set(categories) - {"summarisation"} or len(halves[0]) == 4
    assert sorted(i for h in halves for _, i in h) == list(range(7))        # one run: two halves, each prompt once


def test_eliminations_pair_candidates_with_the_leader_prompt_by_prompt():
    rules = RaceRules(n_candidates=3, n_looks=3)
    hard = dict(zip(SIX, (1.0, 1.4, 0.8, 1.2, 1.1, 0.9)))  # how each prompt suits speculation: shared by all
    look = judge({"leader": pairs_of({p: 2.0 * f for p, f in hard.items()}, runs=3, wobble=0.002),
                  "behind": pairs_of({p: 1.5 * f for p, f in hard.items()}, runs=3, wobble=0.002),
                  "useless": pairs_of({p: 1.01 for p in SIX}, runs=3, wobble=0.002)}, rules, looks_done=3)
    out = look.eliminated
    assert set(out) == {"behind", "useless"}
    assert out["behind"].why is Why.BELOW_LEADER and "25.0% slower than leader on the same prompts" in \
        out["behind"].reason
    assert out["useless"].why is Why.BELOW_FLOOR and "noise floor of +2.0%" in out["useless"].reason
    assert look.leader == "leader" and look.decided and look.winner == "leader"
    assert look.outcome()["winner"] == "leader" and set(look.outcome()["eliminated"]) == {"behind", "useless"}


def test_at_the_probe_an_unmeasured_session_spread_is_assumed():
    """With one session each, nothing can measure the session-to-session spread: the assumed 5% keeps a
    candidate 15% behind the leader in the race at the probe, but not after three sessions show little."""
    rules = RaceRules(n_candidates=2, n_looks=3)
    hard = dict(zip(SIX, (1.0, 1.2, 0.9, 1.1, 1.05, 0.95)))
    probe = judge({"leader": pairs_of({p: 1.5 * f for p, f in hard.items()}, wobble=0.003),
                   "close": pairs_of({p: 1.3 * f for p, f in hard.items()}, wobble=0.003)}, rules, looks_done=1)
    assert probe.vs_leader["close"].df > 100 and not probe.eliminated       # the assumed spread, known
    later = judge({"leader": pairs_of({p: 1.5 * f for p, f in hard.items()}, runs=3, wobble=0.003),
                   "close": pairs_of({p: 1.3 * f for p, f in hard.items()}, runs=3, wobble=0.003)}, rules,
                  looks_done=3)
    assert set(later.eliminated) == {"close"}


def test_tied_is_an_equivalence_and_the_rest_is_resolved_unresolved_or_open():
    rules = RaceRules(n_candidates=2, n_looks=3)
    hard = dict(zip(SIX, (1.0, 1.2, 0.9, 1.1, 1.05, 0.95)))
    lead = pairs_of({p: 1.5 * f for p, f in hard.items()}, runs=3, wobble=0.001)

    def other(factor, wobble=0.001):
        return pairs_of({p: 1.5 * factor * f for p, f in hard.items()}, runs=3, wobble=wobble, session="t", shift=1)

    tied = judge({"leader": lead, "twin": other(0.998)}, rules, 3)
    assert tied.standing["twin"] is Standing.TIED and tied.outcome()["tied"] == ["twin"]
    behind = judge({"leader": lead, "behind": other(0.99, wobble=0.01)}, rules, 3)   # not better, maybe worse
    assert behind.standing["behind"] is Standing.RESOLVED and behind.vs_leader["behind"].low < 1 / 1.02
    noisy = judge({"leader": lead, "noisy": other(0.985, wobble=0.08)}, rules, 3)    # the last look: cannot tell
    assert noisy.standing["noisy"] is Standing.UNRESOLVED and noisy.outcome()["unresolved"] == ["noisy"]
    early = judge({"leader": lead[:6], "noisy": other(0.998, wobble=0.08)[:6]}, rules, 1)
    assert early.standing["noisy"] is Standing.OPEN and not early.decided
    two = {"leader": lead[:12], "noisy": other(0.96, wobble=0.08)[:12]}     # look 2 of 3, the spread still assumed
    assert judge(two, rules, 2).standing["noisy"] is Standing.UNRESOLVED            # futility: stop now
    assert judge(two, replace(rules, futility=False), 2).standing["noisy"] is Standing.OPEN   # or measure on


def test_the_winner_needs_the_spent_boundary_not_a_plain_95_percent():
    """+9% on six prompts: a plain 95% interval clears +2%, the race's boundary at 0.05 / (1 × 3 looks) does not."""
    rules = RaceRules(n_candidates=1, n_looks=3)
    ratios = dict(zip(SIX, (1.00, 1.16, 1.05, 1.13, 1.09, 1.09)))
    units = [Unit(p, math.log(r), "s0") for p, r in ratios.items()]
    plain = race_bound(units, 0.025, SessionVariance(0.0, 10))
    spent = race_bound(units, rules.error, SessionVariance(0.0, 10))
    assert plain.low > 1.02 > spent.low
    for looks in (1, 2, 3):         # the same boundary at every look: repeating the prompts does not lower it
        look = judge({"one": pairs_of(ratios, runs=looks)}, rules, looks)
        assert look.leader == "one" and look.decided and look.winner is None
    clear = judge({"one": pairs_of({p: 1.3 * r for p, r in ratios.items()})}, rules, 1)
    assert clear.winner == "one"                                                 # +41%: wins at the probe


# --------------------------------------------------------------------------- the race in a sweep

def test_adaptive_search_picks_the_exhaustive_winner_with_fewer_requests(tmp_path):
    exhaustive_backend, adaptive_backend = FakeBackend(script()), FakeBackend(script())
    code_ex, full = sweep(tmp_path, exhaustive_backend, config(tmp_path, search="exhaustive"), name="ex.json")
    code_ad, raced = sweep(tmp_path, adaptive_backend)
    assert code_ex == EXIT_OK and code_ad == EXIT_OK        # eliminated candidates are not failures
    assert raced.summary["targets"][0]["recommended_draft"] == full.summary["targets"][0]["recommended_draft"] == "best"
    rows = by_draft(raced)
    for label in ("good", "bad", "slow"):
        row = rows[label]
        assert row.status == "eliminated" and row.reason.startswith("eliminated by the race after 6 requests")
        assert len(row.requests) == 6 and row.mean_tps and row.speedup and row.race["decision"] == "eliminated"
        assert not row.counts_as_speedup()
    assert "25.0% slower than best on the same prompts" in rows["good"].reason and "noise floor" in rows["bad"].reason
    best = rows["best"]
    assert best.ok and best.race["decision"] == "winner" and best.confirmed.significant
    # the probe (block 1), then the leader measured once more on fresh requests (the confirmation block)
    assert [r.block for r in best.requests] == [0] * 6 + [3] * 6 and len({r.session for r in best.requests}) == 2
    # the probe is block 1 of 3: every prompt once, each candidate beside a baseline server of its own
    assert {r.prompt_id for r in rows["best"].requests} == {p.id for p in BUILTIN_PROMPTS}
    assert raced.summary["server_loads"] == 8 + 2 == len(launches(adaptive_backend))
    measured = sum(len(r.requests) for r in raced.results)
    assert measured < sum(len(r.requests) for r in full.results) / 2
    assert raced.summary["targets"][0]["race"]["best"] == "best"


def test_close_candidates_are_measured_further_and_the_rest_stop(tmp_path):
    backend = FakeBackend(script(speedup={BEST: 1.5, GOOD: 1.45, BAD: 0.6, SLOW: 0.97},
                                 noise={BEST: 0.1, GOOD: 0.1}))
    code, results = sweep(tmp_path, backend)
    assert code == EXIT_OK
    rows = by_draft(results)
    for label in ("best", "good"):
        row = rows[label]
        assert len(row.requests) > 6 and row.race["loads"] == len(row.requests) // 6
        assert [r.block for r in row.requests] == sorted(r.block for r in row.requests)   # block after block
    assert rows["bad"].status == rows["slow"].status == "eliminated" and len(rows["bad"].requests) == 6
    decisions = {rows[label].race["decision"] for label in ("best", "good")}
    assert decisions & {"winner", "leader, not shown faster than the baseline by the noise floor"}
    assert launches(backend).count(BAD) == 1


def test_a_race_resumes_without_measuring_again(tmp_path):
    class StopAtSecondBlock(Reporter):
        def combination_started(self, index, total, title, at_most=False):
            if "block 2/3" in title:
                raise KeyboardInterrupt

    cfg = config(tmp_path)
    noisy = dict(speedup={BEST: 1.5, GOOD: 1.45, BAD: 0.6, SLOW: 0.97}, noise={BEST: 0.1, GOOD: 0.1})
    code, first = sweep(tmp_path, FakeBackend(script(**noisy)), cfg, reporter=StopAtSecondBlock())
    assert code == EXIT_INTERRUPTED
    assert by_draft(first)["bad"].status == "eliminated" and len(by_draft(first)["best"].requests) == 6
    again = FakeBackend(script(**noisy))
    code, resumed = sweep(tmp_path, again, cfg)
    assert code == EXIT_OK
    assert BAD not in launches(again) and SLOW not in launches(again)       # no probe again
    rows = by_draft(resumed)
    assert rows["bad"].status == "eliminated" and len(rows["best"].requests) > 6
    assert rows["best"].requests[:6] == by_draft(first)["best"].requests


def test_a_race_where_nothing_pays_confirms_nothing_and_says_so(tmp_path):
    backend = FakeBackend(script(speedup={BEST: 0.7, GOOD: 0.8, BAD: 0.6, SLOW: 0.9}))
    code, results = sweep(tmp_path, backend)
    rows = by_draft(results)
    assert code == EXIT_OK and all(rows[d].status == "eliminated" for d in ("best", "good", "bad"))
    # the leader (-10%) stays, decided: its estimate is below the floor, so nothing is confirmed
    assert rows["slow"].ok and rows["slow"].confirmed is None and len(rows["slow"].requests) == 6
    assert rows["slow"].race["decision"] == "leader, not confirmed faster than the baseline by the noise floor"
    verdict = results.summary["targets"][0]["verdict"]
    assert "not recommended" in verdict and "best: slow" in verdict


def test_the_budget_stops_the_race_and_says_how_to_continue(tmp_path):
    ticks = iter(range(0, 10_000, 10))          # every clock reading is 10 s later
    cfg = config(tmp_path, budget_s=15)   # the baseline and one probe take 10 s each
    events = []

    class Recorder(Reporter):
        def race(self, text):
            events.append(text)

    def clock():
        return float(next(ticks))

    prompts = [p for p in BUILTIN_PROMPTS if p.category in ("code", "json")]
    options = MeasureOptions(runs=3, warmup=1, max_tokens=64)
    runner = CombinationRunner(FakeBackend(script()), "llamacpp", cfg.settings, prompts, options, tmp_path / "logs",
                               clock=clock)
    store = MemoryStore(ResultsFile(name="race", hardware="box", backend="llamacpp", model_family="", settings=cfg.settings.to_dict()))
    complete = AdaptiveSearch(cfg, runner, store, Recorder(), prompts, options, clock=clock).run(plan(cfg))
    assert complete is False
    assert [r.draft for r in store.results.results if r.role == Role.SPECULATIVE.value] == ["best"]
    assert any("not probed" in e and "--budget" in e for e in events)


def test_the_report_shows_eliminated_candidates_as_such(tmp_path):
    from draftbench.report.view import CellState, build_data, invalid_rows
    from draftbench.results.kinds import Status
    _, results = sweep(tmp_path, FakeBackend(script()))
    data = build_data(results)
    states = {c.col.draft: c.state for c in data.cells.values()}
    assert states == {"best": CellState.OK, "good": Status.ELIMINATED, "bad": Status.ELIMINATED,
                      "slow": Status.ELIMINATED}
    assert {p.row.draft: p.what for p in invalid_rows(results)} == {"good": "eliminated", "bad": "eliminated",
                                                                    "slow": "eliminated"}


def test_the_results_file_keeps_race_fields_and_strict_json(tmp_path):
    sweep(tmp_path, FakeBackend(script()))
    data = json.loads((tmp_path / "r.json").read_text())
    row = next(r for r in data["results"] if r["draft"] == "good")
    assert row["status"] == "eliminated" and row["race"]["bound"]["n_pairs"] == 6 and row["race"]["loads"] == 1
    assert data["summary"]["server_loads"] == 8 + 2


def test_budget_without_adaptive_search_is_refused_where_it_was_given(tmp_path):
    """One rule, checked with the config (so a library call refuses it too): a budget in the file is a config
    problem at its JSON path; one from the command line is a usage error that names the flag."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"name": "x", "hardware": "h", "targets": [{"label": "t", "path": TARGET}],
                                "drafts": [], "settings": {"budget_s": 60}}))
    proc = run_cli("sweep.py", "--config", str(path), "--dry-run")
    assert proc.returncode == 2 and "$.settings.budget_s: a budget" in proc.stderr and "--search adaptive" in proc.stderr
    with pytest.raises(ConfigError, match="only applies to the adaptive search"):
        load_config(path)
    path.write_text(json.dumps({"name": "x", "hardware": "h", "targets": [{"label": "t", "path": TARGET}]}))
    proc = run_cli("sweep.py", "--config", str(path), "--dry-run", "--budget", "60")
    assert proc.returncode == 2 and proc.stderr.startswith("Error: --budget 60: a budget"), proc.stderr
    for budget in ("0", "20000000", "nan"):       # the flag is checked against the setting's bounds, as the file is
        proc = run_cli("sweep.py", "--config", str(path), "--dry-run", "--search", "adaptive", "--budget", budget)
        assert proc.returncode == 2 and proc.stderr.startswith(f"Error: --budget {budget}:"), proc.stderr


def test_switching_search_on_resume_is_refused(tmp_path):
    sweep(tmp_path, FakeBackend(script()))
    with pytest.raises(Exception, match=r"settings\.search 'adaptive' vs 'exhaustive'"):
        sweep(tmp_path, FakeBackend(script()), config(tmp_path, search="exhaustive"))


def test_unreached_exit_code_is_incomplete_when_a_candidate_fails(tmp_path):
    backend = FakeBackend(script(missing={SLOW}))
    code, results = sweep(tmp_path, backend)
    assert code == EXIT_INCOMPLETE and by_draft(results)["slow"].status == "skipped"


def test_adaptive_search_with_concurrency_levels_is_refused(tmp_path):
    path = tmp_path / "c.json"
    target = tiny_gguf(tmp_path / "t.gguf")     # the dry run checks the model file
    path.write_text(json.dumps({"name": "x", "hardware": "h", "targets": [{"label": "t", "path": str(target)}],
                                "drafts": [], "settings": {"concurrency": [1, 4]}}))
    proc = run_cli("sweep.py", "--config", str(path), "--dry-run", "--search", "adaptive")
    assert proc.returncode == 2 and "races candidates at one stream" in proc.stderr
    proc = run_cli("sweep.py", "--config", str(path), "--dry-run")
    assert proc.returncode == 0, proc.stderr


def test_the_replay_simulator_runs_the_same_passes_as_the_sweep(tmp_path):
    """benchmarks/adaptive.py replays the race's passes (block k for those still in it, a look after each)
    with racing.judge: on the sweep's own data it measures the same blocks and eliminates the same."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from adaptive import Grid, race

    noisy = dict(speedup={BEST: 1.5, GOOD: 1.45, BAD: 0.6, SLOW: 0.97}, noise={BEST: 0.1, GOOD: 0.1})
    _, full = sweep(tmp_path, FakeBackend(script(**noisy)), config(tmp_path, search="exhaustive"), name="ex.json")
    _, raced = sweep(tmp_path, FakeBackend(script(**noisy)))
    baseline = next(r for r in full.results if r.role == "baseline")
    data = {(r.draft or ""): {(q.prompt_id, q.run): q.decode_tps for q in r.requests} for r in full.results}
    # the exhaustive sweep measured a baseline beside every candidate: replay against the first one's
    first = {r.session for r in by_draft(full)["best"].requests}
    data[""] = {(q.prompt_id, q.run): q.decode_tps for q in baseline.requests
                if any(q.session in (c.compared_with or []) for c in by_draft(full)["best"].requests)}
    assert first
    for table in data.values():          # the replay confirms on repetition 3: the sweep's own, or its last again
        table.update({(pid, 3): v for (pid, run), v in list(table.items()) if run == 2 and (pid, 3) not in table})
    grid = Grid("fake", ["best", "good", "bad", "slow"], [p.id for p in BUILTIN_PROMPTS], lambda rng, runs: (data, {}))
    outcome = race(grid, data, 3, lambda n, looks: RaceRules(n, looks, 0.02))
    rows = by_draft(raced)
    assert outcome.eliminated == {label for label in grid.candidates if rows[label].status == "eliminated"}
    assert outcome.measured == {label: sum(r.block != 3 for r in rows[label].requests) for label in grid.candidates}
    assert (outcome.pick is not None) == (raced.summary["targets"][0]["recommended_draft"] is not None)


def test_a_candidate_that_never_speculates_is_not_raced(tmp_path):
    events = []

    class Recorder(Reporter):
        def race(self, text):
            events.append(text)

    code, results = sweep(tmp_path, FakeBackend(script(inactive={GOOD})), reporter=Recorder())
    good = by_draft(results)["good"]
    assert good.ok and good.speculation_active is False and good.race["decision"] == "inactive"
    assert by_draft(results)["best"].race["decision"] == "winner" and code == EXIT_OK
    assert events[-1].startswith("7B: best of the race: best, significantly faster than the target alone (+100.0%")


def test_the_console_shows_an_upper_bound_on_the_time_left_during_a_race(tmp_path):
    etas = []

    class Recorder(Reporter):
        def progress(self, elapsed_s, remaining_s, at_most=False):
            etas.append((remaining_s, at_most))

    sweep(tmp_path, FakeBackend(script()), reporter=Recorder())
    assert etas and all(at_most for _, at_most in etas)
    first, last = etas[0][0], etas[-1][0]
    # after the baseline: four candidates estimated from it as if each went the distance (6 × ~1.3 s)
    assert first is not None and first > 4 * 6 * 1.0 and last is not None and last < first / 4
    # (the bound may rise once: the first candidates measured say how much slower or faster than the
    # baseline this target's candidates run, and the unprobed are estimated with that)


# --------------------------------------------------------------------------- race or not

def _history(tmp_path: Path, *, load_s: float, request_s: float) -> None:
    """An earlier results file of the same hardware beside the new one: what the estimator reads."""
    save_results(ResultsFile(name="old", hardware="box", backend="llamacpp", model_family="",
                             settings={"max_tokens": 64}, results=(
        Row(target="7B", role="baseline", mean_total_time=request_s, load_time_s=load_s),)), tmp_path / "old.json")


def test_the_race_does_not_start_where_it_cannot_save_time(tmp_path):
    """Slow loads, quick requests, the sequential design (a candidate measured fully takes one server, a
    raced one a server per block): the race's extra loads would cost more than the requests skipped."""
    _history(tmp_path, load_s=60.0, request_s=0.5)
    notes = []

    class Recorder(Reporter):
        def note(self, text):
            notes.append(text)

    backend = FakeBackend(script())
    code, results = sweep(tmp_path, backend, config(tmp_path, design="sequential"), reporter=Recorder())
    assert code == EXIT_OK and not any(r.race for r in results.results)        # measured exhaustively
    # one server per combination, then the best confirmed on fresh requests (its own baseline block first)
    assert len(launches(backend)) == 5 + 2
    assert any(n.startswith("adaptive search: exhaustive ~") and "the race cannot save time here" in n
               for n in notes), notes


def test_in_a_design_with_a_server_per_block_the_race_only_saves(tmp_path):
    """Interleaved or bracketed, every block is a server session either way: the race runs the same
    steps minus those of the candidates it has decided about, so even slow loads do not stop it."""
    _history(tmp_path, load_s=60.0, request_s=0.5)
    code, results = sweep(tmp_path, FakeBackend(script()))
    assert code == EXIT_OK and any(r.race for r in results.results)


def test_the_race_starts_where_it_saves_time_and_dry_run_shows_both_plans(tmp_path):
    _history(tmp_path, load_s=1.0, request_s=30.0)
    target = tiny_gguf(tmp_path / "t.gguf")
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"name": "race", "hardware": "box", "targets": [{"label": "7B", "path": str(target)}],
                                "drafts": [{"label": n, "path": str(tiny_gguf(tmp_path / f"{n}.gguf"))}
                                           for n in ("a", "b", "c", "d")],
                                "settings": {"runs": 3, "max_tokens": 64, "prompts": ["code", "json"],
                                             "search": "adaptive", "design": "sequential"}}))
    proc = run_cli("sweep.py", "--config", str(path), "--results", str(tmp_path / "new.json"), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    plans = next(line for line in proc.stdout.splitlines() if line.startswith("Plans: "))
    assert "exhaustive ~" in plans and "(5 server loads)" in plans and "adaptive race ~" in plans
    assert plans.endswith("→ the race, which can save time")
    _history(tmp_path, load_s=60.0, request_s=0.5)
    proc = run_cli("sweep.py", "--config", str(path), "--results", str(tmp_path / "new.json"), "--dry-run")
    assert "→ the exhaustive search: the race cannot save time here" in proc.stdout


# --------------------------------------------------------------------------- one decision, in one set of words

def test_the_race_and_the_verdict_say_one_thing(tmp_path):
    """No candidate beats the target alone by the noise floor: the race's best is said to be not
    significantly faster — never 'wins the race' beside 'not recommended'."""
    events, started = [], []

    class Recorder(Reporter):
        def race(self, text):
            events.append(text)

        def combination_started(self, index, total, title, at_most=False):
            started.append((index, total, at_most))

    flat = dict(speedup={BEST: 1.01, GOOD: 0.995, BAD: 0.6, SLOW: 0.97})
    _code, results = sweep(tmp_path, FakeBackend(script(**flat)), reporter=Recorder())
    entry = results.summary["targets"][0]
    assert entry["recommended_draft"] is None and "not recommended" in entry["verdict"]
    race = entry["race"]
    assert race["best"] is not None and race["significant"] is False
    assert race["sentence"].startswith(f"7B: best of the race: {race['best']}, but not significantly faster than "
                                       "the target alone")
    assert events[-1] == race["sentence"][:-1]               # the console says the stored sentence
    # steps print in the order they run, out of the most the race may run: every block of every candidate
    # (3 blocks × 4 candidates, each a baseline and a candidate server side by side) and the confirmation
    assert [i for i, _, _ in started] == list(range(1, len(started) + 1))
    assert all(at_most and total == 3 * 4 + 1 for _, total, at_most in started)


def test_the_verdicts_choice_is_the_best_of_the_race_and_each_candidate_has_its_history(tmp_path):
    _code, results = sweep(tmp_path, FakeBackend(script()))
    entry = results.summary["targets"][0]
    race = entry["race"]
    assert race["best"] == entry["recommended_draft"] == "best" and race["significant"] is True
    entries = {e["name"]: e for e in race["entries"]}
    assert set(entries) == {"best", "good", "bad", "slow"}
    for name in ("bad", "slow"):
        assert entries[name]["decision"] == "eliminated" and entries[name]["why"].startswith("eliminated by the race")
        assert entries[name]["looks"][-1]["standing"] == "eliminated"
    first = entries["best"]["looks"][0]
    # the probe's look: block 1, every built-in prompt once
    assert first["requests"] == 6 and first["low"] <= first["ratio"] <= first["high"]
    rows = by_draft(results)
    assert rows["best"].race["looks"] == entries["best"]["looks"]                        # kept in the results file
    from draftbench.report import render_report
    page = render_report(results, cdn=True)
    assert '<section id="race">' in page and race["sentence"] in page.replace("&#x27;", "'")
    assert "after 6: +100.0%" in page
