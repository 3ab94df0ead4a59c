"""bench.py and server.py run as a user runs them, against the real llama-server."""

from __future__ import annotations

import json
import re
import signal
import statistics

import pytest
import requests
from draftbench.lifetime.process import free_port

from helpers import llama_server_pids, read_until, run_cli, start_server_cli, wait_for

pytestmark = pytest.mark.llama

ACCEPTANCE_LINE = re.compile(r"draft acceptance = [0-9.]+ \(\s*(\d+) accepted /\s*(\d+) generated\)")


def test_bench_acceptance_equals_the_servers_counters(start_llama, models, tmp_path):
    server = start_llama(models["target-2x"], models["base"])
    out_json = tmp_path / "bench.json"
    proc = run_cli("bench.py", "--url", server.base_url, "--requests", "3", "--max-tokens", "64",
                   "--json", str(out_json))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out_json.read_text())
    row = data["results"][0]
    # The server logs one "draft acceptance" line per request; the last three are the measured ones
    # (the first is the warm-up, which must not count).
    logged = [tuple(map(int, m)) for m in ACCEPTANCE_LINE.findall(open(server.log_path).read())]
    assert len(logged) == 4
    accepted = sum(a for a, _ in logged[1:])
    drafted = sum(g for _, g in logged[1:])
    assert (row["draft_n_accepted"], row["draft_n"]) == (accepted, drafted)
    assert f"{accepted / drafted:.1%} ({accepted} accepted / {drafted} drafted)" in proc.stdout
    per_request = [(r["draft_n_accepted"], r["draft_n"]) for r in row["requests"]]
    assert per_request == logged[1:]
    assert [sum(r["accepted_per_pos"]) for r in row["requests"]] == [a for a, _ in logged[1:]]
    assert "by draft position  " in proc.stdout and "of verify steps" in proc.stdout
    # Client-side decode rate agrees with the server's own (same interval, two clocks).
    client = statistics.median(r["decode_tps"] for r in row["requests"])
    server_side = statistics.median(r["server_decode_tps"] for r in row["requests"])
    assert abs(client / server_side - 1) < 0.02, (client, server_side)
    # Token counts come from the server, never from counting events.
    assert all(r["completion_tokens"] == 64 for r in row["requests"])


def test_bench_without_a_draft_says_na_not_zero(start_llama, models):
    server = start_llama(models["base"])
    proc = run_cli("bench.py", "--url", server.base_url + "/v1", "--requests", "2", "--max-tokens", "16")
    assert proc.returncode == 0, proc.stderr
    assert "acceptance         n/a" in proc.stdout
    # no acceptance is ever shown as 0% (other figures, such as a CV of 50.0% on a busy machine, may end so)
    acceptance = [line for line in proc.stdout.splitlines() if "acceptance" in line]
    assert acceptance and not any(re.search(r"(?<![\d.])0(\.0+)?%", line) for line in acceptance), acceptance


def test_bench_compare_reports_speedup_and_output_equivalence(start_llama, models, tmp_path):
    base = start_llama(models["target-2x"])
    spec = start_llama(models["target-2x"], models["base"])
    proc = run_cli("bench.py", "--base-url", base.base_url, "--compare-url", spec.base_url, "--label", "alone",
                   "--compare-label", "with draft", "--requests", "2", "--max-tokens", "32", "--api-key", "s3cret",
                   "--json", str(tmp_path / "cmp.json"))
    assert proc.returncode == 0, proc.stderr
    assert "COMPARISON (with draft vs alone)" in proc.stdout
    assert "speed-up" in proc.stdout and "Output     : identical on" in proc.stdout
    text = (tmp_path / "cmp.json").read_text()
    assert "s3cret" not in text  # API keys never reach files
    comparison = json.loads(text)["comparison"]
    assert comparison["equivalence"]["compared"] == 2
    # issue 23: two requests are two different prompts, so the interval averages over prompts (prompts like these)
    assert comparison["speedup"]["method"] == "paired-log-by-prompt" and comparison["speedup"]["n_pairs"] == 2
    assert comparison["speedup"]["prompts"] == 2


def test_bench_unreachable_server_is_a_clear_error():
    port = free_port()
    proc = run_cli("bench.py", "--url", f"http://127.0.0.1:{port}", "--requests", "1")
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: cannot reach")
    assert "Traceback" not in proc.stderr


def _start_server_cli(models, port, *extra):
    return start_server_cli("llama-cpp", "--model-path", models["target-2x"], "--draft-path", models["base"],
                            "--port", str(port), "--ctx-size", "1024", "--gpu-layers", "0", *extra)


@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_server_cli_speculates_and_leaves_nothing_behind(models, how):
    before = llama_server_pids()
    port = free_port()
    proc = _start_server_cli(models, port)
    try:
        out = read_until(proc, "Press Ctrl-C")
        assert "Speculative decoding: active" in out
        assert "--spec-type draft-simple" in out
        child = wait_for(lambda: llama_server_pids() - before, timeout=5)
        response = requests.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=300, json={
            "messages": [{"role": "user", "content": "Say hello"}], "max_tokens": 16, "temperature": 0})
        assert response.json()["timings"]["draft_n"] > 0
        # Ctrl-C stops the server cleanly; even SIGKILL of server.py takes the server down with it.
        proc.send_signal(getattr(signal, how))
        proc.wait(timeout=10)
        wait_for(lambda: not (llama_server_pids() & child), timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_server_cli_refuses_a_busy_port(models):
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        proc = run_cli("server.py", "llama-cpp", "--model-path", models["target-2x"], "--port", str(port),
                       timeout=60)
    assert proc.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in proc.stderr
    assert "--port 0" in proc.stderr


def test_server_cli_bad_model_path_is_named(tmp_path):
    proc = run_cli("server.py", "llama-cpp", "--model-path", str(tmp_path / "missing.gguf"), timeout=60)
    assert proc.returncode == 2
    assert "--model-path: model file" in proc.stderr and "does not exist" in proc.stderr
