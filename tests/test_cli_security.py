"""Security: secrets never recorded, servers not exposed by accident, never benchmark a stranger.

Through the real CLIs and the real llama-server where it matters (an API key it enforces, a
server bound to all addresses). The identity check's 401 case uses a small local HTTP server:
that is a stranger on the port, which the real llama-server we start can never be.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from draftbench.backends.base import Launched, LaunchSpec
from draftbench.backends.llamacpp.backend import LlamaCppBackend, LlamaCppServer
from draftbench.common.errors import ServerError

from helpers import interrupt_server_cli, llama_server_pids, run_cli, tiny_gguf
from test_cli_sweep_cli_config_errors import tripwire  # noqa: F401  (fixture)
from test_results_file_hostile import assert_clean_error

SECRET = "sekrit-0123456789"


def everything_written(folder: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


@pytest.mark.llama
@pytest.mark.parametrize("secret", [SECRET, "-" + SECRET])       # a key may start with '-' (issue 36)
def test_an_api_key_in_extra_args_is_used_and_masked_everywhere(models, tmp_path, secret):
    from test_cli_sweep_cli_llama import write_config
    config = write_config(tmp_path, models, drafts=(), runs=1, max_tokens=8, prompts=["code"], warmup=0,
                          extra_args=["--api-key", secret])
    results = tmp_path / "r.json"
    proc = run_cli("sweep.py", "--config", str(config), "--results", str(results))
    assert proc.returncode == 0, proc.stdout + proc.stderr     # our own requests carried the key
    data = json.loads(results.read_text())
    [row] = data["results"]
    assert row["status"] == "ok" and row["mean_tps"] > 0
    command = row["server"]["command"]
    assert command[command.index("--api-key") + 1] == "***"
    assert data["settings"]["extra_args"] == ["--api-key", "***"]
    assert data["config"]["measurement"]["extra_args"] == ["--api-key", "***"]
    log = next((tmp_path / "r.logs").iterdir()).read_text(errors="replace")
    assert log.startswith("$ ") and "--api-key ***" in log.splitlines()[0]
    written = everything_written(tmp_path).replace(config.read_text(), "")   # the config itself holds it
    assert SECRET not in written and SECRET not in proc.stdout + proc.stderr
    assert "'***'" not in proc.stdout        # the command printed to be run names a variable instead
    # resuming compares masked with masked: the same command is not "a different config"
    again = run_cli("sweep.py", "--config", str(config), "--results", str(results), "--no-chart", timeout=120)
    assert again.returncode == 0 and "1 done, 0 remaining" in again.stdout, again.stdout + again.stderr


@pytest.mark.parametrize("settings, where, cause", [
    ({"extra_args": ["--host", "0.0.0.0"]}, "$.settings.extra_args[0]", "settings.allow_remote"),
    ({"host": "0.0.0.0"}, "$.settings.host", "settings.allow_remote"),
    ({"extra_args": ["--port", "8081"]}, "$.settings.extra_args[0]", "sets --port"),
])
def test_sweep_refuses_exposure_and_port_in_extra_args(tmp_path, tripwire, settings, where, cause):  # noqa: F811
    exe, marker = tripwire
    config = {"name": "x", "hardware": "h", "targets": [{"label": "T", "path": "t.gguf"}],
              "settings": {"llama_bin": str(exe), **settings}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    proc = run_cli("sweep.py", "--config", str(path), timeout=60)
    assert_clean_error(proc, 2, where, cause)
    assert not marker.exists()


def test_allow_remote_lets_it_through_with_a_warning(tmp_path, tripwire):  # noqa: F811
    exe, _ = tripwire
    config = {"name": "x", "hardware": "h", "targets": [{"label": "T", "path": "t.gguf",
                                                         "extra_args": ["--host", "0.0.0.0"]}],
              "settings": {"llama_bin": str(exe), "allow_remote": True}}
    tiny_gguf(tmp_path / "t.gguf")        # the dry run checks the model file
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    proc = run_cli("sweep.py", "--config", str(path), "--dry-run", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Warning: $.targets[0].extra_args[0]: the server will listen on 0.0.0.0" in proc.stdout


@pytest.mark.parametrize("args, message", [
    (["--host", "0.0.0.0"], "--host: makes the server listen on 0.0.0.0"),
    (["--", "--host", "0.0.0.0"], "argument 1 after --: makes the server listen on 0.0.0.0"),
    (["--", "-t", "2", "--port=9"], "argument 3 after --: sets --port"),
])
def test_server_cli_refuses_exposure_without_allow_remote(models, args, message):
    before = llama_server_pids()
    proc = run_cli("server.py", "llama-cpp", "--model-path", models["target-2x"], "--port", "0", *args, timeout=60)
    assert_clean_error(proc, 2, message)
    assert llama_server_pids() == before


def test_server_cli_accepts_allow_remote_after_the_backend_name_too(tmp_path):
    proc = run_cli("server.py", "llama-cpp", "--model-path", str(tmp_path / "missing.gguf"), "--host", "0.0.0.0",
                   "--allow-remote", timeout=60)
    assert_clean_error(proc, 2, "does not exist")            # past the exposure check, stopped at the model
    assert "Warning: --host: the server will listen on 0.0.0.0" in proc.stdout


@pytest.mark.llama
def test_server_cli_allow_remote_warns_and_masks_the_key(models):
    code, out = interrupt_server_cli("--allow-remote", "llama-cpp", "--model-path", models["target-2x"], "--port",
                                     "0", "--gpu-layers", "0", "--ctx-size", "512", "--", "--host", "0.0.0.0",
                                     "--api-key", SECRET)
    assert code == 0, out
    assert "Warning: argument 1 after --: the server will listen on 0.0.0.0" in out
    assert '--api-key "${DRAFTBENCH_API_KEY:?' in out and SECRET not in out


def test_a_401_from_props_is_not_our_server(http_stub):
    # a server on our port that wants a key we do not have
    stranger = http_stub({"GET /health": (200, {"status": "ok"}), "GET *": (401, {"error": {"code": 401}})})
    process = SimpleNamespace(alive=lambda: True, returncode=None, log_path="unused.log")
    server = LlamaCppServer(stranger.url, launched=Launched(process))   # type: ignore[arg-type]
    spec = LaunchSpec(target="/models/ours.gguf", port=stranger.port)
    with pytest.raises(ServerError) as info:
        LlamaCppBackend()._verify_identity(server, spec)
    assert info.value.kind == "foreign" and "not as the llama-server we started" in info.value.message


def test_a_server_that_echoes_its_key_has_it_masked_in_every_log_line_we_show(tmp_path):
    from draftbench.lifetime.process import ManagedProcess
    log = tmp_path / "server.log"
    proc = ManagedProcess([sys.executable, "-c", "import sys; print('args:', sys.argv[1:])", "--api-key", SECRET],
                          log)
    try:
        proc.popen.wait(timeout=30)
    finally:
        proc.stop()
    assert log.read_text().splitlines()[0].endswith("--api-key ***")      # our header line
    assert SECRET not in log.read_text()                                  # the server's own words, masked as written
    assert SECRET not in proc.log_tail() and "'***'" in proc.log_tail()   # what results and errors show
