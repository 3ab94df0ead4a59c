"""Faults and bad input: nothing lost, nothing left running, never the wrong server.

The real llama-server is used wherever it can show the fault (crash, Ctrl-C, busy port,
broken model files). A small fake server stands in only for misbehaviour the real one
cannot produce on demand: never becoming ready, and a stream that stalls.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from helpers import REPO, llama_server_pids, run_cli, saved_rows, wait_for
from test_cli_sweep_cli_llama import write_config

pytestmark = pytest.mark.llama

FAKE_SERVER = '''#!{python}
# Stand-in for llama-server that misbehaves on purpose (mode: {mode}).
import sys, time
sys.path.insert(0, {tests!r})
from fakes.http_stub import StubServer
args = sys.argv[1:]
if "--help" in args:
    print("  -m, --model FNAME\\n  --port PORT\\n  --host HOST\\n  -c, --ctx-size N\\n  -ngl N\\n  -np, --parallel N")
    sys.exit(0)
if "--version" in args:
    print("version: fake")
    sys.exit(0)
port, model = int(args[args.index("--port") + 1]), args[args.index("-m") + 1]
ready = "{mode}" != "never-ready"
speculating = "-md" in args      # as the real one: /slots says speculative only where a draft was loaded
if {grandchild}:
    import subprocess
    subprocess.Popen(["sleep", "600"])   # a helper process of its own

def stall(call):
    call.start_events()
    call.event({{"choices": [{{"delta": {{"content": "Hi"}}}}]}})
    time.sleep(3600)

StubServer({{"GET /health": (200 if ready else 503, {{"status": "ok" if ready else "loading"}}),
            "GET /props": (200, {{"model_path": model, "build_info": "fake"}}),
            "GET *": (200, [{{"speculative": speculating}}]), "POST *": stall}}, port=port).serve_forever()
'''


def fake_llama_server(folder: Path, mode: str, *, name: str | None = None, grandchild: bool = False) -> Path:
    """An executable stand-in for llama-server: ``never-ready`` or ``stall`` (one token, then silence)."""
    path = folder / (name or f"fake-llama-server-{mode}")
    path.write_text(FAKE_SERVER.format(python=sys.executable, mode=mode, tests=str(Path(__file__).parent),
                                       grandchild=grandchild))
    path.chmod(0o755)
    return path


def fake_pids(path: Path) -> set[int]:
    out = subprocess.run(["pgrep", "-f", str(path)], capture_output=True, text=True)
    return {int(p) for p in out.stdout.split()}


def start_sweep(config: Path, results: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(REPO / "sweep.py"), "--config", str(config), "--results",
                             str(results), "--no-chart"], cwd=str(REPO), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))


def test_server_killed_mid_request(models, tmp_path):
    config = write_config(tmp_path, models, drafts=("good", "bad"), runs=1, max_tokens=96)
    results = tmp_path / "crash.json"
    before = llama_server_pids()
    sweep = start_sweep(config, results)
    try:
        # The default design runs the baseline server (on the configured port) beside each candidate's:
        # the victim is the first candidate's server ("good": it has -md) while it answers a request.
        def busy_candidate():
            for pid in llama_server_pids() - before:
                try:
                    args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
                    if "-md" not in args:
                        continue
                    slots = requests.get(f"http://127.0.0.1:{args[args.index('--port') + 1]}/slots", timeout=1).json()
                    if slots[0].get("is_processing"):
                        return {pid}
                except (OSError, requests.RequestException, ValueError, IndexError, KeyError):
                    continue
            return False
        victims = wait_for(busy_candidate, timeout=600, interval=0.02)      # bounds against a hang, not speed
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        out, _ = sweep.communicate(timeout=900)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 3, out
    rows = saved_rows(results)
    by_draft = {r["draft"]: r for r in rows}
    # baseline measured, crash recorded, sweep went on (rows are in the order they were first recorded)
    assert [by_draft[d]["status"] for d in (None, "135M Q4_1", "57M trunc8")] == ["ok", "error", "ok"]
    crashed = by_draft["135M Q4_1"]
    assert "the server died during the benchmark (exit code -9)" in crashed["reason"]
    assert crashed["server"]["log_tail"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_mid_sweep_stops_everything_and_keeps_rows(models, tmp_path, sig):
    # Two drafts: the second one's server runs after the first one's rows are saved, whatever the stages decide
    # (with one draft a quiet machine could decide after one stage, and no server ran once a row was saved).
    config = write_config(tmp_path, models, drafts=("good", "bad"), runs=1)
    results = tmp_path / "sig.json"
    before = llama_server_pids()
    sweep = start_sweep(config, results)
    try:
        wait_for(lambda: len(saved_rows(results)) >= 1 and (llama_server_pids() - before), timeout=600)
        sent = time.monotonic()
        sweep.send_signal(sig)
        out, _ = sweep.communicate(timeout=15)
        wait_for(lambda: not (llama_server_pids() - before), timeout=5)
        assert time.monotonic() - sent < 5, "the server must be gone within 5 s"
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 130, out
    assert "Resume with the same command" in out
    rows = saved_rows(results)  # valid JSON, every completed row present
    assert rows and rows[0]["status"] == "ok"
    resumed = run_cli("sweep.py", "--config", str(config), "--results", str(results), "--no-chart")
    # Rows are measured in stages: the resume finishes the stage the signal cut, and measures nothing twice.
    assert resumed.returncode == 0 and f"Resuming {results}" in resumed.stdout, resumed.stdout
    for row in saved_rows(results):
        assert row["status"] == "ok"
        # a stage's baseline server answers each prompt once beside each candidate's server
        measured = [(r["run"], r["prompt_id"], r["block"], r["session"], r.get("beside")) for r in row["requests"]]
        assert len(set(measured)) == len(measured)
        by_stage: dict[int, set[str]] = {}
        for r in row["requests"]:
            by_stage.setdefault(r["block"], set()).add(r["prompt_id"])
        assert by_stage and all(len(p) == row["design"]["per_stage"] for p in by_stage.values())


def test_busy_port_moves_to_a_free_one_and_never_benchmarks_the_foreign_server(models, tmp_path, http_stub):
    foreign = http_stub({"*": (200, {"status": "ok"})})
    port = foreign.port
    config = write_config(tmp_path, models, drafts=(), runs=1, port=port, prompts=["code"])
    results = tmp_path / "port.json"
    proc = run_cli("sweep.py", "--config", str(config), "--results", str(results), "--no-chart")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"port {port} is in use by another program; using port" in proc.stdout
    row = saved_rows(results)[0]
    assert row["status"] == "ok" and row["server"]["port"] != port
    assert foreign.seen == []


@pytest.mark.parametrize("mode, expected", [("never-ready", "did not become ready within 2 s"),
                                            ("stall", "stalled")])
def test_unresponsive_servers_are_bounded_and_killed(models, tmp_path, mode, expected):
    fake = fake_llama_server(tmp_path, mode)
    # The stall case must reach the stall: on a busy machine the stand-in may take more than 2 s to start.
    config = write_config(tmp_path, models, drafts=("good",), runs=1, llama_bin=str(fake),
                          startup_timeout_s=2 if mode == "never-ready" else 60, stall_timeout_s=1)
    results = tmp_path / f"{mode}.json"
    started = time.monotonic()
    proc = run_cli("sweep.py", "--config", str(config), "--results", str(results), "--no-chart", timeout=120)
    assert time.monotonic() - started < 60
    rows = saved_rows(results)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert rows[0]["status"] == "error" and expected in rows[0]["reason"]
    assert rows[1]["status"] == "skipped" and "baseline" in rows[1]["reason"]  # a failed baseline skips its drafts
    assert not fake_pids(fake), "the unresponsive server must be killed"


def test_broken_model_inputs_are_named_per_combination(models, tmp_path):
    folder_model = tmp_path / "a-folder.gguf"
    folder_model.mkdir()
    config = write_config(tmp_path, models, drafts=("corrupt", "badvocab"), runs=1, prompts=["code"])
    data = json.loads(config.read_text())
    data["drafts"] += [{"label": "folder", "path": str(folder_model)},
                       {"label": "not gguf", "path": models["not-gguf"]}]
    config.write_text(json.dumps(data))
    results = tmp_path / "broken.json"
    proc = run_cli("sweep.py", "--config", str(config), "--results", str(results), "--no-chart")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    rows = {r["draft"]: r for r in saved_rows(results)}
    assert rows[None]["status"] == "ok"
    assert rows["135M corrupt"]["status"] == "error" and "is truncated" in rows["135M corrupt"]["reason"]
    assert rows["folder"]["status"] == "error" and "is a folder" in rows["folder"]["reason"]
    assert rows["not gguf"]["status"] == "error" and "not a GGUF file" in rows["not gguf"]["reason"]
    vocab = rows["135M badvocab"]
    # Caught from the GGUF headers before any server starts: skipped, never measured as speculative.
    assert vocab["status"] == "skipped" and vocab["speculation_active"] is False and "vocabulary" in vocab["reason"]
    summary = json.loads(results.read_text())["summary"]["targets"][0]
    assert summary["recommended_draft"] is None


@pytest.mark.parametrize("executable_file, message", [(False, "llama-server not found at"),
                                                      (True, "is not executable")])
def test_missing_or_non_executable_llama_bin_fails_before_anything_starts(models, tmp_path, executable_file, message):
    binary = tmp_path / "llama-server"
    if executable_file:
        binary.write_text("#!/bin/sh\n")  # exists, but without the executable bit
    config = write_config(tmp_path, models, drafts=("good",), llama_bin=str(binary))
    results = tmp_path / "never.json"
    proc = run_cli("sweep.py", "--config", str(config), "--results", str(results), "--no-chart")
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: ") and message in proc.stderr and "Fix:" in proc.stderr
    assert not results.exists() and "Starting server" not in proc.stdout


@pytest.mark.parametrize("content, message", [
    ("{ not json", "is not valid JSON (line 1"),
    ('{"something": "else"}', "is not a draftbench results file"),
    ('{"schema_version": 99, "results": []}', "written by a newer draftbench"),
    ('{"schema_version": 1, "tool": "othertool", "results": []}', "was written by 'othertool'"),
    ('{"name": "x", "results": []}', "written by upstream draftbench"),
])
def test_unusable_results_files_are_refused_and_left_untouched(models, tmp_path, content, message):
    config = write_config(tmp_path, models, drafts=())
    results = tmp_path / "existing.json"
    results.write_text(content)
    proc = run_cli("sweep.py", "--config", str(config), "--results", str(results), "--no-chart")
    assert proc.returncode == 1, proc.stdout
    assert message in proc.stderr and "Fix:" in proc.stderr
    assert results.read_text() == content


def test_results_from_another_config_are_refused(models, tmp_path):
    config = write_config(tmp_path, models, drafts=(), runs=1, prompts=["code"])
    results = tmp_path / "mine.json"
    assert run_cli("sweep.py", "--config", str(config), "--results", str(results), "--no-chart").returncode == 0
    data = json.loads(config.read_text())
    data["settings"]["max_tokens"] = 64
    config.write_text(json.dumps(data))
    before = results.read_text()
    proc = run_cli("sweep.py", "--config", str(config), "--results", str(results), "--no-chart")
    assert proc.returncode == 1
    assert "made with a different config: settings.max_tokens 16 vs 64" in proc.stderr
    assert results.read_text() == before


def test_no_shell_true_anywhere():
    sources = list((REPO / "draftbench").rglob("*.py")) + [REPO / n for n in ("bench.py", "server.py", "sweep.py")]
    offenders = [str(p) for p in sources if "shell=True" in p.read_text()]
    assert not offenders


def test_ctrl_c_mid_step_keeps_every_finished_request_and_the_resume_measures_only_the_rest(models, tmp_path):
    """Issue 44: a sweep interrupted after 7 of 12 requests of a step kept none of them. Every request is saved
    as it finishes; the resumed sweep measures only the prompts still owed, on fresh servers, every pair whole."""
    from test_cli_sweep_cli_llama import write_config as sweep_config
    config = sweep_config(tmp_path, models, drafts=("good",), stages=1, prompts_per_stage=4, max_tokens=32,
                          prompts=["code", "json", "list", "prose"])
    results = tmp_path / "kept.json"
    before = llama_server_pids()
    sweep = start_sweep(config, results)

    def candidate(rows: list[dict]) -> list[dict]:
        return next((r["requests"] for r in rows if r["draft"] == "135M Q4_1"), [])
    try:
        wait_for(lambda: 1 <= len(candidate(saved_rows(results))) < 4, timeout=600, interval=0.02)
        sweep.send_signal(signal.SIGINT)
        out, _ = sweep.communicate(timeout=60)
        wait_for(lambda: not (llama_server_pids() - before), timeout=5)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 130, out
    kept = candidate(saved_rows(results))
    assert 1 <= len(kept) < 4, "the step was cut: what it measured is kept, the rest is not"
    resumed = run_cli("sweep.py", "--config", str(config), "--results", str(results), "--no-chart")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    rows = saved_rows(results)
    final, base = candidate(rows), next(r["requests"] for r in rows if r["draft"] is None)
    assert final[: len(kept)] == kept                                  # kept as measured
    assert sorted(r["prompt_id"] for r in final) == sorted({r["prompt_id"] for r in final}) and len(final) == 4
    assert not {r["session"] for r in final[len(kept):]} & {r["session"] for r in kept}    # the rest on fresh servers
    measured = {(r["prompt_id"], r["session"]) for r in base if r["block"] == 0 and r["error"] is None}
    assert all(any((r["prompt_id"], s) in measured for s in r["compared_with"]) for r in final)   # every pair whole
