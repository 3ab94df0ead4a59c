"""Concurrency levels without processes: planning, measuring N streams, counters, the crossover verdict and
the report, with the in-process fake backend (real llama-server levels are in test_measure_concurrent_llama.py)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from draftbench.analysis.concurrency import in_flight, level_summary, levels, percentiles
from draftbench.analysis.summary import verdicts_of
from draftbench.backends.base import Server
from draftbench.backends.http.client import StreamedResponse
from draftbench.common.errors import ConfigError, ResultsFileError
from draftbench.config.prompts import BUILTIN_PROMPTS
from draftbench.config.settings import Settings
from draftbench.measure.concurrent import describe_level, level_fields, run_pool, run_streams
from draftbench.measure.sequential import MeasurementFailed, MeasureOptions
from draftbench.report import CHARTS, build_figures, render_report, write_report
from draftbench.results.file import ResultsFile, Row, load_results, save_results
from draftbench.results.findings import Code
from draftbench.sweep import EXIT_OK, Sweep, plan
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.console import Reporter

from fakes.inprocess import FakeBackend, Script
from test_report import browser, open_in_browser  # noqa: F401  (browser is a fixture)

TARGET, GOOD, BAD = "/m/target.gguf", "/m/good.gguf", "/m/bad.gguf"
LEVEL_CHARTS = {"chart-concurrency-speedup", "chart-concurrency-throughput", "chart-concurrency-latency"}


def config(tmp_path: Path, backend="llamacpp", drafts=(("good", GOOD), ("bad", BAD)), **settings):
    data = {"name": "unit", "hardware": "box", "backend": backend,
            "targets": [{"label": "7B", "path": TARGET}],
            "drafts": [{"label": label, "path": path} for label, path in drafts],
            "settings": {"runs": 2, "max_tokens": 64, "prompts": ["code", "json"], "port": 0, **settings}}
    return validate_config(data, source=str(tmp_path / "c.json"), base_dir=str(tmp_path))


def crossover_script(**kw) -> Script:
    """good is 1.5× faster alone, still faster at 2 streams, 20% slower at 4; bad is always slower."""
    base = dict(tps={TARGET: 50.0}, speedup={GOOD: 1.5, BAD: 0.6}, acceptance={GOOD: 0.8, BAD: 0.02},
                per_stream={TARGET: {2: 0.8, 4: 0.6}, GOOD: {2: 0.7, 4: 0.32}, BAD: {2: 0.8, 4: 0.6}})
    base.update(kw)
    return Script(**base)


def sweep(tmp_path, backend, cfg) -> Path:
    results = tmp_path / "r.json"
    assert Sweep(cfg, results, None, reporter=Reporter(), backend=backend).run() == EXIT_OK
    return results


# --------------------------------------------------------------------------- settings and planning

def test_levels_and_their_validation(tmp_path):
    assert levels(Settings()) == (1,) and levels(Settings(concurrency=4)) == (4,)
    assert levels(Settings(concurrency=[4, 1, 2])) == (1, 2, 4)
    assert config(tmp_path).settings.concurrency == [1]
    with pytest.raises(ConfigError) as err:
        config(tmp_path, concurrency=[1, 0, "2", 2, 2])
    text = str(err.value)
    assert "settings.concurrency[1]: is 0; must be ≥ 1" in text and "settings.concurrency[2]: must be an integer" in text
    assert "lists 2 more than once" in text


def test_the_adaptive_race_refuses_several_levels(tmp_path):
    with pytest.raises(ConfigError) as err:
        config(tmp_path, concurrency=[1, 2], search="adaptive")
    assert "settings.concurrency: is [1, 2], but search \"adaptive\" races candidates on one stream only" \
        in str(err.value) and "use search \"exhaustive\"" in str(err.value)
    assert config(tmp_path, concurrency=[1], search="adaptive").settings.search == "adaptive"


def test_one_stream_plans_exactly_as_before_and_levels_repeat_it_per_target(tmp_path):
    one = plan(config(tmp_path))
    assert plan(config(tmp_path, concurrency=[1])) == one and all(c.concurrency == 1 for c in one)
    assert one[0].key == ("baseline", "7B", None, None)           # old results files resume
    combos = plan(config(tmp_path, concurrency=[4, 1, 2], control_baseline=True, draft_alone=True))
    assert [c.title(False) for c in combos] == [
        "7B (baseline)", "7B + good", "7B + bad", "7B (baseline again, drift check)",
        "7B (baseline) [2 streams]", "7B + good [2 streams]", "7B + bad [2 streams]",
        "7B (baseline again, drift check) [2 streams]",
        "7B (baseline) [4 streams]", "7B + good [4 streams]", "7B + bad [4 streams]",
        "7B (baseline again, drift check) [4 streams]",
        "good (draft alone, for its cost ratio)", "bad (draft alone, for its cost ratio)"]
    assert combos[5].key == ("speculative", "7B", "good", None, 2)
    assert len({c.key for c in combos}) == len(combos)


def test_llama_server_gets_n_slots_of_ctx_size_each():
    from draftbench.backends.base import LaunchSpec
    from draftbench.backends.llamacpp.command import build_command
    from draftbench.common.errors import ServerError
    caps = {"flags": ["-m", "-md", "-np", "--parallel", "--metrics", "--spec-type"], "version": "x"}
    one = build_command("llama-server", caps, LaunchSpec(target="/m/t.gguf", ctx_size=2048))
    four = build_command("llama-server", caps, LaunchSpec(target="/m/t.gguf", ctx_size=2048, concurrency=4))
    assert (one[one.index("-np") + 1], one[one.index("-c") + 1]) == ("1", "2048")       # as before
    assert (four[four.index("-np") + 1], four[four.index("-c") + 1]) == ("4", "8192")
    with pytest.raises(ServerError, match="no -np/--parallel"):
        build_command("llama-server", {"flags": ["-m"], "version": "x"},
                      LaunchSpec(target="/m/t.gguf", concurrency=2))


def test_lm_studio_refuses_concurrency_and_vllm_gets_max_num_seqs(tmp_path):
    with pytest.raises(ConfigError, match=r"settings\.concurrency: LM Studio .* not supported"):
        config(tmp_path, backend="lmstudio", drafts=(), concurrency=[1, 2])
    assert config(tmp_path, backend="lmstudio", drafts=(), concurrency=[1]).settings.concurrency == [1]
    from draftbench.backends.base import LaunchSpec
    from draftbench.backends.vllm.backend import build_command
    settings = config(tmp_path, backend="vllm", drafts=()).settings
    one = build_command("vllm", LaunchSpec(target="org/m", settings=settings))
    four = build_command("vllm", LaunchSpec(target="org/m", settings=settings, concurrency=4))
    assert "--max-num-seqs" not in one and four[four.index("--max-num-seqs") + 1] == "4"


# --------------------------------------------------------------------------- measuring N streams

class SlowServer(Server):
    """Answers after a real delay, so streams overlap in wall-clock time."""

    def __init__(self, delay_s=0.05, fail_on=None):
        super().__init__("http://slow")
        self.delay_s, self.fail_on, self.threads, self.sessions = delay_s, fail_on, set(), set()

    def send(self, body, *, request_timeout_s, stall_timeout_s):
        self.threads.add(threading.get_ident())
        self.sessions.add(id(self.http()))
        start = time.perf_counter()
        if body["seed"] == self.fail_on:
            from draftbench.common.errors import RequestError
            raise RequestError("boom")
        time.sleep(self.delay_s)
        end = time.perf_counter()
        return StreamedResponse(t_start=start, t_first=start + 0.001, t_last=end, t_end=end, text="x",
                                usage={"completion_tokens": 10, "prompt_tokens": 3}, finish_reason="length")


def test_streams_really_overlap_each_with_its_own_session_in_schedule_order():
    server = SlowServer()
    prompts = list(BUILTIN_PROMPTS[:3])
    result = run_streams(server, prompts, MeasureOptions(runs=2, warmup=1, max_tokens=16), streams=3)
    assert [(r.prompt_id, r.run) for r in result.records] == [(p.id, run) for run in range(2) for p in prompts]
    load = result.load
    assert load["streams"] == 3 and load["requests"] == 6 and load["in_flight_max"] == 3
    # one session per stream thread (warm-up and measurement each start their streams), never the server's own
    assert len(server.sessions) == 6 and id(server.session) not in server.sessions
    spans = [(t["start_s"], t["end_s"]) for t in load["timeline"]]
    assert any(a[0] < b[1] and b[0] < a[1] for a in spans for b in spans if a is not b)   # ranges intersect
    assert load["aggregate_tps"] == pytest.approx(60 / load["window_s"], rel=1e-3)
    assert {t["stream"] for t in load["timeline"]} == {0, 1, 2}
    server.stop()


def test_a_failing_stream_stops_the_level_and_keeps_what_finished():
    from draftbench.measure.sequential import request_seed
    server = SlowServer(delay_s=0.01, fail_on=request_seed(42, 1, 0))     # the first request of run 1
    with pytest.raises(MeasurementFailed) as failure:
        run_streams(server, list(BUILTIN_PROMPTS[:2]), MeasureOptions(runs=3, warmup=0), streams=2)
    assert "boom" in str(failure.value.error) and all(r.run == 0 or r.run == 1 for r in failure.value.records)
    assert len(failure.value.records) < 6


def test_run_pool_raises_a_bug_in_a_worker_instead_of_losing_it():
    def broken(stream):
        raise KeyError("bug")
    with pytest.raises(KeyError):
        run_pool([broken], 2)


def test_percentiles_and_in_flight():
    assert percentiles([]) is None
    p = percentiles(range(1, 101))
    assert (p["n"], p["p50"], p["p90"], p["p99"]) == (100, 50, 90, 99)
    assert percentiles([3.0, 1.0])["p99"] == 3.0
    assert in_flight([(0, 1), (1, 2)]) == (1, 1.0)                  # back to back: never two at once
    assert in_flight([(0, 2), (1, 3), (1.5, 2.5)])[0] == 3


def _record(**kw):
    from draftbench.results.file import RequestRecord
    base = dict(prompt_id="p", category="code", run=0, ttft_s=0.1, total_s=1.0, decode_tps=10.0,
                prompt_tokens=5, completion_tokens=10, draft_n=8, draft_n_accepted=6)
    base.update(kw)
    return RequestRecord(**base)


def test_per_request_counters_are_checked_against_the_servers_totals():
    from draftbench.measure.concurrent import Done
    done = [Done(i, i, _record(run=i), float(i), i + 1.5) for i in range(2)]
    before = {"prompt_tokens": 100, "output_tokens": 50, "draft_tokens": 40, "accepted_tokens": 30,
              "verify_steps": 10, "decode_calls": 7, "busy_slot_decodes": 7.0}
    after = {"prompt_tokens": 110, "output_tokens": 70, "draft_tokens": 56, "accepted_tokens": 42,
             "verify_steps": 16, "decode_calls": 17, "busy_slot_decodes": 24.0}
    load = describe_level(done, 2, before, after)
    side = load["server"]
    assert side["consistent"] is True and side["busy_slots_per_decode"] == 1.7
    assert side["checks"]["draft_tokens"] == {"server": 16, "requests": 16, "match": True}
    fields = level_fields({"draft_n": 16, "draft_n_accepted": 12, "verify_steps": None, "warnings": ()}, load,
                          speculative=True)
    assert fields["verify_steps"] == 6 and fields["mean_accepted_len"] == 3.0 and fields["warnings"] == ()
    # another client's tokens: the totals are not used and the row says so
    bad = describe_level(done, 2, before, dict(after, output_tokens=99))
    fields = level_fields({"draft_n": 16, "draft_n_accepted": 12, "verify_steps": None, "warnings": ()}, bad,
                          speculative=True)
    assert fields["verify_steps"] is None and [w.code for w in fields["warnings"]] == [Code.COUNTERS_DISAGREE]
    # a server whose responses carry no counters (vLLM without per-request metrics): the level's totals
    silent = [Done(i, i, _record(run=i, draft_n=None, draft_n_accepted=None), float(i), i + 1.5) for i in range(2)]
    fields = level_fields({"draft_n": None, "draft_n_accepted": None, "verify_steps": None, "warnings": ()},
                          describe_level(silent, 2, before, after), speculative=True)
    assert (fields["draft_n"], fields["draft_n_accepted"], fields["acceptance_rate"]) == (16, 12, 0.75)
    # ... but not when those totals disagree with what the requests say (another client on the server)
    polluted = describe_level(silent, 2, before, dict(after, output_tokens=99))
    fields = level_fields({"draft_n": None, "draft_n_accepted": None, "verify_steps": None, "warnings": ()},
                          polluted, speculative=True)
    assert fields["draft_n"] is None and fields.get("acceptance_rate") is None and fields["verify_steps"] is None
    # a counter that went backwards (a restarted server) or a broken one is left out, never a negative total
    restarted = describe_level(done, 2, before, dict(after, draft_tokens=3, accepted_tokens=2))
    assert "draft_tokens" not in restarted["server"]["window"] and "draft_tokens" not in restarted["server"]["checks"]
    broken = describe_level(silent, 2, before, dict(after, accepted_tokens=99))
    fields = level_fields({"draft_n": None, "draft_n_accepted": None, "warnings": ()}, broken, speculative=True)
    assert fields["draft_n"] is None and fields.get("acceptance_rate") is None
    # a level that never had its streams in flight
    fields = level_fields({"warnings": ()}, describe_level(done[:1], 4, None, None), speculative=False)
    assert [w.code for w in fields["warnings"]] == [Code.STREAMS_NOT_REACHED]


# --------------------------------------------------------------------------- sweeps and the crossover

def test_a_concurrency_sweep_finds_the_crossover_and_keeps_one_stream_results_as_before(tmp_path):
    # upstream's order, so that the levels' servers start as listed below
    one_stream = json.loads(sweep(tmp_path / "a", FakeBackend(crossover_script()),
                                  config(tmp_path, design="sequential")).read_text())
    backend = FakeBackend(crossover_script())
    path = sweep(tmp_path / "b", backend, config(tmp_path, concurrency=[1, 2, 4], design="sequential"))
    data = json.loads(path.read_text())
    # one stream: the stages (a baseline server, then each candidate's); then the other levels, a server each
    levels = [s.concurrency for s in backend.specs]
    assert levels[-6:] == [2, 2, 2, 4, 4, 4] and set(levels[:-6]) == {1}
    by_key = {(r["role"], r["draft"], r["concurrency"]): r for r in data["results"]}
    assert len(by_key) == 9
    # one-stream rows: as a one-stream sweep writes them, apart from the new fields
    for old in one_stream["results"]:
        new = by_key[(old["role"], old["draft"], 1)]
        assert new["concurrency"] == 1 and new["load"] is None
        assert new["requests"] == old["requests"] and new["acceptance_rate"] == old["acceptance_rate"]
    # every level is compared with the baseline at the same level, pair by pair
    good2 = by_key[("speculative", "good", 2)]
    assert good2["load"]["streams"] == 2 and good2["speedup"]["n_pairs"] == 4
    assert good2["speedup"]["ratio"] == pytest.approx(1.5 * 0.7 / 0.8, rel=0.01)
    assert by_key[("speculative", "good", 4)]["speedup"]["ratio"] == pytest.approx(1.5 * 0.32 / 0.6, rel=0.01)
    assert by_key[("speculative", "good", 2)]["theory"] is None            # the theory models one stream
    verdict = data["summary"]["targets"][0]
    assert verdict["verdict"].startswith(one_stream["summary"]["targets"][0]["verdict"])
    assert verdict["crossover"]["max_streams"] == 2 and verdict["crossover"]["candidate"] == "good"
    assert "use good for up to 2 concurrent streams" in verdict["verdict"]
    assert "above that it costs 20% of throughput" in verdict["verdict"]
    assert [lv["outcome"] for lv in verdict["crossover"]["per_level"]] == ["faster", "faster", "slower"]


def test_crossover_sentences_for_every_shape(tmp_path):
    always = crossover_script(per_stream={})
    data = json.loads(sweep(tmp_path / "a", FakeBackend(always), config(tmp_path, concurrency=[1, 2])).read_text())
    assert "stays significantly faster up to 2 concurrent streams, the most measured" in \
        data["summary"]["targets"][0]["verdict"]
    never = crossover_script(speedup={GOOD: 0.7, BAD: 0.6}, per_stream={})
    data = json.loads(sweep(tmp_path / "b", FakeBackend(never), config(tmp_path, concurrency=[1, 2])).read_text())
    assert "no candidate is significantly faster than the target alone at any level" in \
        data["summary"]["targets"][0]["verdict"]
    assert data["summary"]["targets"][0]["crossover"]["candidate"] is None


def test_crossover_when_it_pays_only_under_load_or_a_level_failed(tmp_path):
    from dataclasses import replace

    from draftbench.analysis.verdict import analyze
    late = crossover_script(speedup={GOOD: 0.9, BAD: 0.6}, per_stream={TARGET: {2: 0.5}, GOOD: {2: 0.7}})
    data = json.loads(sweep(tmp_path / "a", FakeBackend(late), config(tmp_path, concurrency=[1, 2])).read_text())
    entry = data["summary"]["targets"][0]
    assert entry["recommended_draft"] is None and entry["crossover"]["candidate"] == "good"
    assert "good is significantly faster only at 2 streams, not from 1 up" in entry["verdict"]
    results = load_results(sweep(tmp_path / "b", FakeBackend(crossover_script()), config(tmp_path, concurrency=[1, 2, 4])))
    broken = tuple(replace(r, status="error", reason="llama-server crashed (signal 9)", speedup=None)
                   if (r.draft, r.concurrency) == ("good", 4) else r for r in results.results)
    entry = verdicts_of(analyze(replace(results, results=broken)))[0]
    assert entry.crossover.max_streams == 2
    assert "at 4 streams it has no valid measurement (llama-server crashed (signal 9))" in entry.verdict


def test_resuming_adds_levels_to_an_older_one_stream_file(tmp_path):
    path = sweep(tmp_path, FakeBackend(crossover_script()), config(tmp_path))
    old = load_results(path)
    # what a file from before concurrency existed looks like: no concurrency keys anywhere
    raw = old.to_dict()
    for row in raw["results"]:
        del row["concurrency"], row["load"]
    del raw["config"]["measurement"]["concurrency"], raw["settings"]["concurrency"]
    path.write_text(json.dumps(raw))
    backend = FakeBackend(crossover_script())
    sweep(tmp_path, backend, config(tmp_path, concurrency=[1, 2]))
    assert [s.concurrency for s in backend.specs] == [2, 2, 2]          # the one-stream rows were kept
    rows = load_results(path).results
    assert [(r.role, r.concurrency) for r in rows][:3] == [("baseline", 1), ("speculative", 1), ("speculative", 1)]
    assert len(rows) == 6


def test_row_concurrency_is_validated_when_read():
    assert Row.from_dict({"target": "t"}).concurrency == 1
    with pytest.raises(ValueError, match="concurrency"):
        Row.from_dict({"target": "t", "concurrency": 0})


@pytest.mark.parametrize("row, where", [
    ({"concurrency": "2"}, "$.results[0].concurrency must be an integer"),
    ({"concurrency": None}, "$.results[0].concurrency must be an integer of at least 1, not null"),
    ({"concurrency": 0}, "$.results[0].concurrency must be an integer of at least 1, not integer 0"),
    ({"concurrency": 2, "load": {"aggregate_tps": "fast"}}, "$.results[0].load.aggregate_tps must be a finite"),
    ({"concurrency": 2, "load": {"ttft_s": {"p50": [1]}}}, "$.results[0].load.ttft_s.p50 must be a finite"),
    ({"concurrency": 2, "load": {"server": {"checks": {"output_tokens": {"match": "yes"}}}}},
     "$.results[0].load.server.checks.output_tokens.match must be true or false"),
    ({"concurrency": 2, "load": {"timeline": [{"start_s": "soon"}]}}, "$.results[0].load.timeline[0].start_s"),
])
def test_a_hand_edited_level_is_refused_naming_the_value(tmp_path, row, where):
    """Row.load is declared with the row (results.row): a bad value is one error naming where, never a traceback in
    the report or the crossover, and the file is left untouched."""
    path = tmp_path / "edited.json"
    text = json.dumps({"schema_version": 2, "tool": "draftbench", "results": [
        {"target": "7B", "role": "baseline", "status": "ok", "mean_tps": 10.0, **row}]})
    path.write_text(text)
    with pytest.raises(ResultsFileError) as err:
        load_results(path)
    assert where in str(err.value) and path.read_text() == text


# --------------------------------------------------------------------------- the report

def test_one_stream_pages_have_no_concurrency_charts(tmp_path):
    path = sweep(tmp_path, FakeBackend(crossover_script()), config(tmp_path))
    figures = build_figures(load_results(path))
    assert not LEVEL_CHARTS & set(figures)
    context = {c.chart_id for c in CHARTS if c.chart_id.startswith(("chart-context-", "chart-temperature"))}  # other axes
    assert set(figures) == {c.chart_id for c in CHARTS} - LEVEL_CHARTS - context - {"chart-params", "chart-ceiling"}


def test_the_report_carries_the_concurrency_dimension(tmp_path):
    results = load_results(sweep(tmp_path, FakeBackend(crossover_script()), config(tmp_path, concurrency=[1, 2, 4])))
    figures = build_figures(results)
    assert set(figures) >= LEVEL_CHARTS
    lines = [t for t in figures["chart-concurrency-speedup"]["data"] if t.get("mode") == "lines+markers"]
    assert [t["name"] for t in lines] == ["good", "bad"] and lines[0]["x"] == [1, 2, 4]
    assert lines[0]["y"][2] < 0 < lines[0]["y"][1]                         # the crossover, drawn
    bands = [t for t in figures["chart-concurrency-speedup"]["data"] if t.get("fill") == "toself"]
    assert len(bands) == 2
    throughput = figures["chart-concurrency-throughput"]["data"]
    assert throughput[0]["name"].startswith("baseline") and len(throughput[0]["y"]) == 3
    one = next(r for r in results.results if r.role == "baseline" and r.concurrency == 1)
    assert throughput[0]["y"][0] == pytest.approx(level_summary(one)["aggregate_tps"], rel=1e-3)
    latency = figures["chart-concurrency-latency"]["data"]
    # one legend for both panels: it names the series and what the marks are, not one panel's measure
    assert {t["name"] for t in latency} >= {"baseline (target alone) (p50, whisker to p99)", "good (p50, whisker to p99)"}
    page = render_report(results)
    assert 'id="chart-concurrency-speedup-section"' in page and "use good for up to 2 concurrent streams" in page
    # the single-stream charts still show one stream: the heatmap has one cell per draft
    assert figures["chart-heatmap"]["data"][0]["y"] == ["good", "bad"]


def test_an_upstream_file_still_renders(tmp_path):
    results = ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="f", settings={},
                          schema_version=None, results=(Row(target="T 7B", mean_tps=10.0),
                                                        Row(target="T 7B", draft="D", role="speculative",
                                                            mean_tps=12.0)))
    save_results(results, tmp_path / "u.json")
    assert "chart-concurrency" not in render_report(load_results(tmp_path / "u.json"))


@pytest.mark.browser
def test_the_concurrency_charts_render_offline_in_chromium(browser, tmp_path):  # noqa: F811
    results = load_results(sweep(tmp_path, FakeBackend(crossover_script()), config(tmp_path, concurrency=[1, 2, 4])))
    info = open_in_browser(browser, write_report(results, tmp_path / "levels.html"), screenshot="concurrency")
    assert info["errors"] == [] and info["log"] == [], (info["errors"], info["log"])
    built = build_figures(results)
    for div_id in LEVEL_CHARTS:
        chart = info["charts"][div_id]
        assert chart is not None and chart["drawn"], (div_id, chart)
        assert chart["traces"] == chart["full"] == len(built[div_id]["data"]), (div_id, chart)
    assert "crossover: ≤ 2" in info["svgText"]


def test_bench_refuses_bad_concurrency_before_measuring():
    from helpers import run_cli
    proc = run_cli("bench.py", "--url", "http://127.0.0.1:9", "--concurrency", "0")
    assert proc.returncode == 2 and "Error: --concurrency must be at least 1 (got 0)" in proc.stderr
    proc = run_cli("bench.py", "--url", "http://127.0.0.1:9", "--backend", "lmstudio", "--concurrency", "2")
    assert proc.returncode == 2 and "--concurrency is not supported with lmstudio" in proc.stderr
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- comparing and exporting

def test_comparisons_and_exports_keep_the_levels_apart(tmp_path):
    """Two files with levels 1, 2 and 4: every level of a combination is its own comparison row (never
    matched with another level's), and exports name the level of each row."""
    from draftbench.share.compare import compare, load_compared, match_key
    from draftbench.share.export import export
    from draftbench.share.export.table import results_table
    paths = []
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        paths.append(str(sweep(folder, FakeBackend(crossover_script()), config(folder, concurrency=[1, 2, 4]))))
    first = load_results(paths[0])
    assert len({match_key(r) for r in first.results}) == len(first.results) == 9
    comp = compare(load_compared(paths))
    titles = [r.title for r in comp.rows]
    assert len(titles) == 9 and "7B + good [4 streams]" in titles and "7B + good" in titles
    assert all(len(r.match.present) == 2 for r in comp.rows)               # every level paired with itself
    text = export(results_table(first, paths[0]), "csv")
    assert "7B + good [2 streams]" in text and "7B (baseline) [4 streams]" in text
