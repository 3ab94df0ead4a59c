"""Adaptive search (settings.search "adaptive"): the racing rules, and the race driven through the
sweep with the in-process backend (no processes; deterministic; nothing here depends on speed).
The race against real llama-servers is in test_sweep_race_llama.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from draftbench.analysis.racing import RaceRules, Standing, Why, judge, log_ratios, pooled, race_bound, request_order
from draftbench.analysis.student_t import t_quantile
from draftbench.config.prompts import BUILTIN_PROMPTS
from draftbench.measure.sequential import MeasureOptions
from draftbench.results.file import ResultsFile, Row, load_results, save_results
from draftbench.results.kinds import Role
from draftbench.sweep import EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_OK, CombinationRunner, Sweep, plan
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.console import Reporter
from draftbench.sweep.race import AdaptiveSearch, MemoryStore

from fakes.inprocess import FakeBackend, Script
from helpers import run_cli, tiny_gguf

TARGET = "/m/target.gguf"
BEST, GOOD, BAD, SLOW = "/m/best.gguf", "/m/good.gguf", "/m/bad.gguf", "/m/slow.gguf"
DRAFTS = (("best", BEST), ("good", GOOD), ("bad", BAD), ("slow", SLOW))


def config(tmp_path: Path, drafts=DRAFTS, **settings):
    data = {"name": "race", "hardware": "box", "backend": "llamacpp", "targets": [{"label": "7B", "path": TARGET}],
            "drafts": [{"label": label, "path": path} for label, path in drafts],
            "settings": {"runs": 3, "max_tokens": 64, "prompts": ["code", "json"], "port": 0, "search": "adaptive",
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

def test_t_quantiles_match_the_table():
    assert t_quantile(0.975, 5) == pytest.approx(2.5706, abs=1e-4)
    assert t_quantile(0.9995, 3) == pytest.approx(12.924, abs=1e-3)
    assert t_quantile(0.975, 10_000) == pytest.approx(1.960, abs=1e-3)


def test_the_error_rate_is_split_over_every_look_of_every_candidate():
    rules = RaceRules(n_candidates=4, n_prompts=6, runs=3, n_categories=6)
    assert rules.probe_requests == 6 and rules.looks == (6, 12, 18)
    assert rules.error == pytest.approx(0.05 / 12)
    small = RaceRules(n_candidates=2, n_prompts=2, runs=3, n_categories=2)
    assert small.probe_requests == 3 and small.looks == (3, 4, 6)       # a probe needs 3 requests
    assert small.look_size(2) is None and small.look_size(5) == 4


def test_the_probe_covers_every_category_first():
    prompts = [p for p in BUILTIN_PROMPTS] + [BUILTIN_PROMPTS[0]]
    order = request_order(prompts, 2)
    first = [prompts[i].category for _, i in order[:6]]
    assert sorted(first) == sorted({p.category for p in BUILTIN_PROMPTS}) and len(order) == 14


def test_eliminations_pair_candidates_with_the_leader_prompt_by_prompt():
    rules = RaceRules(n_candidates=4, n_prompts=4, runs=1, n_categories=4, pooled=False)
    base = {(p, 0): 10.0 for p in "abcd"}
    hard = {"a": 1.0, "b": 1.4, "c": 0.8, "d": 1.2}       # how each prompt suits speculation: shared by all
    tps = {"leader": {(p, 0): 20.0 * f for p, f in hard.items()},
           "behind": {(p, 0): 19.0 * f for p, f in hard.items()},     # 5% slower on every prompt
           "useless": {(p, 0): 10.1 for p in hard}}                         # +1% on every prompt
    look = judge(tps, base, rules)
    out = look.eliminated
    assert set(out) == {"behind", "useless"}
    assert out["behind"].why is Why.BELOW_LEADER and "5.0% slower than leader on the same prompts" in \
        out["behind"].reason
    assert out["useless"].why is Why.BELOW_FLOOR and "noise floor of +2.0%" in out["useless"].reason
    alone = judge({"leader": tps["leader"]}, base, rules)
    assert alone.leader == "leader" and alone.separated()
    assert look.leader == "leader" and look.separated()     # nobody can beat it by more than the floor
    close = {(p, 0): 20.3 * f * (1.05 if p in "ab" else 0.96) for p, f in hard.items()}
    assert not judge({"leader": tps["leader"], "close": close}, base, rules).separated()


def test_a_pooled_spread_narrows_a_short_probe_but_never_a_noisier_candidate():
    base = {("p", r): 10.0 for r in range(3)}
    quiet = {("p", 0): 12.0, ("p", 1): 12.6, ("p", 2): 11.5}
    noisy = {("p", 0): 9.0, ("p", 1): 16.0, ("p", 2): 12.0}
    pool = pooled([log_ratios(base, t) for t in (quiet, quiet, quiet, noisy)])
    assert pool is not None and pool.df == 8
    own, shared = race_bound(base, quiet, 0.001), race_bound(base, quiet, 0.001, pool)
    assert shared.df == 8 and own.df == 2 and shared.high < own.high          # 8 degrees of freedom, not 2
    alone, with_pool = race_bound(base, noisy, 0.001), race_bound(base, noisy, 0.001, pool)
    assert with_pool == alone          # noisier than the pool: it keeps its own, wider bound


def test_a_contender_the_planned_requests_cannot_separate_is_tied():
    rules = RaceRules(n_candidates=2, n_prompts=3, runs=2, n_categories=3)
    base = {(p, r): 10.0 for p in "abc" for r in range(2)}
    wobble = {"a": 1.0, "b": 1.1, "c": 0.9}
    leader = {(p, 0): 20.0 * f for p, f in wobble.items()}

    def behind(spread):      # 1% slower than the leader, with this much scatter prompt by prompt
        return {(p, 0): 19.8 * f * {"a": 1 + spread, "b": 1 - spread, "c": 1.0}[p] for p, f in wobble.items()}

    look = judge({"leader": leader, "twin": behind(0.04)}, base, rules)
    assert look.leader == "leader" and look.standing["twin"] is Standing.TIED and look.decided
    assert not look.separated()         # tied is not "shown to be slower"
    # as scattered, but one standard error up it would beat the leader by the floor: keep measuring it
    look = judge({"leader": leader, "wide": behind(0.12)}, base, rules)
    assert look.standing["wide"] is Standing.OPEN and not look.decided
    look = judge({"leader": leader, "twin": behind(0.04)}, base, replace(rules, futility=False))
    assert look.standing["twin"] is Standing.OPEN


def test_a_bound_pairs_requests_and_widens_with_confidence():
    base = {("p", r): 10.0 for r in range(4)}
    cand = {("p", 0): 12.0, ("p", 1): 13.0, ("p", 2): 11.0, ("p", 3): 12.5, ("q", 0): 99.0}
    narrow, wide = race_bound(base, cand, 0.025), race_bound(base, cand, 0.0005)
    assert narrow.n_pairs == 4 and wide.low < narrow.low < narrow.ratio < narrow.high < wide.high
    assert race_bound(base, {("p", 0): 12.0}, 0.95) is None


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
        assert row.status == "eliminated" and row.reason.startswith("eliminated by the race after 3 requests")
        assert len(row.requests) == 3 and row.mean_tps and row.speedup and row.race["decision"] == "eliminated"
        assert not row.counts_as_speedup()
    assert "25.0% slower than best on the same prompts" in rows["good"].reason and "noise floor" in rows["bad"].reason
    assert rows["best"].ok and rows["best"].race["decision"] == "winner"
    measured = sum(len(r.requests) for r in raced.results)
    assert measured < sum(len(r.requests) for r in full.results)
    assert raced.summary["server_loads"] == 5 == len(launches(adaptive_backend))


def test_close_candidates_are_measured_further_on_a_second_server(tmp_path):
    backend = FakeBackend(script(speedup={BEST: 1.5, GOOD: 1.45, BAD: 0.6, SLOW: 0.97},
                                 noise={BEST: 0.3, GOOD: 0.3}))
    code, results = sweep(tmp_path, backend)
    assert code == EXIT_OK
    rows = by_draft(results)
    for label in ("best", "good"):
        row = rows[label]
        assert row.ok and len(row.requests) == 6 and row.race["loads"] == 2
        assert [(r.prompt_id, r.run) for r in row.requests][:3] == [("code-bst", 0), ("json-users", 0), ("code-bst", 1)]
    # 3% apart with 30% noise: six requests cannot separate them, so they are tied, not "best is better"
    assert rows["best"].race["decision"] == "winner" and rows["good"].race["decision"] == "tied with the winner"
    assert launches(backend).count(BEST) == 2 and launches(backend).count(BAD) == 1
    assert results.summary["server_loads"] == 1 + 2 + 2 + 1 + 2     # slow: the noisy pool kept it for a look


def test_a_race_resumes_without_measuring_again(tmp_path):
    class StopAtExtension(Reporter):
        def combination_started(self, index, total, title, at_most=False):
            if "race: requests" in title:
                raise KeyboardInterrupt

    cfg = config(tmp_path)
    noisy = dict(speedup={BEST: 1.5, GOOD: 1.45, BAD: 0.6, SLOW: 0.97}, noise={BEST: 0.3, GOOD: 0.3})
    code, first = sweep(tmp_path, FakeBackend(script(**noisy)), cfg, reporter=StopAtExtension())
    assert code == EXIT_INTERRUPTED
    assert by_draft(first)["bad"].status == "eliminated" and len(by_draft(first)["best"].requests) == 3
    again = FakeBackend(script(**noisy))
    code, resumed = sweep(tmp_path, again, cfg)
    assert code == EXIT_OK
    assert sorted(launches(again), key=str) == [BEST, GOOD, SLOW]    # no baseline, no probe again
    rows = by_draft(resumed)
    assert rows["bad"].status == "eliminated" and len(rows["best"].requests) == 6 and rows["best"].race["loads"] == 2
    assert rows["best"].requests[:3] == by_draft(first)["best"].requests


def test_every_candidate_eliminated_says_so_in_the_verdict(tmp_path):
    backend = FakeBackend(script(speedup={BEST: 0.7, GOOD: 0.8, BAD: 0.6, SLOW: 0.9}))
    code, results = sweep(tmp_path, backend)
    assert code == EXIT_OK and all(r.status == "eliminated" for r in results.results if r.role == "speculative")
    verdict = results.summary["targets"][0]["verdict"]
    assert "eliminated every candidate" in verdict and "best probe: slow" in verdict


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
    store = MemoryStore(ResultsFile(name="race", hardware="box", backend="llamacpp", model_family="", settings=cfg.settings))
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
    assert row["status"] == "eliminated" and row["race"]["bound"]["n_pairs"] == 3 and row["race"]["loads"] == 1
    assert data["summary"]["server_loads"] == 5


def test_budget_without_adaptive_search_is_a_usage_error(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"name": "x", "hardware": "h", "targets": [{"label": "t", "path": TARGET}],
                                "drafts": [], "settings": {"budget_s": 60}}))
    proc = run_cli("sweep.py", "--config", str(path), "--dry-run")
    assert proc.returncode == 2 and proc.stderr.startswith("Error: a budget") and "--search adaptive" in proc.stderr
    proc = run_cli("sweep.py", "--config", str(path), "--dry-run", "--search", "adaptive", "--budget", "0")
    assert proc.returncode == 2 and "--budget 0" in proc.stderr


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


def test_the_simulator_runs_the_same_race_as_the_sweep(tmp_path):
    """benchmarks/adaptive.py mirrors sweep/race.py: on the same data it measures the same requests."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from adaptive import Grid, race

    noisy = dict(speedup={BEST: 1.5, GOOD: 1.45, BAD: 0.6, SLOW: 0.97}, noise={BEST: 0.3, GOOD: 0.3, SLOW: 0.1})
    _, full = sweep(tmp_path, FakeBackend(script(**noisy)), config(tmp_path, search="exhaustive"), name="ex.json")
    _, raced = sweep(tmp_path, FakeBackend(script(**noisy)))
    data = {(r.draft or ""): {(q.prompt_id, q.run): q.decode_tps for q in r.requests} for r in full.results}
    grid = Grid("fake", ["best", "good", "bad", "slow"], ["code-bst", "json-users"], lambda rng, runs: (data, {}))
    outcome = race(grid, data, 3, lambda n, prompts: RaceRules(n, prompts, 3, prompts, 0.02))
    rows = by_draft(raced)
    assert outcome.measured == {label: len(rows[label].requests) for label in grid.candidates}
    assert outcome.eliminated == {label for label in grid.candidates if rows[label].status == "eliminated"}
    assert outcome.loads == sum(rows[label].race["loads"] for label in grid.candidates)


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
    """Slow loads, quick requests: probes and second loads would cost more than the requests skipped."""
    _history(tmp_path, load_s=60.0, request_s=0.5)
    notes = []

    class Recorder(Reporter):
        def note(self, text):
            notes.append(text)

    backend = FakeBackend(script())
    code, results = sweep(tmp_path, backend, reporter=Recorder())
    assert code == EXIT_OK and not any(r.race for r in results.results)        # measured exhaustively
    assert len(launches(backend)) == 5                                          # one server per combination
    assert any(n.startswith("adaptive search: exhaustive ~") and "the race cannot save time here" in n
               for n in notes), notes


