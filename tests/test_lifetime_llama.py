"""The lifetime guarantees with the real llama-server, the portable guard forced (as on macOS/Windows).

SIGKILL of ``sweep.py`` or ``server.py`` in the middle of a request leaves no llama-server and
nothing of its process group after 5 s; a server left over from an earlier run (draftbench and its
supervisor killed together) is named, with the fix, before ``sweep.py`` or ``server.py`` start
anything.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests
from draftbench.lifetime import pid_files as pidfiles
from draftbench.lifetime.process import GUARD_ENV, free_port

from helpers import REPO, llama_server_pids, read_until, run_cli, wait_for
from test_cli_sweep_cli_llama import write_config
from test_lifetime import FAKE_SERVER, assert_group_gone_within, group_members, is_alive, make_leftover
from test_sweep_session_faults import fake_llama_server

pytestmark = [pytest.mark.llama,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads process groups from /proc")]

PORTABLE = {GUARD_ENV: "portable"}


def slot_busy(port: int) -> bool:
    try:
        slots = requests.get(f"http://127.0.0.1:{port}/slots", timeout=1).json()
        return bool(slots[0].get("is_processing"))
    except (requests.RequestException, ValueError, IndexError, KeyError, AttributeError):
        return False


def leader_of_its_group(pid: int) -> int:
    """The server leads a process group of its own: its pgid is its pid."""
    assert pid in group_members(pid), f"llama-server {pid} does not lead its own process group"
    return pid


def test_sigkill_of_sweep_mid_request_leaves_no_server(models, tmp_path):
    config = write_config(tmp_path, models, drafts=("good",), runs=1, max_tokens=400)
    port = json.loads(config.read_text())["settings"]["port"]
    results = tmp_path / "killed.json"
    before = llama_server_pids()
    sweep = subprocess.Popen([sys.executable, str(REPO / "sweep.py"), "--config", str(config), "--results",
                              str(results), "--no-chart"], cwd=str(REPO), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=dict(os.environ, **PORTABLE))
    try:
        # The default (interleaved) design: the stage's baseline server (on the configured port; it warms up
        # first) and the draft's server are up together, requests alternating; both must go when sweep.py is
        # killed.
        def both_up_and_measuring():
            servers = llama_server_pids() - before
            return servers if len(servers) == 2 and slot_busy(port) else None
        servers = wait_for(both_up_and_measuring, timeout=120, interval=0.02)
        assert len(servers) == 2, f"expected the baseline and the candidate server, found {sorted(servers)}"
        groups = {pid: leader_of_its_group(pid) for pid in servers}
        sweep.kill()
        sweep.wait()
        for pid, pgid in groups.items():
            assert_group_gone_within(pgid, 5, f"after SIGKILL of sweep.py (llama-server {pid})")
            assert not is_alive(pid)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    json.loads(results.read_text())   # what was saved before the kill is intact, strict JSON


def test_sigkill_of_server_cli_mid_request_leaves_no_server(models):
    before = llama_server_pids()
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(REPO / "server.py"), "llama-cpp", "--model-path", models["target-2x"],
                             "--draft-path", models["base"], "--port", str(port), "--ctx-size", "1024",
                             "--gpu-layers", "0"], cwd=str(REPO), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONUNBUFFERED="1", **PORTABLE))
    request_done = threading.Event()

    def long_request():
        try:
            requests.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=120, json={
                "messages": [{"role": "user", "content": "Count to a thousand."}], "max_tokens": 2000,
                "stream": True})
        except requests.RequestException:
            pass   # the connection breaks when the server goes: expected
        finally:
            request_done.set()
    try:
        wait_for(lambda: _health(port), timeout=120)
        threading.Thread(target=long_request, daemon=True).start()
        (pid,) = wait_for(lambda: (llama_server_pids() - before) if slot_busy(port) else None, timeout=30,
                          interval=0.02)
        pgid = leader_of_its_group(pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert_group_gone_within(pgid, 5, "after SIGKILL of server.py")
        assert not is_alive(pid)
        assert request_done.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def descendants(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        try:
            kids = [int(k) for k in Path(f"/proc/{frontier.pop()}/task").glob("*/children")
                    for k in k.read_text().split()]
        except (OSError, ValueError):
            continue
        found += kids
        frontier += kids
    return found


@pytest.mark.parametrize("guard", ["portable", "pdeathsig"])
def test_sigkill_of_server_cli_leaves_no_grandchild(models, tmp_path, guard):
    """Issue 11: a server that spawned a helper of its own — SIGKILL of server.py takes both down."""
    fake = fake_llama_server(tmp_path, "stall", name="llama-server", grandchild=True)
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(REPO / "server.py"), "llama-cpp", "--model-path", models["base"],
                             "--llama-bin", str(fake), "--port", str(port)], cwd=str(REPO), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1", **{GUARD_ENV: guard}))
    server = None
    try:
        read_until(proc, "Press Ctrl-C", timeout=60)
        server = next(pid for pid in descendants(proc.pid)   # the fake itself: python running the script
                      if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1:2] == [str(fake).encode()])
        wait_for(lambda: len(group_members(server)) == 2, timeout=10)   # the server and its grandchild
        threading.Thread(target=lambda: _quietly_post(port), daemon=True).start()   # a request that stalls
        proc.kill()
        proc.wait()
        assert_group_gone_within(server, 5, f"after SIGKILL of server.py ({guard})")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if server is not None:
            for pid in group_members(server):
                os.kill(pid, signal.SIGKILL)


def _quietly_post(port: int) -> None:
    try:
        requests.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={"messages": []}, timeout=30)
    except requests.RequestException:
        pass


def _health(port: int) -> bool:
    try:
        return requests.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
    except requests.RequestException:
        return False


def test_a_leftover_llama_server_stops_sweep_and_server_cli_with_the_fix(models, llama_bin, tmp_path, monkeypatch):
    fake = tmp_path / "fake_server.py"
    fake.write_text(FAKE_SERVER)

    def llama(port: int) -> list[str]:
        return [llama_bin, "-m", models["base"], "--host", "127.0.0.1", "--port", str(port), "-c", "512",
                "-ngl", "0", "-np", "1"]
    server_pid, port = make_leftover(tmp_path, fake, command=llama)
    env = {"DRAFTBENCH_CACHE": str(tmp_path / "cache"), "DRAFTBENCH_LLAMA_SERVER": llama_bin}
    try:
        config = write_config(tmp_path, models, drafts=("good",), runs=1)
        results = tmp_path / "never.json"
        sweep = run_cli("sweep.py", "--config", str(config), "--results", str(results), "--no-chart", env=env)
        server = run_cli("server.py", "llama-cpp", "--model-path", models["base"], "--port", str(port), env=env,
                         timeout=60)
    finally:
        os.kill(server_pid, signal.SIGKILL)
    for proc in (sweep, server):
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert proc.stderr.startswith(f"Error: a llama-server from an earlier draftbench run (pid {server_pid}, "
                                      "started "), proc.stderr
        assert f"still holds port {port}" in proc.stderr and f"Fix: stop it with `kill {server_pid}`" in proc.stderr
        assert "Traceback" not in proc.stderr
    assert "Starting server" not in sweep.stdout and not results.exists()   # nothing started, nothing written
    assert "port" not in server.stdout   # refused before "Starting llama-cpp on …"
    wait_for(lambda: not is_alive(server_pid), timeout=5)
    monkeypatch.setenv("DRAFTBENCH_CACHE", env["DRAFTBENCH_CACHE"])
    assert pidfiles.find_leftovers() == []   # the stale PID file goes silently
    assert not list((tmp_path / "cache" / "run").glob("*.json"))
