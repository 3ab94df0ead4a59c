"""No server outlives the sweep, however it was launched: a ``llama_bin`` that double-forks with
``setsid`` (tests/fakes/daemon_server.py) is found and stopped — by the supervisor as a child
subreaper (Linux), or by the port we told the server to use (the fallback elsewhere, forced here with
DRAFTBENCH_SUBREAPER=0) — and a leftover of ours is named as ours, never "another program".
The last test puts the real llama-server behind a wrapper that starts it with ``setsid -f``. Linux
only: the tests read process states from /proc.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from draftbench.backends.base import LaunchSpec
from draftbench.backends.llamacpp.backend import LlamaCppBackend
from draftbench.lifetime import escaped
from draftbench.lifetime import pid_files as pidfiles
from draftbench.lifetime.process import ManagedProcess, free_port, port_is_free
from draftbench.lifetime.supervisor import SUBREAPER_ENV

from helpers import REPO, default_settings, run_cli, servers_on_port, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads process states from /proc")

DAEMON = REPO / "tests" / "fakes" / "daemon_server.py"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """A cache of its own (PID files); afterwards, whatever a failed test left running is killed."""
    monkeypatch.setenv("DRAFTBENCH_CACHE", str(tmp_path / "cache"))
    yield tmp_path / "cache"
    for pid_file in tmp_path.glob("*.pid"):
        try:
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def running(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def daemon_command(tmp_path: Path, port: int) -> list[str]:
    return [sys.executable, str(DAEMON), "-m", str(tmp_path / "t.gguf"), "--port", str(port)]


def daemon_env(tmp_path: Path, mode: str, subreaper: str = "1") -> dict:
    return dict(os.environ, DAEMON_MODE=mode, DAEMON_PID_DIR=str(tmp_path), **{SUBREAPER_ENV: subreaper})


def escaped_pid(tmp_path: Path, port: int) -> int:
    pid_file = tmp_path / f"{port}.pid"
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip() and not port_is_free("127.0.0.1", port),
             timeout=60)
    return int(pid_file.read_text())


@pytest.mark.parametrize("subreaper", ["1", "0"], ids=["subreaper", "port-fallback"])
def test_a_server_that_left_its_process_group_is_stopped_with_it(tmp_path, subreaper):
    port = free_port()
    proc = ManagedProcess(daemon_command(tmp_path, port), tmp_path / "server.log", env=daemon_env(tmp_path, "stay",
                                                                                                  subreaper), port=port)
    try:
        pid = escaped_pid(tmp_path, port)
        assert os.getpgid(pid) != proc.pid          # it really escaped the server's group
    finally:
        proc.stop(grace_s=1)
    assert not running(pid)
    assert port_is_free("127.0.0.1", port)
    log = (tmp_path / "server.log").read_text()
    assert f"pid {pid}" in log and ("left its process group" in log)


def test_a_server_that_daemonises_is_stopped_and_the_log_says_why(tmp_path):
    port = free_port()
    proc = ManagedProcess(daemon_command(tmp_path, port), tmp_path / "server.log", env=daemon_env(tmp_path, "leave"),
                          port=port)
    try:
        assert proc.exited_within(60)
        assert proc.returncode == 0
    finally:
        proc.stop(grace_s=1)
    pid_file = tmp_path / f"{port}.pid"
    if pid_file.exists() and pid_file.read_text().strip():
        assert not running(int(pid_file.read_text()))
    assert port_is_free("127.0.0.1", port)
    log = (tmp_path / "server.log").read_text()
    assert "exited with code 0 but left 1 process(es) running outside its process group" in log
    assert "runs in the foreground" in log


def test_a_leftover_that_escaped_is_named_as_ours(tmp_path):
    """draftbench and its supervisor died (SIGKILL), the server's launcher too, its escaped server still
    listens: the next run names it as a server of an earlier run (with its pid and the command that
    stops it), not as "another program"."""
    port = free_port()
    cmd = daemon_command(tmp_path, port)
    launcher = subprocess.Popen(cmd, env=daemon_env(tmp_path, "leave"))
    assert launcher.wait(timeout=60) == 0
    pid = escaped_pid(tmp_path, port)
    try:
        gone = subprocess.Popen(["true"])
        gone.wait()
        assert pidfiles.record(port, launcher.pid, cmd, gone.pid, ["python", "-c", "supervisor"]) is not None
        leftovers = pidfiles.find_leftovers()
        assert [(r.pid, r.port) for r in leftovers] == [(pid, port)]
        with pytest.raises(pidfiles.LeftoverServerError) as err:
            pidfiles.check_no_leftovers()
        assert f"pid {pid}" in err.value.message and f"kill {pid}" in err.value.fix
    finally:
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not running(pid), timeout=30)
    assert pidfiles.find_leftovers() == []      # gone: the PID file is stale now and removed


def test_a_foreign_listener_is_never_taken_for_ours(tmp_path):
    port = free_port()
    other = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    try:
        wait_for(lambda: not port_is_free("127.0.0.1", port), timeout=60)
        assert other.pid in escaped.port_holders(port)
        assert not escaped.is_our_server(other.pid, daemon_command(tmp_path, port))
    finally:
        other.kill()
        other.wait()


def test_a_sweep_with_a_double_forking_llama_bin_reuses_its_port(models, tmp_path):
    """The day it was found: "Server stopped", the escaped server kept the port, and the next combination
    reported it as "port 8080 is in use by another program". Now every combination gets the same port."""
    launcher = tmp_path / "llama-server-wrapper"
    launcher.write_text(f"#!/bin/sh\nexec {sys.executable} {DAEMON} \"$@\"\n")
    launcher.chmod(0o755)
    port = free_port()
    config = tmp_path / "c.json"
    config.write_text(json.dumps({
        "name": "daemon", "hardware": "h", "targets": [{"label": "A", "path": models["base"]},
                                                       {"label": "B", "path": models["target-2x"]}],
        "settings": {"llama_bin": str(launcher), "port": port, "runs": 1, "stages": 1, "max_tokens": 4, "prompts": ["code"],
                     "warmup": 0, "method_stats": False}}))
    results = tmp_path / "r.json"
    proc = run_cli("sweep.py", "--config", str(config), "--results", str(results), "--no-chart",
                   env={"DAEMON_MODE": "stay", "DAEMON_PID_DIR": str(tmp_path)})
    out = proc.stdout + proc.stderr
    assert "another program" not in out, out
    rows = json.loads(results.read_text())["results"]
    assert [r["server"]["port"] for r in rows] == [port, port], out
    assert all(r["status"] == "ok" for r in rows), out
    for pid_file in tmp_path.glob("*.pid"):
        assert not running(int(pid_file.read_text()))
    assert port_is_free("127.0.0.1", port)


@pytest.mark.llama
@pytest.mark.parametrize("subreaper", ["1", "0"], ids=["subreaper", "port-fallback"])
def test_the_real_llama_server_behind_a_setsid_wrapper_is_stopped(models, llama_bin, tmp_path, monkeypatch,
                                                                    subreaper):
    monkeypatch.setenv(SUBREAPER_ENV, subreaper)
    wrapper = tmp_path / "llama-server-setsid"
    wrapper.write_text(f"""#!/bin/sh
case " $* " in *" --help "*|*" --version "*) exec {llama_bin} "$@";; esac
setsid -f {llama_bin} "$@"     # the server in a session of its own: it escapes the group we stop
exec sleep 3600
""")
    wrapper.chmod(0o755)
    port = free_port()
    spec = LaunchSpec(target=models["base"], port=port, ctx_size=512, gpu_layers=0, startup_timeout_s=300,
                      settings=default_settings(llama_bin=str(wrapper), method_stats=False),
                      log_path=str(tmp_path / "server.log"))
    server = LlamaCppBackend().launch(spec)
    try:
        ours = servers_on_port(port)
        assert len(ours) == 1 and os.getpgid(ours[0]) != server.pid     # it escaped, and it is the one we measure
    finally:
        server.stop()
    assert not running(ours[0])
    assert port_is_free("127.0.0.1", port)