def test_the_race_starts_where_it_saves_time_and_dry_run_shows_both_plans(tmp_path):
    _history(tmp_path, load_s=1.0, request_s=30.0)
    target = tiny_gguf(tmp_path / "t.gguf")
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"name": "race", "hardware": "box", "targets": [{"label": "7B", "path": str(target)}],
                                "drafts": [{"label": n, "path": str(tiny_gguf(tmp_path / f"{n}.gguf"))}
                                           for n in ("a", "b", "c", "d")],
                                "settings": {"runs": 3, "max_tokens": 64, "prompts": ["code", "json"],
                                             "search": "adaptive"}}))
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
    # rows print in the order their servers start, out of the most the race may start
    assert [i for i, _, _ in started] == list(range(1, len(started) + 1))
    assert all(at_most and total == 1 + 2 * 4 for _, total, at_most in started)


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
    assert first["requests"] == 3 and first["low"] <= first["ratio"] <= first["high"]    # the probe's look
    rows = by_draft(results)
    assert rows["best"].race["looks"] == entries["best"]["looks"]                        # kept in the results file
    from draftbench.report import render_report
    page = render_report(results, cdn=True)
    assert '<section id="race">' in page and race["sentence"] in page.replace("&#x27;", "'")
    assert "after 3: +100.0%" in page
