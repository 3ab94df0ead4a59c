"""vLLM's whole process group (API server, engine core, worker) ends with draftbench, on the real vLLM CPU build
(``make vllm``; run by ``make test-vllm``): Ctrl-C of ``server.py``, SIGKILL of ``sweep.py``. On the way, two
more things only a real server shows: ``server.py vllm --method ngram`` speculates (its /metrics counts
drafts) and a sweep's baseline does not (no spec_decode counter at all). Two server loads (2–3 minutes each).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest
import requests
from draftbench.lifetime.process import free_port

from helpers import REPO, read_until, start_server_cli, wait_for
from test_backends_vllm_real import LOAD_S, MAX_TOKENS, process_titles, shared_memory
from test_lifetime import assert_group_gone_within, group_members

pytestmark = [pytest.mark.vllm,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads process groups from /proc")]

API_SERVER = b"vllm.entrypoints.openai.api_server"


def _vllm_server_pids(port: int) -> list[int]:
    """vLLM API servers (python -m vllm.entrypoints.openai.api_server) started with --port PORT; not the
    supervisor, whose command line holds the server's after its own."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            args = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if args[1:3] == [b"-m", API_SERVER] and b"--port" in args and \
                args[args.index(b"--port") + 1] == str(port).encode():
            found.append(int(entry))
    return found


def test_server_cli_runs_ngram_and_ctrl_c_ends_every_vllm_process(vllm_cpu, tmp_path):
    """`python server.py vllm --method ngram` starts the real server, says speculation is active and how to
    measure it; Ctrl-C leaves nothing of vLLM's process group."""
    port = free_port()
    proc = start_server_cli("vllm", "--model", vllm_cpu.target, "--method", "ngram", "--num-speculative-tokens",
                            "3", "--max-model-len", "1024", "--port", str(port), "--vllm-bin", vllm_cpu.python,
                            "--startup-timeout", str(LOAD_S), "--log", str(tmp_path / "server.log"), "--",
                            *vllm_cpu.cpu_args)
    try:
        text = read_until(proc, "Press Ctrl-C", timeout=LOAD_S + 60)
        assert "Speculative decoding: active" in text, text
        assert '"method":"ngram"' in text and f"--backend vllm --model {vllm_cpu.target}" in text
        (pid,) = _vllm_server_pids(port)
        assert {"VLLM::EngineCore", "VLLM::Worker"} <= process_titles(group_members(pid))
        mapped = shared_memory(group_members(pid))
        # a repetitive prompt, so the n-gram lookup finds something to propose
        requests.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=300, json={
            "model": vllm_cpu.target, "max_tokens": MAX_TOKENS, "temperature": 0.0, "messages": [
                {"role": "user", "content": "Repeat exactly: alpha beta gamma delta alpha beta gamma delta alpha "
                 "beta gamma delta"}]}).raise_for_status()
        metrics = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
        assert "vllm:spec_decode_num_drafts_total" in metrics       # ngram speculation is configured and counted
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0 and "Server stopped" in out, out
        assert_group_gone_within(pid, 5, "after Ctrl-C of server.py")
        assert mapped and not [path for path in mapped if os.path.exists(path)], "shared memory left behind"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigkill_of_a_sweep_leaves_no_vllm_process_and_the_baseline_does_not_speculate(vllm_cpu, tmp_path):
    """A sweep's baseline server, proven not to speculate (its /metrics has no spec_decode counters) while a
    request is in flight; then SIGKILL of sweep.py: the API server, engine core and worker all go."""
    port = free_port()
    config = {"name": "vllm-kill", "hardware": "test", "backend": "vllm", "model_family": "SmolLM2 (forged)",
              "targets": [{"label": "target-2x", "path": vllm_cpu.target}],
              "drafts": [{"label": "135M", "path": vllm_cpu.draft}],      # bracketed: the baseline's server first
              "settings": {"vllm_bin": vllm_cpu.python, "runs": 1, "warmup": 0, "max_tokens": 200, "port": port,
                           "ctx_size": 1024, "prompts": ["prose"], "startup_timeout_s": LOAD_S,
                           "extra_args": list(vllm_cpu.cpu_args)}}
    path = tmp_path / "kill.json"
    path.write_text(json.dumps(config))
    output = tmp_path / "sweep.out"
    with open(output, "wb") as out:
        sweep = subprocess.Popen([sys.executable, str(REPO / "sweep.py"), "--config", str(path), "--results",
                                  str(tmp_path / "killed.json"), "--no-chart"], cwd=str(REPO), stdout=out,
                                 stderr=subprocess.STDOUT)
    try:
        def in_flight() -> str | None:
            assert sweep.poll() is None, f"sweep.py exited ({sweep.returncode}):\n{output.read_text()}"
            try:
                text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
            except requests.RequestException:
                return None
            running = re.search(r"^vllm:num_requests_running\{[^}]*\} ([0-9.]+)", text, re.MULTILINE)
            return text if running and float(running.group(1)) > 0 else None

        metrics = wait_for(in_flight, timeout=LOAD_S, interval=0.5)
        assert "vllm:spec_decode" not in metrics        # the baseline: no speculation configured, none counted
        (pid,) = _vllm_server_pids(port)
        assert b"--speculative-config" not in open(f"/proc/{pid}/cmdline", "rb").read()
        assert {"VLLM::EngineCore", "VLLM::Worker"} <= process_titles(group_members(pid))
        mapped = shared_memory(group_members(pid))
        sweep.kill()
        sweep.wait()
        assert_group_gone_within(pid, 15, "after SIGKILL of sweep.py")
        # vLLM's resource tracker unlinks them once the engine is gone, if it is let finish (the supervisor waits
        # for what is left in the group before killing it: without that, ~400 MB stayed in /dev/shm per server)
        wait_for(lambda: not [path for path in mapped if os.path.exists(path)], timeout=10)
        assert mapped
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
