"""The temperature axis (settings.temperature as a list) through the sweep, on the in-process fake backend: the plan,
what is refused with it, a verdict per temperature against the target alone at that temperature, the crossover and
probabilistic against greedy drafting, the output-distribution check, resume, the report and the export. The real
llama-server's side (the draft's sampling, the distribution check) is tests/test_temperature_llama.py."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from draftbench.analysis.verdict import analyze
from draftbench.common.errors import ConfigError
from draftbench.report import build_figures
from draftbench.results.file import load_results
from draftbench.share.export import export, results_table
from draftbench.sweep import EXIT_OK, Sweep, plan
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.console import Reporter

from fakes.inprocess import FakeBackend, Script

TARGET, DRAFT = "/m/target.gguf", "/m/small.gguf"
TEMPERATURES = [0, 0.7, 1.0]
GREEDY, PROBABILISTIC = "small sampling=greedy", "small sampling=probabilistic"


def config(tmp_path: Path, candidates=None, **settings):
    data = {"name": "unit", "hardware": "box", "backend": "llamacpp", "targets": [{"label": "7B", "path": TARGET}],
            "candidates": candidates if candidates is not None else
            [{"label": "small", "draft": {"label": "small", "path": DRAFT},
              "params": {"draft_sampling": ["greedy", "probabilistic"]}}],
            "settings": {"max_tokens": 64, "port": 0, "prompts": "builtin", "stages": 3,
                         "temperature": TEMPERATURES, **settings}}
    return validate_config(data, source=str(tmp_path / "c.json"), base_dir=str(tmp_path))


def script(**kw) -> Script:
    """The draft pays 1.3× at 0, less as the temperature rises (1.17× at 0.7, 0.91× at 1.0) when it drafts greedily;
    sampled probabilistically it keeps more: 1.29× at 0.7, 1.14× at 1.0."""
    return Script(**{"tps": {TARGET: 50.0}, "speedup": {DRAFT: 1.3},
                     "per_temperature": {DRAFT: {0.7: 0.9, 1.0: 0.7}},
                     "acceptance_at": {DRAFT: {0.0: 0.8, 0.7: 0.6, 1.0: 0.4}},
                     "probabilistic": {0.7: 1.1, 1.0: 1.25}, **kw})


def sweep(tmp_path: Path, backend: FakeBackend, cfg, name: str = "r.json") -> Path:
    path = tmp_path / name
    assert Sweep(cfg, path, None, reporter=Reporter(), backend=backend).run() == EXIT_OK
    return path


def test_temperatures_multiply_the_plan_and_grow_only_their_keys(tmp_path):
    combos = plan(config(tmp_path))
    assert [c.temperature for c in combos] == [t for t in (0.0, 0.7, 1.0) for _ in range(3)]
    assert combos[3].key[-1] == ("temperature", 0.7)
    assert combos[3].title(False) == "7B (baseline) [temperature 0.7]"
    # one number is no axis: the keys and titles stay as they were
    single = plan(config(tmp_path, temperature=0.7))
    assert all(c.temperature is None and len(c.key) == 4 for c in single)


@pytest.mark.parametrize("settings, where, message", [
    ({"context_tokens": [512]}, "$.settings.context_tokens", "is another axis; one axis at a time"),
    ({"concurrency": [1, 2]}, "$.settings.concurrency", "measures several streams at one temperature only"),
    ({"ceiling": True}, "$.settings.ceiling", "measures synthetic acceptance at one temperature only"),
    ({"temperature": [0, 0.7, 0.7]}, "$.settings.temperature", "lists 0.7 more than once"),
    ({"temperature": [0, -1]}, "$.settings.temperature[1]", "is -1.0; must be ≥ 0"),
    ({"temperature": []}, "$.settings.temperature", "is an empty list"),
    ({"temperature": [0, "hot"]}, "$.settings.temperature[1]", "must be a number, not str \"hot\""),
])
def test_what_cannot_go_with_the_axis_is_refused_before_anything_starts(tmp_path, settings, where, message):
    with pytest.raises(ConfigError) as err:
        config(tmp_path, **settings)
    assert f"{where}: {message}" in str(err.value)


def test_a_sweep_at_three_temperatures_gives_a_verdict_per_temperature_and_the_crossover(tmp_path):
    backend = FakeBackend(script())
    path = sweep(tmp_path, backend, config(tmp_path))
    data = json.loads(path.read_text())
    rows = data["results"]
    assert sorted({r["temperature"] for r in rows}) == TEMPERATURES and len(rows) == 9
    # every request at its row's temperature, against the target alone at that temperature
    assert {s.temperature for s in backend.servers if s.requests} == {0.0, 0.7, 1.0}
    for r in rows:
        assert r["speedup"] is not None or r["role"] == "baseline"
    by = {(r["draft"], r["temperature"]): r for r in rows}
    assert by[(GREEDY, 1.0)]["speedup"]["ratio"] == pytest.approx(0.91, abs=0.02)
    assert by[(PROBABILISTIC, 0.7)]["speedup"]["ratio"] == pytest.approx(1.29, abs=0.02)
    assert by[(GREEDY, 0.7)]["acceptance_rate"] == pytest.approx(0.6, abs=0.01)
    assert by[(PROBABILISTIC, 1.0)]["server"]["draft_sampling"] == "probabilistic"
    target = data["summary"]["targets"][0]
    axis = target["temperature"]
    assert axis["temperatures"] == TEMPERATURES
    assert data["summary"]["server_loads"] == len({q["session"] for r in rows for q in r["requests"]})
    assert [p["recommended_draft"] for p in axis["per_temperature"]][1:] == [PROBABILISTIC, PROBABILISTIC]
    assert axis["reach"] == {GREEDY: 0.7, PROBABILISTIC: 1.0}
    verdict = target["verdict"]
    assert verdict.startswith("7B, by temperature — At temperature 0: ")
    assert f"{GREEDY} pays up to 0.7: +30% at 0, +17% at 0.7" in verdict
    assert f"{PROBABILISTIC} pays at every temperature measured" in verdict
    assert "from 1.0 only " + PROBABILISTIC + " pays" in verdict
    assert (f"Probabilistic against greedy drafting ({PROBABILISTIC} against {GREEDY}): at 0.7, probabilistic beats "
            "greedy by +10% [") in verdict and "; at 1.0, probabilistic beats greedy by +25% [" in verdict
    assert [s["temperature"] for s in axis["sampling"] if s["shown"]] == [0.7, 1.0]
    # above 0 the verdict says the distribution was not checked (never implied)
    assert "output distribution: not checked (not asked for: settings.distribution_samples)" in verdict
    # the report draws speed-up and acceptance against temperature, per candidate
    figure = build_figures(load_results(path))["chart-temperature"]
    speed = [t for t in figure["data"] if t.get("yaxis") != "y2"]
    assert {t["name"] for t in speed} == {GREEDY, PROBABILISTIC}
    assert next(t["x"] for t in figure["data"] if t.get("yaxis") == "y2") == TEMPERATURES


def test_the_export_and_a_resume_know_the_axis(tmp_path):
    cfg = config(tmp_path)
    path = sweep(tmp_path, FakeBackend(script()), cfg)
    text = export(results_table(analyze(load_results(path)), str(path)), "csv")
    table = list(csv.DictReader(io.StringIO(text)))
    assert [r["temperature"] for r in table] == ["0.0"] * 3 + ["0.7"] * 3 + ["1.0"] * 3
    assert {r["draft_sampling"] for r in table} == {"", "greedy", "probabilistic"}
    again = FakeBackend(script())
    sweep(tmp_path, again, cfg)
    assert again.specs == []                                  # every temperature decided: nothing measured again
    # a temperature added to the list measures only it
    more = FakeBackend(script())
    sweep(tmp_path, more, config(tmp_path, temperature=[*TEMPERATURES, 1.3]))
    assert more.specs and {s.temperature for s in more.servers if s.requests} == {1.3}
    # one number made into a list is another sweep (its rows carry no temperature)
    single = tmp_path / "one.json"
    sweep(tmp_path, FakeBackend(script()), config(tmp_path, temperature=0.7), "one.json")
    with pytest.raises(Exception) as err:
        Sweep(config(tmp_path), single, None, reporter=Reporter(), backend=FakeBackend(script())).run()
    assert "settings.temperature 0.7 vs [0.0, 0.7, 1.0]" in str(err.value)


def test_the_output_distribution_check_runs_on_servers_of_its_own_above_0(tmp_path):
    backend = FakeBackend(script())
    path = sweep(tmp_path, backend, config(tmp_path, distribution_samples=8))
    rows = {(r["draft"], r["temperature"]): r for r in json.loads(path.read_text())["results"]}
    assert "output_distribution" not in rows[(GREEDY, 0.0)]
    found = rows[(PROBABILISTIC, 1.0)]["output_distribution"]
    assert found["checked"] and found["consistent"] and found["samples"] == 8 and found["prompts"] == 3
    assert found["drafted"] > 0 and found["reproducible"] is True
    # the check's repeats never become measured requests (a stateful method would learn from them)
    sessions = {q["session"] for r in rows.values() for q in r["requests"]}
    measured = [s for s in backend.servers if s.requests]
    assert len(measured) > len(sessions)
    verdict = json.loads(path.read_text())["summary"]["targets"][0]["verdict"]
    assert "output distribution: consistent with the target's (p = 1" in verdict


def test_the_ab_takes_a_list_of_temperatures_and_the_draft_sampling(tmp_path):
    from draftbench.backends.llamacpp.settings import LlamaCppSettings
    from draftbench.config.candidates import Candidate
    from draftbench.config.model_ref import ModelRef
    from draftbench.config.prompts import BUILTIN_PROMPTS
    from draftbench.config.settings import Settings
    from draftbench.measure.sequential import MeasureOptions
    from draftbench.sweep.ab import ABPlan, run_ab, screen

    settings = Settings(port=0, runs=2, max_tokens=64, temperature=TEMPERATURES, distribution_samples=8,
                        backend=LlamaCppSettings())
    candidate = Candidate("small", "small", draft=ModelRef("small", DRAFT), params=(("draft_sampling", "probabilistic"),))
    ab = ABPlan(ModelRef("7B", TARGET), candidate, settings, tuple(BUILTIN_PROMPTS[:3]),
                MeasureOptions(runs=2, max_tokens=64))
    backend = FakeBackend(script())
    results = run_ab(ab, backend, "llamacpp", tmp_path / "logs", Reporter())
    assert [(r.temperature, r.role.value) for r in results.results] == [
        (t, role) for t in (0.0, 0.7, 1.0) for role in ("baseline", "speculative")]
    spec = {r.temperature: r for r in results.results if r.draft}
    assert spec[1.0].speedup.ratio == pytest.approx(1.3 * 0.7 * 1.25, abs=0.02)
    assert spec[0.7].output_distribution["checked"] and spec[0.0].output_distribution is None
    text = screen(results, ab)
    assert text.count("A/B: 7B alone vs with small (draft-simple, probabilistic drafting)") == 3 and "temperature 0.7" in text
    assert ("distribution consistent with the target's (p = 1; 3 prompts × 8 answers a side; it drafted 960 tokens, "
            "384 accepted)") in " ".join(text.split())
    assert ("Across temperatures (each temperature's verdict its own 95% claim, not corrected across the 3): small "
            "pays at every temperature measured") in " ".join(text.split())


@pytest.mark.parametrize("args, message", [
    (["--url", "http://127.0.0.1:9", "--temperature", "0,0.7"], "--temperature takes one value with --url"),
    (["--target", "t.gguf", "--draft", "d.gguf", "--temperature", "0,0.7,0.7"], "lists a temperature more than once"),
    (["--target", "t.gguf", "--draft", "d.gguf", "--temperature", "0,hot"], "is not a number"),
    (["--target", "t.gguf", "--draft", "d.gguf", "--temperature", "0,7"], "--temperature 0,7 (value 2): is 7.0; must be ≤ 5"),
    (["--target", "t.gguf", "--draft", "d.gguf", "--temperature", "0.7", "--distribution-samples", "4"],
     "--distribution-samples 4: is 4; must be ≥ 8"),
    (["--target", "t.gguf", "--draft", "d.gguf", "--distribution-samples", "8"],
     "--distribution-samples checks the output distribution above temperature 0"),
    (["--target", "t.gguf", "--draft", "d.gguf", "--draft-sampling", "random"], "invalid choice: 'random'"),
])
def test_bench_temperature_lists_are_checked(args, message):
    from helpers import run_cli
    result = run_cli("bench.py", *args)
    assert result.returncode == 2 and message in result.stderr, result.stderr


def test_more_measures_only_the_temperatures_left_open(tmp_path):
    from draftbench.sweep.session import RunOptions
    cfg = config(tmp_path)
    path = sweep(tmp_path, FakeBackend(script(noise_at={0.0: 0.4})), cfg)
    stages = json.loads(path.read_text())["summary"]["targets"][0]["temperature"]["per_temperature"]
    assert ["unresolved" in s["verdict"] for s in stages] == [True, False, False]   # 0: noisy, left open
    more = FakeBackend(script(noise_at={0.0: 0.4}))
    assert Sweep(cfg, path, None, reporter=Reporter(), backend=more, options=RunOptions(more=1)).run() == EXIT_OK
    assert more.specs and {s.temperature for s in more.servers if s.requests} == {0.0}


class Notes(Reporter):
    def __init__(self):
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)


def test_more_keeps_the_distribution_check_a_row_already_has(tmp_path):
    # the check samples the candidate's own servers after the stages: a stage more changes nothing it tested, so the
    # row keeps it and no check server starts again
    from draftbench.sweep.session import RunOptions
    cfg = config(tmp_path, distribution_samples=8)
    path = sweep(tmp_path, FakeBackend(script(noise={DRAFT: 0.4})), cfg)      # noisy: every temperature unresolved
    before = {(r["draft"], r["temperature"]): r.get("output_distribution") for r in json.loads(path.read_text())["results"]}
    assert before[(GREEDY, 0.7)]["checked"]
    more, said = FakeBackend(script(noise={DRAFT: 0.4})), Notes()
    assert Sweep(cfg, path, None, reporter=said, backend=more, options=RunOptions(more=1)).run() == EXIT_OK
    assert 0.7 in {s.temperature for s in more.servers if s.requests}       # 0.7 measured a stage more …
    assert not [n for n in said.notes if "output-distribution check" in n]  # … and its check not made again
    after = {(r["draft"], r["temperature"]): r.get("output_distribution") for r in json.loads(path.read_text())["results"]}
    assert after == before


def test_run_sweep_decides_and_keys_each_temperature_on_its_own(tmp_path):
    from draftbench.analysis.summary import verdicts_of
    from draftbench.sweep.run import run_sweep
    from draftbench.sweep.stages import Ending
    outcome = run_sweep(config(tmp_path), FakeBackend(script()), logs_dir=tmp_path / "logs")
    keys = ["7B at temperature 0", "7B at temperature 0.7", "7B at temperature 1.0"]
    assert list(outcome.verdicts) == keys and list(outcome.endings) == keys
    assert all(ending in (Ending.DECIDED, Ending.STAGES_DONE) for ending in outcome.endings.values())
    # each the decision on that temperature's rows alone, as the analysis says it per temperature
    axis = verdicts_of(outcome.results)[0].temperature
    assert axis is not None and [outcome.verdicts[k] for k in keys] == [p.stages for p in axis.per_temperature]
    # an exact tie at 0 (greedy and probabilistic draft alike there): either is within 2% of the best, so one is named
    assert outcome.verdicts["7B at temperature 0"].pick in (GREEDY, PROBABILISTIC)
    assert [outcome.verdicts[k].pick for k in keys[1:]] == [PROBABILISTIC, PROBABILISTIC]


def test_compare_pairs_rows_by_temperature(tmp_path):
    from draftbench.share.compare import compare, load_compared
    first = sweep(tmp_path, FakeBackend(script()), config(tmp_path), "a.json")
    second = sweep(tmp_path, FakeBackend(script(tps={TARGET: 40.0})), config(tmp_path), "b.json")
    comparison = compare(load_compared([str(first), str(second)]))
    assert len(comparison.rows) == 9 and not any(comparison.only_in)     # each temperature its own combination
    titles = [row.title for row in comparison.rows]
    assert "7B (baseline) [temperature 0.7]" in titles and f"7B + {PROBABILISTIC} [temperature 1.0]" in titles
    # each file's own verdict, per temperature (not the coolest one's alone); the baselines named with theirs
    from draftbench.share.compare.best import best_per_target
    from draftbench.share.compare.text import short_name
    best = best_per_target(comparison.files)
    assert [(b.letter, b.target) for b in best] == [(f, f"7B at temperature {t}") for f in "AB" for t in ("0", "0.7", "1.0")]
    assert best[2].best == PROBABILISTIC and best[2].baseline_tps == pytest.approx(50, rel=0.05)
    assert best[2].acceptance_rate is not None
    assert short_name(next(r.match for r in comparison.rows if r.title == "7B (baseline) [temperature 0.7]")) == \
        "baseline [temperature 0.7]"


def test_the_temperature_chart_draws_no_point_for_a_row_that_is_no_speed_up(tmp_path):
    # a draft the server silently drops is measured at every temperature, but speculation never ran: its rows are no
    # speed-up, so the chart draws no speed-up point for it (as every other chart draws none)
    dropped = "/m/dropped.gguf"
    candidates = [{"label": "small", "draft": {"label": "small", "path": DRAFT}},
                  {"label": "dropped", "draft": {"label": "dropped", "path": dropped}}]
    path = sweep(tmp_path, FakeBackend(script(inactive={dropped})), config(tmp_path, candidates, stages=1))
    rows = {(r["draft"], r["temperature"]): r for r in json.loads(path.read_text())["results"]}
    assert rows[("dropped", 0.7)]["speedup"] is not None and not rows[("dropped", 0.7)]["speculation_active"]
    figure = build_figures(load_results(path))["chart-temperature"]
    speed = {t["name"]: t["x"] for t in figure["data"] if t.get("yaxis") != "y2"}
    assert speed == {"small": TEMPERATURES}
