"""The LM Studio backend's REST path end to end, against tests/fakes/fake_lms.py and fake_lmstudio_server.py.

These tests force ``lmstudio_client: "rest"`` (the SDK is installed with the test extra); the SDK
path is tested in test_backends_lmstudio_sdk.py.

The fake `lms` records every command and starts/stops the fake LM Studio server, which answers
in LM Studio's documented REST API v0 format (stats with accepted / rejected / ignored /
total draft token counts).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from draftbench.backends import get_backend
from draftbench.backends.base import LaunchSpec
from draftbench.backends.lmstudio.backend import IDENTIFIER, LMStudioBackend, counts_from_stats, load_command
from draftbench.backends.lmstudio.settings import LMStudioSettings
from draftbench.common.errors import BinaryNotFoundError, ServerError
from draftbench.config.prompts import BUILTIN_PROMPTS
from draftbench.config.settings import Settings
from draftbench.lifetime.process import free_port
from draftbench.measure.sequential import MeasurementFailed, MeasureOptions, run_prompts

from fakes import FAKES, make_exe, reap
from helpers import default_settings, interrupt_server_cli, run_cli, timed

TARGET, DRAFT = "qwen2.5-7b-instruct", "qwen2.5-0.5b-instruct"
# The fake drafts 4 tokens a step and accepts 3, 1, 4, 0 in turn (emitting 4, 2, 5, 1 tokens);
# after the first mismatch the rest of a draft is ignored. 24 tokens = 8 steps:
# accepted 16, rejected 6, ignored 10 (total 32) → draft_n 22, acceptance 16/22.
EXPECTED_24 = {"accepted": 16, "rejected": 6, "ignored": 10}


@pytest.fixture
def lms(tmp_path, monkeypatch):
    """A fake `lms`, a port for LM Studio, and the promise that no fake server outlives the test."""
    state, pids = tmp_path / "lms-state", tmp_path / "pids"
    state.mkdir()
    pids.mkdir()
    monkeypatch.setenv("FAKE_LMS_STATE", str(state))
    monkeypatch.setenv("FAKE_LMSTUDIO_PIDS", str(pids))

    class Env:
        bin = make_exe(tmp_path / "bin", "lms", "fake_lms.py")
        port = free_port()
        pid_dir = pids

        @staticmethod
        def argv() -> list[list[str]]:
            path = state / "argv.jsonl"
            return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

        @classmethod
        def fake_requests(cls) -> list[dict]:
            return requests.get(f"http://127.0.0.1:{cls.port}/__fake__/requests", timeout=5).json()

    yield Env
    leaked = reap(pids)
    assert not leaked, f"fake LM Studio servers left running: {leaked}"


def without_lms(monkeypatch, tmp_path) -> None:
    """No `lms` anywhere draftbench looks."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DRAFTBENCH_LMS", raising=False)


def settings_for(**overrides) -> Settings:
    return default_settings(LMStudioSettings, **{"lmstudio_client": "rest", **overrides})


def make_spec(tmp_path, env, *, target=TARGET, draft=DRAFT, extra=(), **settings) -> LaunchSpec:
    merged = {"lms_bin": str(env.bin), "lmstudio_port": env.port, **settings}
    return LaunchSpec(target=target, draft=draft, port=free_port(), ctx_size=2048, extra_args=tuple(extra),
                      settings=settings_for(**merged), startup_timeout_s=20,
                      log_path=str(tmp_path / f"lmstudio-{time.monotonic_ns()}.log"))


