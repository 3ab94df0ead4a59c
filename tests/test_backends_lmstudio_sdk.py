"""LM Studio through its Python SDK: the real ``lmstudio`` package against a local stand-in.

tests/fakes/fake_lmstudio_sdk_server.py speaks the SDK's websocket protocol (read from the SDK's
source; its docstring cites which files and messages) and simulates drafting honouring k, p-min
and the minimum draft length, so what draftbench records can be checked against the stand-in's
own truth. Real LM Studio cannot run here.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time

import lmstudio
import pytest
import requests
from draftbench.backends.base import LaunchSpec
from draftbench.backends.lmstudio import choice as lmstudio_choice
from draftbench.backends.lmstudio.backend import IDENTIFIER, LMStudioBackend
from draftbench.backends.lmstudio.sdk import LMStudioSDKServer
from draftbench.backends.lmstudio.settings import LMStudioSettings
from draftbench.common.errors import ConfigError, RequestError, ServerError
from draftbench.config.prompts import BUILTIN_PROMPTS
from draftbench.config.settings import Settings
from draftbench.lifetime.process import free_port
from draftbench.measure.sequential import MeasurementFailed, MeasureOptions, run_prompts
from draftbench.results.fragments import decode
from draftbench.sweep.config_file import validate_config

from fakes import FAKES, reap
from helpers import default_settings, interrupt_server_cli, run_cli

TARGET, DRAFT = "qwen2.5-7b-instruct", "qwen2.5-0.5b-instruct"


class StandIn:
    """One stand-in LM Studio process on a free port."""

    def __init__(self, pid_dir, **env):
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, str(FAKES / "fake_lmstudio_sdk_server.py"), "--port",
                                      str(self.port)], env=dict(os.environ, FAKE_LMSTUDIO_PIDS=str(pid_dir), **env),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.02)
        self.stop()
        raise AssertionError("the LM Studio stand-in did not start")

    def seen(self, endpoint: str | None = None) -> list[dict]:
        seen = requests.get(f"http://127.0.0.1:{self.port}/__fake__/requests", timeout=5).json()
        return [s for s in seen if endpoint is None or s["endpoint"] == endpoint]

    def loaded(self) -> dict:
        return requests.get(f"http://127.0.0.1:{self.port}/__fake__/loaded", timeout=5).json()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def lm_studio(tmp_path, monkeypatch):
    """Start stand-ins (``lm_studio(**env)``); none outlives the test. The app's own API ports are
    never probed, so a real LM Studio on this machine cannot take part."""
    monkeypatch.setattr(lmstudio.Client, "find_default_local_api_host", classmethod(lambda cls: None))
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    started: list[StandIn] = []

    def start(**env) -> StandIn:
        started.append(StandIn(pid_dir, **env))
        return started[-1]

    yield start
    for stand_in in started:
        stand_in.stop()
    assert not reap(pid_dir), "LM Studio stand-ins left running"


def sdk_settings(**overrides) -> Settings:
    return default_settings(LMStudioSettings, **{"lmstudio_client": "sdk", **overrides})


def make_spec(tmp_path, port, *, target=TARGET, draft=DRAFT, draft_max=None, **settings) -> LaunchSpec:
    return LaunchSpec(target=target, draft=draft, draft_max=draft_max, ctx_size=2048,
                      settings=sdk_settings(lmstudio_port=port, **settings), startup_timeout_s=20,
                      log_path=str(tmp_path / f"lmstudio-sdk-{time.monotonic_ns()}.log"))


# --------------------------------------------------------------------------- which path

def test_the_sdk_path_accepts_k_lists_and_p_min_and_the_rest_path_names_the_fix(monkeypatch):
    raw = {"name": "x", "backend": "lmstudio", "targets": [{"label": "t", "path": TARGET}],
           "drafts": [{"label": "d", "path": DRAFT}], "settings": {"draft_max": [2, 4], "draft_p_min": 0.5}}
    config = validate_config(raw)                                   # auto, with the SDK installed
    assert config.settings.backend.lmstudio_client == "sdk" and config.draft_max_values == (2, 4)
    with pytest.raises(ConfigError) as exc:
        validate_config({**raw, "settings": {**raw["settings"], "lmstudio_client": "rest"}})
    problems = {p.path: p for p in exc.value.problems}
    assert set(problems) == {"$.settings.draft_max", "$.settings.draft_p_min"}
    assert "REST API cannot set it per request" in problems["$.settings.draft_max"].message
    monkeypatch.setattr(lmstudio_choice, "sdk_version", lambda: None)    # as without the SDK
    with pytest.raises(ConfigError) as exc:
        validate_config(raw)
    assert "pip install 'draftbench[lmstudio]'" in exc.value.problems[0].fix
    with pytest.raises(ConfigError) as exc:
        validate_config({**raw, "settings": {"lmstudio_client": "sdk"}})
    assert exc.value.problems[0].path == "$.settings.lmstudio_client"
    assert "not installed" in exc.value.problems[0].message
    assert "draft length" in lmstudio_choice.sweep_notes(sdk_settings(lmstudio_client="rest"))[0]
    monkeypatch.setattr(lmstudio_choice, "sdk_version", lambda: "1.4.2")
    assert lmstudio_choice.resolve("auto") == "rest"


# --------------------------------------------------------------------------- one server

def test_loads_measures_k_p_min_and_fragments_then_unloads(lm_studio, tmp_path):
    studio = lm_studio()
    spec = make_spec(tmp_path, studio.port, draft_max=4, draft_p_min=0.7, lmstudio_min_draft_length=1,
                     lmstudio_gpu="0.5")
    server = LMStudioBackend().launch(spec)
    try:
        assert isinstance(server, LMStudioSDKServer) and server.model == IDENTIFIER
        assert server.base_url == f"http://127.0.0.1:{studio.port}" and server.version == "lmstudio SDK 1.5.0"
        (load,) = studio.seen("loadModel")
        assert (load["modelKey"], load["identifier"]) == (TARGET, IDENTIFIER)
        assert load["config"]["llm.load.contextLength"] == 2048
        assert load["config"]["llm.load.llama.acceleration.offloadRatio"] == 0.5
        assert server.speculation_status(requested=True).active is True
        records = run_prompts(server, list(BUILTIN_PROMPTS[:2]), MeasureOptions(runs=1, warmup=1, max_tokens=24))
        predictions = studio.seen("predict")
        assert len(predictions) == 4                                   # probe, warm-up, 2 measured
        assert all((p["draftModel"], p["k"], p["p_min"], p["min_draft_length"]) == (DRAFT, 4, 0.7, 1)
                   for p in predictions)
        for record, did in zip(records, predictions[2:]):
            truth = did["truth"]
            # p-min 0.7 stops the stand-in's draft at 2 tokens although k is 4
            assert max(truth["steps"]) == 2
            assert record.completion_tokens == 24 and record.finish_reason == "length"
            assert record.draft_n == truth["accepted"] + truth["rejected"]      # typed stats, ignored left out
            assert record.draft_n_accepted == truth["accepted"]
            assert record.draft_details["ignored"] == truth["ignored"]
            assert record.draft_details["draft_model"] == DRAFT
            assert record.draft_details["num_draft_tokens_exact"] == 4             # what LM Studio says it applied
            assert record.draft_source == "sdk-stats"
            assert record.ttft_s is not None and record.server_ttft_s is not None
            assert record.server_decode_tps and (record.decode_tps is None or record.decode_tps > 0)   # None: one read
            items = decode(record.draft_fragments)
            assert sum(n for n, _ in items) == 24
            assert [n for n, drafted in items if drafted] == [a for a in truth["steps"] if a]
            assert record.text.startswith(" w0 w1")
    finally:
        server.stop()
    unloads = [s["identifier"] for s in studio.seen("unloadModel")]
    assert unloads == [IDENTIFIER, DRAFT]          # our target, and the draft LM Studio loaded for us
    assert studio.loaded() == {}
    server.stop()                                   # idempotent
    assert len(studio.seen("unloadModel")) == 2
    log = open(server.log_path).read()
    assert "llm.load_new_instance qwen2.5-7b-instruct identifier=draftbench-target" in log


def test_drafts_that_are_refused_or_unused_are_named(lm_studio, tmp_path):
    studio = lm_studio(FAKE_LMSTUDIO_MODELS=f"{TARGET},{DRAFT},llama-3.2-1b-instruct",
                       FAKE_LMSTUDIO_DRAFTS=json.dumps({DRAFT: "reject", "llama-3.2-1b-instruct": "ignore"}))
    with LMStudioBackend().launch(make_spec(tmp_path, studio.port)) as server:
        status = server.speculation_status(requested=True)
        assert status.active is False and "refused draft model" in status.reason and "not compatible" in status.reason
    with LMStudioBackend().launch(make_spec(tmp_path, studio.port, draft="llama-3.2-1b-instruct")) as server:
        status = server.speculation_status(requested=True)
        assert status.active is False and "did not use the draft model" in status.reason
        records = run_prompts(server, list(BUILTIN_PROMPTS[:1]), MeasureOptions(runs=1, warmup=0, max_tokens=8))
        assert (records[0].draft_n, records[0].draft_n_accepted) == (0, 0)     # measured "did not draft"
        assert records[0].draft_fragments == "8"
    assert studio.loaded() == {}


def test_models_and_loading_problems_are_named_and_nothing_stays_loaded(lm_studio, tmp_path):
    studio = lm_studio()
    with pytest.raises(ServerError) as exc:
        LMStudioBackend().launch(make_spec(tmp_path, studio.port, target="qwen2.5-70b-typo"))
    assert exc.value.kind == "model" and "qwen2.5-70b-typo" in exc.value.message and TARGET in exc.value.fix
    with pytest.raises(ServerError) as exc:
        LMStudioBackend().launch(make_spec(tmp_path, studio.port, draft="no-such-draft"))
    assert exc.value.kind == "draft_model"
    assert studio.seen("loadModel") == []
    oom = lm_studio(FAKE_LMSTUDIO_LOAD="oom")
    with pytest.raises(ServerError) as exc:
        LMStudioBackend().launch(make_spec(tmp_path, oom.port))
    assert exc.value.kind == "oom" and "lmstudio_gpu" in exc.value.fix and "insufficient" in exc.value.message
    assert oom.loaded() == {}


def test_a_loaded_target_is_reused_and_a_leftover_of_ours_replaced(lm_studio, tmp_path):
    studio = lm_studio(FAKE_LMSTUDIO_LOADED=TARGET)
    with LMStudioBackend().launch(make_spec(tmp_path, studio.port, draft=None)) as server:
        assert server.model == TARGET and server.command is None
        assert any("already loaded" in w for w in server.notes)
        run_prompts(server, list(BUILTIN_PROMPTS[:1]), MeasureOptions(runs=1, warmup=0, max_tokens=4))
    assert studio.loaded() == {TARGET: TARGET} and studio.seen("unloadModel") == []

    leftover = lm_studio(FAKE_LMSTUDIO_LOADED=IDENTIFIER, FAKE_LMSTUDIO_MODELS=f"{TARGET},{DRAFT},{IDENTIFIER}")
    with LMStudioBackend().launch(make_spec(tmp_path, leftover.port, draft=None)) as server:
        assert server.model == IDENTIFIER and server.command[0] == "llm.load_new_instance"
    assert [s["endpoint"] for s in leftover.seen()] == ["unloadModel", "loadModel", "unloadModel"]


def test_where_lm_studio_is_and_is_not(lm_studio, tmp_path, monkeypatch, http_stub):
    nobody = free_port()
    with pytest.raises(ServerError) as exc:
        LMStudioBackend().launch(make_spec(tmp_path, nobody))
    assert exc.value.kind == "unreachable" and f"127.0.0.1:{nobody}" in exc.value.message
    assert "lms daemon up" in exc.value.fix and "lmstudio_client" in exc.value.fix
    # LM Studio's HTTP server off, the app's own API on: found and said so
    studio = lm_studio()
    monkeypatch.setattr(lmstudio.Client, "find_default_local_api_host",
                        classmethod(lambda cls: f"127.0.0.1:{studio.port}"))
    with LMStudioBackend().launch(make_spec(tmp_path, nobody, draft=None)) as server:
        assert any("LM Studio app's own API" in w for w in server.notes)
        assert server.base_url == f"http://127.0.0.1:{studio.port}"

    other = http_stub({"GET *": (404, b"")})
    with pytest.raises(ServerError) as exc:
        LMStudioBackend().launch(make_spec(tmp_path, other.port))
    assert exc.value.kind == "foreign" and "not as LM Studio" in exc.value.message


def test_a_stalled_or_vanished_lm_studio_is_a_bounded_request_error(lm_studio, tmp_path):
    studio = lm_studio(FAKE_LMSTUDIO_MODE="stall")
    with LMStudioBackend().launch(make_spec(tmp_path, studio.port, draft=None)) as server:
        started = time.monotonic()
        with pytest.raises(MeasurementFailed) as exc:
            run_prompts(server, list(BUILTIN_PROMPTS[:1]),
                        MeasureOptions(runs=1, warmup=0, max_tokens=8, stall_timeout_s=1.0))
        assert "stalled" in exc.value.error.message and time.monotonic() - started < 15
        killer = threading.Timer(0.5, studio.proc.kill)
        killer.start()
        started = time.monotonic()
        with pytest.raises(RequestError) as broke:
            server.send(server.request_body([{"role": "user", "content": "hi"}], max_tokens=8, temperature=0, seed=1),
                        request_timeout_s=60, stall_timeout_s=30)
        killer.join()
        assert "broke" in broke.value.message and time.monotonic() - started < 15
    # the SDK's own complaints went to our log, not the console
    assert "lmstudio SDK" in open(server.log_path).read()


# --------------------------------------------------------------------------- as a user runs it

def test_sweep_cli_sweeps_k_through_the_sdk(lm_studio, tmp_path):
    studio = lm_studio()
    config = {"name": "lmstudio-sdk", "hardware": "test", "backend": "lmstudio", "model_family": "fake",
              "targets": [{"label": "7B", "path": TARGET}], "drafts": [{"label": "0.5B", "path": DRAFT}],
              "settings": {"lmstudio_port": studio.port, "draft_max": [2, 4], "runs": 1, "warmup": 1,
                           "max_tokens": 24, "prompts": ["code", "json"]}}
    path = tmp_path / "lmstudio-sdk.json"
    path.write_text(json.dumps(config))
    results = tmp_path / "out.json"
    proc = run_cli("sweep.py", "--config", str(path), "--results", str(results), "--no-chart", timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Note: LM Studio through its Python SDK" in proc.stdout
    assert "drafted runs (from LM Studio's fragments)" in proc.stdout
    data = json.loads(results.read_text())
    assert data["settings"]["lmstudio_client"] == "sdk"
    rows = {r["draft_max"]: r for r in data["results"]}
    for k in (2, 4):
        row = rows[k]
        assert row["status"] == "ok" and row["speculation_active"] is True and row["draft"] == "0.5B"
        # the default (bracketed) design: a server session per stage, each with its
        # speculation check and warm-up; every measured request is one of the stand-in's predictions, and the
        # row sums the counters of all its requests over the blocks
        truth = [p["truth"] for p in studio.seen("predict") if p["draftModel"] and p["k"] == k]
        told = [(t["accepted"] + t["rejected"], t["accepted"]) for t in truth]
        measured = [(r["draft_n"], r["draft_n_accepted"]) for r in row["requests"]]
        assert len(measured) >= 2 and all(m in told for m in measured)
        drafted, accepted = sum(d for d, _ in measured), sum(a for _, a in measured)
        assert (row["draft_n"], row["draft_n_accepted"]) == (drafted, accepted)
        assert row["acceptance_rate"] == round(accepted / drafted, 4)
        assert row["draft_fragments"]["max_run_tokens"] == k
        assert row["draft_fragments"]["drafted_tokens"] == accepted          # the stand-in's grouping
        assert row["server"]["version"] == "lmstudio SDK 1.5.0"
    assert rows[None]["draft_fragments"] is None and rows[None]["requests"][0]["draft_fragments"] is None
    assert studio.loaded() == {}


def test_server_cli_loads_through_the_sdk_and_unloads_on_ctrl_c(lm_studio, tmp_path):
    studio = lm_studio()
    code, text = interrupt_server_cli("lm-studio", "--model", TARGET, "--draft-model", DRAFT, "--port",
                                      str(studio.port), "--client", "sdk", "--log", str(tmp_path / "cli.log"))
    assert code == 0, text
    assert "Command: llm.load_new_instance" in text and "Speculative decoding: active" in text
    assert "Server stopped" in text and studio.loaded() == {}
    missing = run_cli("server.py", "lm-studio", "--model", TARGET, "--client", "nonsense", timeout=60)
    assert missing.returncode == 2 and "--client" in missing.stderr


def test_the_example_configs_validate():
    from draftbench.sweep.config_file import load_config

    from helpers import REPO
    sdk = load_config(REPO / "configs" / "example_lmstudio_sdk.json")
    assert sdk.settings.backend.lmstudio_client == "sdk" and sdk.draft_max_values == (2, 4, 8)
    assert load_config(REPO / "configs" / "example_lmstudio.json").settings.backend.lmstudio_client == "rest"


def test_candidates_set_k_and_p_min_per_request_and_a_clamped_k_is_said(lm_studio, tmp_path):
    """A candidate sweeps p-min through the SDK; an LM Studio that applies another k than asked is
    named in the row (the stand-in caps k at 4 like an app setting would)."""
    studio = lm_studio(FAKE_LMSTUDIO_MAX_K="4")
    config = {"name": "lmstudio-sdk-candidates", "backend": "lmstudio",
              "targets": [{"label": "7B", "path": TARGET}], "drafts": [{"label": "0.5B", "path": DRAFT}],
              "candidates": [{"label": "0.5B tuned", "draft": "0.5B",
                              "params": {"draft_max": 8, "draft_p_min": [0.5, 0.95], "min_draft_length": 1}}],
              "settings": {"lmstudio_port": studio.port, "runs": 1, "warmup": 0, "max_tokens": 16,
                           "prompts": ["code"], "design": "sequential"}}     # one server per row
    path = tmp_path / "candidates.json"
    path.write_text(json.dumps(config))
    results = tmp_path / "out.json"
    proc = run_cli("sweep.py", "--config", str(path), "--results", str(results), "--no-chart", timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "applying k=4 although draftbench asked for k=8" in proc.stdout
    rows = {r["draft"]: r for r in json.loads(results.read_text())["results"] if r["role"] == "speculative"}
    assert set(rows) == {"0.5B", "0.5B tuned draft_p_min=0.5", "0.5B tuned draft_p_min=0.95"}
    for label, p_min in (("0.5B tuned draft_p_min=0.5", 0.5), ("0.5B tuned draft_p_min=0.95", 0.95)):
        row = rows[label]
        assert row["status"] == "ok" and row["draft_max"] == 8
        assert row["candidate"]["params"] == {"draft_max": 8, "draft_p_min": p_min, "min_draft_length": 1}
        assert any("applying k=4" in w["message"] for w in row["warnings"])
        assert all(r["draft_details"]["num_draft_tokens_exact"] == 4 for r in row["requests"])
    asked = {(p["k"], p["p_min"], p["min_draft_length"]) for p in studio.seen("predict") if p["draftModel"]}
    assert asked == {(4, None, 0), (4, 0.5, 1), (4, 0.95, 1)}      # k as applied: the stand-in capped 8
    assert rows["0.5B tuned draft_p_min=0.5"]["draft_n"] > 0
    # p-min 0.95 stops every draft before its first token (the stand-in's confidences start at 0.9):
    # measured as never drafting, so not a speed-up, and the finding names p-min
    strict = rows["0.5B tuned draft_p_min=0.95"]
    assert strict["draft_n"] == 0 and strict["speculation_active"] is False
    assert strict["draft_fragments"]["runs"] == 0
    assert any(w["code"] == "never_drafted" and "p-min" in w["message"] for w in strict["warnings"])
    assert not any("applying k=" in w["message"] for w in rows["0.5B"]["warnings"])   # no k asked: nothing to say


def test_candidate_parameters_are_checked_for_the_path_in_use():
    base = {"name": "x", "backend": "lmstudio", "targets": [{"label": "t", "path": TARGET}],
            "drafts": [{"label": "d", "path": DRAFT}]}
    backend = LMStudioBackend()

    def problems(params, **settings):
        config = validate_config({**base, "settings": settings,
                                  "candidates": [{"label": "c", "draft": "d", "params": params}]})
        return [(p.path, p.message) for p in backend.validate_candidates(config.specs(), config.settings)]

    assert problems({"draft_max": [2, 4], "draft_p_min": 0.5, "min_draft_length": 2}) == []
    assert problems({"ngram_n": 3, "draft_p_min": 1.5, "min_draft_length": 0.5}) == [
        ("$.candidates[0].params.ngram_n", "is not a parameter LM Studio's SDK sets per request"),
        ("$.candidates[0].params.draft_p_min", "must be a probability from 0 to 1 (or a list of them)"),
        ("$.candidates[0].params.min_draft_length", "must be a whole number from 0 to 256 (or a list of them)")]
    (rest,) = problems({"draft_max": 4}, lmstudio_client="rest")
    assert rest[0] == "$.candidates[0].params" and "REST API" in rest[1]
