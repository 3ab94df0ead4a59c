"""Estimated durations (--dry-run and the console ETA) from earlier results, baselines or model sizes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from draftbench.results.file import RequestRecord, ResultsFile, Row, save_results
from draftbench.sweep import Sweep, plan
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.console import Reporter
from draftbench.sweep.estimate import Estimator, estimate_of, total_s
from draftbench.sweep.probe import probe_targets

from fakes.inprocess import FakeBackend, Script
from helpers import llama_server_pids, run_cli, tiny_gguf


def config(tmp_path: Path, target: str, **settings):
    data = {"name": "est", "hardware": "box", "backend": "llamacpp", "targets": [{"label": "7B", "path": target}],
            "drafts": [{"label": "good", "path": "/m/good.gguf"}, {"label": "new", "path": "/m/new.gguf"}],
            "settings": {"runs": 2, "max_tokens": 100, "prompts": ["code", "json"], "warmup": 1, **settings}}
    return validate_config(data, source=str(tmp_path / "c.json"), base_dir=str(tmp_path))


def test_measured_rows_then_the_baseline_then_the_model_size(tmp_path):
    target = tmp_path / "t.gguf"
    target.write_bytes(b"\0" * 5_000_000)
    cfg = config(tmp_path, str(target))
    earlier = ResultsFile(name="old", hardware="box", backend="llamacpp", model_family="", settings={}, results=(
        Row(target="7B", role="baseline", mean_total_time=2.0, load_time_s=3.0, mean_tps=50.0),
        Row(target="7B", draft="good", role="speculative", mean_total_time=1.0, load_time_s=4.0, mean_tps=100.0)))
    est = Estimator(cfg, 2, (earlier,))
    base, good, new = (estimate_of(est, c) for c in plan(cfg))
    assert base.source == "measured" and base.seconds == pytest.approx(3.0 + 1.0 + 2.0 * 0.64 + 4 * 2.0)
    assert good.source == "measured" and good.seconds == pytest.approx(4.0 + 1.0 + 1.0 * 0.64 + 4 * 1.0)
    # from the baseline, at the speed this target's measured candidates ran: half its time per request
    assert new.source == "baseline" and new.seconds == pytest.approx(3.0 + 1.0 + 0.5 * (2.0 * 0.64 + 4 * 2.0))
    fresh = Estimator(cfg, 2)
    assert {estimate_of(fresh, c).source for c in plan(cfg)} == {"model size"}
    assert total_s(fresh, plan(cfg)) > 0
    absent = config(tmp_path, str(tmp_path / "absent.gguf"))
    assert total_s(Estimator(absent, 2), plan(absent)) is None


def tiny_config(tmp_path: Path) -> Path:
    """A config of one tiny GGUF as target and draft, on hardware "box"."""
    target = tiny_gguf(tmp_path / "t.gguf", 1000)
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"name": "est", "hardware": "box", "targets": [{"label": "7B", "path": str(target)}],
                                "drafts": [{"label": "good", "path": str(target)}],
                                "settings": {"runs": 1, "prompts": ["code"]}}))
    return path


def test_dry_run_prints_durations_from_an_earlier_file_of_the_same_hardware(tmp_path):
    path = tiny_config(tmp_path)
    results = tmp_path / "results" / "old.json"
    results.parent.mkdir()
    save_results(ResultsFile(name="old", hardware="box", backend="llamacpp", model_family="", settings={}, results=(
        Row(target="7B", role="baseline", mean_total_time=30.0, load_time_s=10.0),)), results)
    proc = run_cli("sweep.py", "--config", str(path), "--results", str(results.parent / "new.json"), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    # 10 s load + 1 s server + a 64-token warm-up (30 s × 64/512) + one 30 s request
    assert "[1/2] 7B (baseline)  ~45s (measured before)" in proc.stdout
    assert "[2/2] 7B + good  ~45s (from its target's baseline)" in proc.stdout
    # every planned stage (one prompt: measured whole at each of the 6) with a baseline and a candidate server
    assert "Estimated duration: at most ~8m57s (less where a target is decided early)" in proc.stdout


def test_the_console_eta_comes_from_the_same_model(tmp_path):
    etas = []

    class Recorder(Reporter):
        def progress(self, elapsed_s, remaining_s, at_most=False):
            etas.append((remaining_s, at_most))

    cfg = config(tmp_path, "/m/target.gguf")
    backend = FakeBackend(Script(tps={"/m/target.gguf": 50.0}, speedup={"/m/good.gguf": 1.5, "/m/new.gguf": 1.2}))
    Sweep(cfg, tmp_path / "r.json", None, reporter=Recorder(), backend=backend).run()
    # after every stage: at most the stages still planned at the pace so far (the fake's requests are quick)
    assert etas and all(at_most and left is not None and left >= 0 for left, at_most in etas)


def _requests(n: int, *, tokens: int, finish: str, ttft_s: float = 0.5, tps: float = 10.0) -> tuple:
    return tuple(RequestRecord(prompt_id=f"p{i}", category="code", run=0, ttft_s=ttft_s, decode_tps=tps,
                               completion_tokens=tokens, finish_reason=finish) for i in range(n))


def test_requests_are_rebuilt_at_this_configs_max_tokens(tmp_path):
    """A request cut at the old limit runs to the new one; one that stopped by itself stops there again."""
    earlier = ResultsFile(name="old", hardware="box", backend="llamacpp", model_family="",
                          settings={"max_tokens": 50}, results=(
        Row(target="7B", role="baseline", mean_total_time=5.4, load_time_s=0.0, requests=_requests(4, tokens=50,
                                                                                                    finish="length")),
        Row(target="7B", draft="good", role="speculative", mean_total_time=3.4, load_time_s=0.0,
            requests=_requests(4, tokens=30, finish="stop"))))
    for max_tokens, base_request_s, good_request_s in ((100, 0.5 + 99 / 10, 0.5 + 29 / 10),
                                                       (20, 0.5 + 19 / 10, 0.5 + 19 / 10)):
        cfg = config(tmp_path, "/m/t.gguf", max_tokens=max_tokens, warmup=0)
        est = Estimator(cfg, 2, (earlier,))
        base, good, _new = (estimate_of(est, c) for c in plan(cfg))
        assert base.seconds == pytest.approx(1.0 + 4 * base_request_s)
        assert good.seconds == pytest.approx(1.0 + 4 * good_request_s)


def test_concurrency_levels_run_their_requests_n_at_a_time(tmp_path):
    cfg = config(tmp_path, "/m/t.gguf", concurrency=[1, 4], warmup=0, max_tokens=50, runs=4)   # 8 requests
    earlier = ResultsFile(name="old", hardware="box", backend="llamacpp", model_family="",
                          settings={"max_tokens": 50}, results=(
        Row(target="7B", role="baseline", load_time_s=0.0, requests=_requests(8, tokens=50, finish="length")),
        Row(target="7B", role="baseline", load_time_s=0.0, concurrency=4,
            requests=_requests(8, tokens=50, finish="length", tps=5.0)),
        Row(target="7B", draft="good", role="speculative", load_time_s=0.0,
            requests=_requests(8, tokens=50, finish="length", tps=20.0))))
    est = Estimator(cfg, 2, (earlier,))
    by_title = {c.title(False): estimate_of(est, c) for c in plan(cfg)}
    one, four = 0.5 + 49 / 10, 0.5 + 49 / 5           # a request alone, and among four streams
    assert by_title["7B (baseline)"].seconds == pytest.approx(1.0 + 8 * one)
    assert by_title["7B (baseline) [4 streams]"].seconds == pytest.approx(1.0 + 2 * four)   # 8 requests, 4 at a time
    # never measured at 4 streams: its one-stream requests, slowed as much as the baseline's were
    at_four = by_title["7B + good [4 streams]"]
    assert at_four.source == "one stream"
    assert at_four.seconds == pytest.approx(1.0 + 2 * (0.5 + 49 / 20) * four / one)


def test_a_ceiling_run_is_estimated_from_its_drafts_real_run(tmp_path):
    cfg = config(tmp_path, "/m/t.gguf", ceiling=True, warmup=0, max_tokens=50)
    real = Row(target="7B", draft="good", role="speculative", load_time_s=2.0, mean_accepted_len=2.5,
               accepted_per_pos=[9, 6, 3, 1], requests=_requests(4, tokens=50, finish="length", tps=4.0))
    earlier = ResultsFile(name="old", hardware="box", backend="llamacpp", model_family="",
                          settings={"max_tokens": 50}, results=(
        Row(target="7B", role="baseline", load_time_s=0.0, requests=_requests(4, tokens=50, finish="length")), real))
    est = Estimator(cfg, 2, (earlier,))
    ceilings = {c.synthetic["level"]: estimate_of(est, c) for c in plan(cfg) if c.role.value == "ceiling"
                and c.candidate.label == "good"}
    assert {e.source for e in ceilings.values()} == {"real run"}
    assert ceilings["measured"].seconds == pytest.approx(2.0 + 1.0 + 4 * (0.5 + 49 / 4.0))
    # at full acceptance every step yields k+1 = 5 tokens instead of 2.5: decoding twice as fast
    assert ceilings["full"].seconds == pytest.approx(2.0 + 1.0 + 4 * (0.5 + 49 / 8.0))


def test_a_short_probe_measures_each_target_not_known_before(tmp_path):
    cfg = config(tmp_path, "/m/target.gguf")
    backend = FakeBackend(Script(tps={"/m/target.gguf": 50.0}))
    est = Estimator(cfg, 2)
    lines = probe_targets(cfg, backend, est, Reporter())
    assert [e[2] for e in backend.log if e[0] == "launch"] == [None]     # one server: the target alone
    assert lines[0].startswith("7B: 50.0 tok/s on one request")
    base, good, new = (estimate_of(est, c) for c in plan(cfg))
    assert base.source == good.source == new.source == "probe" and base.seconds > 4 * 1.0
    # measured before: nothing is started
    earlier = ResultsFile(name="old", hardware="box", backend="llamacpp", model_family="", settings={}, results=(
        Row(target="7B", role="baseline", mean_total_time=2.0, load_time_s=3.0, mean_tps=50.0),))
    again = FakeBackend(Script(tps={"/m/target.gguf": 50.0}))
    assert probe_targets(cfg, again, Estimator(cfg, 2, (earlier,)), Reporter()) == ["7B: measured before, not probed"]
    assert not [e for e in again.log if e[0] == "launch"]


def test_probe_without_dry_run_is_a_usage_error(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"name": "est", "targets": [{"label": "7B", "path": "/m/t.gguf"}], "drafts": []}))
    proc = run_cli("sweep.py", "--config", str(path), "--probe")
    assert proc.returncode == 2 and "--probe only goes with --dry-run" in proc.stderr


@pytest.mark.llama
def test_dry_run_probe_times_the_real_target_and_saves_nothing(models, tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"name": "est", "hardware": "box", "targets": [{"label": "T", "path": models["target-2x"]}],
                                "drafts": [{"label": "D", "path": models["base"]}],
                                "settings": {"runs": 2, "max_tokens": 16, "prompts": ["code"], "port": 0,
                                             "gpu_layers": 0, "ctx_size": 1024}}))
    results = tmp_path / "results" / "r.json"
    proc = run_cli("sweep.py", "--config", str(path), "--results", str(results), "--dry-run", "--probe", timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"T: [\d.]+ tok/s on one request, loaded in [\d.]+ s", proc.stdout)
    assert "[1/2] T (baseline)  ~" in proc.stdout and "(from a short probe of its target)" in proc.stdout
    assert not results.exists() and not llama_server_pids()


def test_dry_run_says_how_far_off_it_can_be_and_points_to_probe(tmp_path):
    """Issue 37: a plain --dry-run said ~37 s for a sweep that took 1h35m, and never mentioned --probe."""
    path = tiny_config(tmp_path)
    proc = run_cli("sweep.py", "--config", str(path), "--results", str(tmp_path / "new.json"), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "How far off: a guess from the model files' sizes" in proc.stdout and "100x short" in proc.stdout
    assert "add --probe" in proc.stdout


def test_an_estimate_learned_from_a_busy_run_carries_its_load(tmp_path):
    """Issue 37: an estimate learned from a loaded run said ~1h07m for a 207 s race, and did not say why."""
    from draftbench.lifetime.machine_load import Load
    from draftbench.sweep.estimate import accuracy

    cfg = config(tmp_path, "/m/absent.gguf")
    busy = {"other_cpu_share": 0.9, "other_cpu_share_max": 0.95, "cpu_count": 2, "seconds": 900.0, "windows": 2}
    earlier = ResultsFile(name="old", hardware="box", backend="llamacpp", model_family="", settings={}, results=(
        Row(target="7B", role="baseline", mean_total_time=20.0, load_time_s=3.0, mean_tps=2.3, machine_load=busy),))
    est = Estimator(cfg, 2, (earlier,))
    estimates = [estimate_of(est, c) for c in plan(cfg)]
    assert {e.learned_load for e in estimates} == {0.9}
    lines = accuracy(estimates, probed=False, now=Load(0.05, 0.3, 2, 0.5))
    assert lines[0].startswith("How far off: learned from each target's earlier baseline")
    assert ("Learned from rows measured while other programs used 90% of the CPU on average; right now they use 5%, "
            "so it should run faster than estimated.") in lines[-1]
    assert "--probe" not in " ".join(lines)