def start_lmstudio_directly(port: int, **env) -> subprocess.Popen:
    """An LM Studio server somebody else started (not through `lms`)."""
    proc = subprocess.Popen([sys.executable, str(FAKES / "fake_lmstudio_server.py"), "--port", str(port)],
                            env=dict(os.environ, **env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.02)
    proc.kill()
    raise AssertionError("the fake LM Studio server did not start")


# --------------------------------------------------------------------------- pure parts

def test_load_command_is_exact():
    spec = LaunchSpec(target=TARGET, draft=DRAFT, ctx_size=8192, settings=settings_for(),
                      extra_args=("--ttl", "600"))
    assert load_command("/usr/local/bin/lms", spec) == [
        "/usr/local/bin/lms", "load", "qwen2.5-7b-instruct", "--identifier", "draftbench-target",
        "--context-length", "8192", "--gpu", "max", "--ttl", "600"]
    cpu = LaunchSpec(target=TARGET, ctx_size=1024, settings=settings_for(gpu_layers=0))
    assert load_command("lms", cpu)[-2:] == ["--gpu", "off"]
    half = LaunchSpec(target=TARGET, ctx_size=1024, settings=settings_for(lmstudio_gpu="0.5"))
    assert load_command("lms", half)[-2:] == ["--gpu", "0.5"]


def test_ignored_draft_tokens_are_neither_accepted_nor_rejected():
    stats = {"tokens_per_second": 127.3, "draft_model": DRAFT, "total_draft_tokens_count": 20,
             "accepted_draft_tokens_count": 15, "rejected_draft_tokens_count": 4, "ignored_draft_tokens_count": 1}
    counts = counts_from_stats(stats, draft_requested=True)
    assert (counts.drafted, counts.accepted, counts.steps) == (19, 15, None)    # acceptance 15/19, not 15/20
    assert counts.details["ignored"] == 1 and counts.details["total"] == 20
    # rejected missing: derived from total - accepted - ignored
    partial = counts_from_stats({"total_draft_tokens_count": 20, "accepted_draft_tokens_count": 15,
                                 "ignored_draft_tokens_count": 1}, draft_requested=True)
    assert (partial.drafted, partial.accepted) == (19, 15)
    # stats without draft counters although a draft was requested: measured "did not draft"
    none = counts_from_stats({"tokens_per_second": 50.0}, draft_requested=True)
    assert (none.drafted, none.accepted) == (0, 0)
    # ... and unknown (None, never 0) when no draft was requested
    baseline = counts_from_stats({"tokens_per_second": 50.0}, draft_requested=False)
    assert (baseline.drafted, baseline.accepted) == (None, None)


def test_settings_are_validated():
    from draftbench.common.errors import ConfigError
    from draftbench.sweep.config_file import validate_config
    with pytest.raises(ConfigError) as exc:
        validate_config({"name": "x", "backend": "lmstudio", "targets": [{"label": "t", "path": TARGET}],
                         "settings": {"lmstudio_gpu": "most", "lmstudio_endpoint": "v2", "draft_max": 4,
                                      "lmstudio_client": "rest"}})
    text = str(exc.value)
    assert "$.settings.lmstudio_gpu" in text and "$.settings.lmstudio_endpoint" in text
    assert "$.settings.draft_max" in text          # REST cannot set the draft length per request
    config = validate_config({"name": "x", "backend": "lm-studio", "targets": [{"label": "t", "path": TARGET}],
                              "settings": {"lms_bin": "bin/lms"}}, base_dir="/cfg")
    assert config.backend == "lmstudio" and config.settings.backend.lms_bin == "/cfg/bin/lms"
    assert config.targets[0].path == TARGET      # model keys are not paths


# --------------------------------------------------------------------------- with lms

def test_with_lms_starts_loads_streams_counts_and_cleans_up(lms, tmp_path):
    spec = make_spec(tmp_path, lms)
    server = LMStudioBackend().launch(spec)
    try:
        port = str(lms.port)
        load = ["load", TARGET, "--identifier", "draftbench-target", "--context-length", "2048", "--gpu", "max"]
        assert lms.argv() == [["server", "start", "--port", port], load]
        assert server.command == [str(lms.bin), *load]
        assert server.model == IDENTIFIER and server.base_url == f"http://127.0.0.1:{port}"
        assert server.notes == []
        assert server.chat_url().endswith("/api/v0/chat/completions")

        status = server.speculation_status(requested=True)     # one non-streaming request, documented format
        assert status.active is True, status.reason

        records = run_prompts(server, list(BUILTIN_PROMPTS[:2]), MeasureOptions(runs=1, warmup=1, max_tokens=24))
        seen = lms.fake_requests()
        assert [r["stream"] for r in seen] == [False, True, True, True]     # probe, warm-up, 2 measured
        assert all(r["model"] == IDENTIFIER and r["draft_model"] == DRAFT for r in seen)
        for record, did in zip(records, seen[2:]):
            truth = did["truth"]
            assert {k: truth[k] for k in EXPECTED_24} == EXPECTED_24
            assert record.completion_tokens == 24
            assert record.draft_n == truth["accepted"] + truth["rejected"] == 22
            assert record.draft_n_accepted == truth["accepted"] == 16
            assert record.verify_steps is None                 # LM Studio does not report verify steps
            assert record.server_decode_tps and record.server_decode_tps > 0
            # the client clock's decode rate is "not measured" (None, never 0) where a loaded machine delivered every
            # token in one read
            assert record.ttft_s is not None and (record.decode_tps is None or record.decode_tps > 0)
    finally:
        server.stop()
    # our target unloaded, the draft LM Studio loaded for us unloaded, the server we started stopped
    assert lms.argv()[-3:] == [["unload", IDENTIFIER], ["unload", DRAFT], ["server", "stop"]]
    assert not reap(lms.pid_dir, timeout_s=2)
    server.stop()                                              # idempotent
    assert len(lms.argv()) == 5


def test_sweep_rows_with_good_ignored_and_refused_drafts(lms, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_LMSTUDIO_MODELS", f"{TARGET},{DRAFT},llama-3.2-1b-instruct,qwen2.5-coder-0.5b")
    monkeypatch.setenv("FAKE_LMSTUDIO_DRAFTS", json.dumps({"llama-3.2-1b-instruct": "ignore",
                                                           "qwen2.5-coder-0.5b": "reject"}))
    config = {
        "name": "fake-lmstudio", "hardware": "test", "backend": "lmstudio", "model_family": "fake",
        "targets": [{"label": "7B", "path": TARGET}],
        "drafts": [{"label": "0.5B", "path": DRAFT}, {"label": "llama 1B", "path": "llama-3.2-1b-instruct"},
                   {"label": "coder", "path": "qwen2.5-coder-0.5b"}],
        "settings": {"lms_bin": str(lms.bin), "lmstudio_port": lms.port, "runs": 1, "warmup": 1, "max_tokens": 24,
                     "prompts": ["code", "json"], "ctx_size": 2048, "port": 0, "lmstudio_client": "rest",
                     "design": "sequential"},          # one server per row, so the starts below are one per row
    }
    path = tmp_path / "lmstudio.json"
    path.write_text(json.dumps(config))
    results = tmp_path / "out.json"
    proc = run_cli("sweep.py", "--config", str(path), "--results", str(results), "--no-chart", timeout=120)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Note: LM Studio through its REST API: no per-request draft length" in proc.stdout
    rows = {r["draft"]: r for r in json.loads(results.read_text())["results"]}
    base, good, ignored, refused = rows[None], rows["0.5B"], rows["llama 1B"], rows["coder"]
    assert base["status"] == "ok" and timed(base) and base["draft_n"] is None
    assert good["status"] == "ok" and good["speculation_active"] is True and timed(good)
    n = len(good["requests"])      # 2 prompts a stage, for as many stages as the verdict needed (the machine's noise)
    assert n % 2 == 0 and (good["draft_n"], good["draft_n_accepted"]) == (22 * n, 16 * n)   # 24 tokens each, 2 prompts a stage
    assert good["acceptance_rate"] == round(32 / 44, 4)
    # LM Studio reports no per-position counts: null, never zeros, and so no diagnosis or k prediction
    assert good["accepted_per_pos"] is None and good["diagnosis"] is None and good["k_prediction"] is None
    assert good["server"]["command"][1:4] == ["load", TARGET, "--identifier"]
    assert ignored["status"] == "error" and ignored["speculation_active"] is False
    assert "did not use the draft" in ignored["reason"]
    assert refused["status"] == "error" and refused["speculation_active"] is False
    assert "refused draft_model" in refused["reason"] and "not compatible" in refused["reason"]
    starts = [a for a in lms.argv() if a[:2] == ["server", "start"]]
    stops = [a for a in lms.argv() if a[:2] == ["server", "stop"]]
    # sequential: a server per stage for the target alone and for the good draft, and one for each refused draft
    stages = len({r["block"] for r in good["requests"]})
    assert n == 2 * stages and len({r["session"] for r in base["requests"]}) == stages
    assert len(starts) == len(stops) == 2 * stages + 2


def test_a_stream_without_usage_or_stats_is_a_clear_error(lms, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_LMSTUDIO_MODE", "legacy-stream")
    with LMStudioBackend().launch(make_spec(tmp_path, lms)) as server:
        with pytest.raises(MeasurementFailed) as exc:
            run_prompts(server, list(BUILTIN_PROMPTS[:1]), MeasureOptions(runs=1, warmup=1, max_tokens=8))
        assert "streamed no token counts" in exc.value.error.message
        assert "lmstudio_endpoint" in exc.value.error.fix


def test_native_blocking_endpoint_reads_the_documented_unstreamed_stats(lms, tmp_path, monkeypatch):
    # An LM Studio whose stream carries no stats (as in older builds) still answers unstreamed
    # requests in the documented v0 format: draft counts and LM Studio's own TTFT come from there.
    monkeypatch.setenv("FAKE_LMSTUDIO_MODE", "legacy-stream")
    with LMStudioBackend().launch(make_spec(tmp_path, lms, lmstudio_endpoint="native-blocking")) as server:
        assert server.speculation_status(requested=True).active is True
        records = run_prompts(server, list(BUILTIN_PROMPTS[:2]), MeasureOptions(runs=1, warmup=0, max_tokens=24))
        seen = lms.fake_requests()
        assert all(r["stream"] is False and r["path"] == "/api/v0/chat/completions" for r in seen)
        for record, did in zip(records, seen[1:]):
            truth = did["truth"]
            assert record.completion_tokens == 24
            assert record.draft_n == truth["accepted"] + truth["rejected"]
            assert record.draft_n_accepted == truth["accepted"]
            assert record.ttft_s is not None and record.ttft_s < record.total_s
            assert record.decode_tps and record.decode_tps > 0
            assert record.text and record.text.startswith(" w0")


def test_openai_endpoint_measures_speed_without_acceptance(lms, tmp_path):
    with LMStudioBackend().launch(make_spec(tmp_path, lms, lmstudio_endpoint="openai")) as server:
        assert server.chat_url().endswith("/v1/chat/completions")
        assert server.speculation_status(requested=True).active is None
        records = run_prompts(server, list(BUILTIN_PROMPTS[:1]), MeasureOptions(runs=1, warmup=0, max_tokens=12))
        # speed is measured (a time to the first token and to the last); the client clock gives no decode rate when a
        # loaded machine delivered every token in one read (first == last), which is "not measured", never 0
        assert records[0].completion_tokens == 12 and records[0].ttft_s is not None and records[0].total_s
        assert records[0].decode_tps is None or records[0].decode_tps > 0
        assert (records[0].draft_n, records[0].draft_n_accepted) == (None, None)
        assert lms.fake_requests()[0]["path"] == "/v1/chat/completions"


def test_unknown_model_key_is_named_and_nothing_is_left_running(lms, tmp_path):
    with pytest.raises(ServerError) as exc:
        LMStudioBackend().launch(make_spec(tmp_path, lms, target="qwen2.5-70b-typo"))
    assert exc.value.kind == "model" and "qwen2.5-70b-typo" in exc.value.message
    assert TARGET in exc.value.fix                  # lists what LM Studio has
    assert lms.argv()[-1] == ["server", "stop"]     # the server we started is stopped again
    with pytest.raises(ServerError) as exc:
        LMStudioBackend().launch(make_spec(tmp_path, lms, draft="no-such-draft"))
    assert exc.value.kind == "draft_model"


def test_a_failed_load_is_explained(lms, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_LMS_LOAD", "oom")
    with pytest.raises(ServerError) as exc:
        LMStudioBackend().launch(make_spec(tmp_path, lms))
    assert exc.value.kind == "oom" and "lmstudio_gpu" in exc.value.fix
    assert "insufficient system resources" in exc.value.log_tail
    assert lms.argv()[-1] == ["server", "stop"]


def test_a_target_already_loaded_is_reused_not_loaded_twice(lms, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_LMSTUDIO_LOADED", TARGET)
    with LMStudioBackend().launch(make_spec(tmp_path, lms, draft=None)) as server:
        assert server.model == TARGET and server.command is None
        assert any("already loaded" in w for w in server.notes)
        run_prompts(server, list(BUILTIN_PROMPTS[:1]), MeasureOptions(runs=1, warmup=0, max_tokens=4))
    assert not any(a[0] in ("load", "unload") for a in lms.argv())


# --------------------------------------------------------------------------- without lms

def test_without_lms_attaches_to_a_running_server_and_says_so(lms, tmp_path, monkeypatch):
    without_lms(monkeypatch, tmp_path)
    running = start_lmstudio_directly(lms.port)
    try:
        server = LMStudioBackend().launch(make_spec(tmp_path, lms, lms_bin=None))
        with server:
            assert server.lms is None and server.command is None and server.model == TARGET
            notes = " ".join(server.notes)
            assert "already running" in notes and "lms CLI was not found" in notes
            assert "lms CLI was not found" in Path(server.log_path).read_text()
            assert server.speculation_status(requested=True).active is True
            records = run_prompts(server, list(BUILTIN_PROMPTS[:1]), MeasureOptions(runs=1, warmup=0, max_tokens=24))
            assert (records[0].draft_n, records[0].draft_n_accepted) == (22, 16)
        assert running.poll() is None, "a server we did not start must be left running"
        assert lms.argv() == []
    finally:
        running.kill()
        running.wait()


def test_server_cli_without_lms_attaches_and_says_so(lms, tmp_path, monkeypatch):
    without_lms(monkeypatch, tmp_path)
    running = start_lmstudio_directly(lms.port)
    try:
        returncode, text = interrupt_server_cli("lm-studio", "--model", TARGET, "--draft-model", DRAFT, "--port",
                                                str(lms.port), "--log", str(tmp_path / "cli.log"), "--client", "rest")
        assert returncode == 0, text
        assert "Note: the lms CLI was not found, so draftbench attached to the running LM Studio server" in text
        assert "Speculative decoding: active" in text
        assert f"--backend lmstudio --model {TARGET}" in text and "bench.py sends no draft_model" in text
        assert "Server stopped" in text
        assert running.poll() is None
    finally:
        running.kill()
        running.wait()


def test_no_server_and_no_lms_is_a_clear_error(lms, tmp_path, monkeypatch):
    without_lms(monkeypatch, tmp_path)
    with pytest.raises(ServerError) as exc:
        LMStudioBackend().launch(make_spec(tmp_path, lms, lms_bin=None))
    assert exc.value.kind == "unreachable"
    assert f"no LM Studio server answers at http://127.0.0.1:{lms.port}" in exc.value.message
    assert "settings.lms_bin / --lms-bin" in exc.value.fix and "Start server" in exc.value.fix
    with pytest.raises(BinaryNotFoundError) as exc:
        get_backend("lmstudio").check_ready_to_run(settings_for(lms_bin=str(tmp_path / "nowhere" / "lms")))
    assert "settings.lms_bin / --lms-bin" in str(exc.value)

    proc = run_cli("server.py", "lm-studio", "--model", TARGET, "--port", str(lms.port), "--client", "rest",
                   env={"PATH": str(tmp_path / "empty-path"), "HOME": str(tmp_path / "home")}, timeout=60)
    assert proc.returncode == 1 and "lms CLI was not found" in proc.stderr and "--lms-bin" in proc.stderr


def test_unreachable_attached_server_is_a_clear_request_error():
    server = get_backend("lm-studio").attach(f"http://127.0.0.1:{free_port()}", model=TARGET)
    with pytest.raises(MeasurementFailed) as exc:
        run_prompts(server, list(BUILTIN_PROMPTS[:1]), MeasureOptions(runs=1, warmup=0, max_tokens=8))
    assert "cannot reach" in str(exc.value.error)


@pytest.mark.parametrize("code, kind, words", [(404, "foreign", "not as LM Studio"),
                                               (401, "auth", "requires an API token")])
def test_something_else_on_lmstudios_port_is_named(lms, tmp_path, http_stub, code, kind, words):
    http_stub({"GET *": (code, b"")}, port=lms.port)
    with pytest.raises(ServerError) as exc:
        LMStudioBackend().launch(make_spec(tmp_path, lms))
    assert exc.value.kind == kind and words in exc.value.message
    assert lms.argv() == []                      # nothing was started or loaded


def test_native_blocking_errors_are_named():
    from draftbench.backends.lmstudio.backend import blocking_chat
    from draftbench.common.errors import RequestError
    url = f"http://127.0.0.1:{free_port()}/api/v0/chat/completions"       # nothing listens there
    with requests.Session() as session, pytest.raises(RequestError, match="cannot reach") as exc:
        blocking_chat(session, url, {"model": "m", "messages": []}, headers={}, request_timeout_s=5)
    assert "LM Studio's server running" in exc.value.fix
