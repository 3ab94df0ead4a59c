"""The target split over two real ggml-rpc-servers on loopback, through the sweep users run: the split is
proven and recorded, speculation is active on it, a dead endpoint stops the sweep before anything starts,
and an endpoint that dies mid-row ends that row (recorded, resumable), never the sweep.

Few tokens and one prompt per row: the machine has two shared cores, and these tests check mechanisms."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from draftbench.backends.llamacpp.rpc import probe_endpoint
from draftbench.backends.llamacpp.rpc_server import find_rpc_server, start_rpc_server
from draftbench.lifetime.process import GUARD_ENV, free_port
from draftbench.sweep.config_file import load_config
from draftbench.sweep.console import Reporter
from draftbench.sweep.session import Sweep

from helpers import REPO, llama_server_pids, read_until, run_cli, start_server_cli, started_by_this_session
from test_lifetime import assert_group_gone_within

pytestmark = pytest.mark.llama


@pytest.fixture
def rpc_servers(llama_bin, tmp_path):
    """Start ggml-rpc-servers on loopback (``start(port=0)``); all are stopped after the test."""
    binary = find_rpc_server(beside=llama_bin)
    started = []

    def start(port: int = 0):
        server = start_rpc_server(binary, port=port, log_path=str(tmp_path / f"rpc-{len(started)}.log"))
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def write_config(folder: Path, models: dict, endpoints: list[str], *, prompts: int = 1, **settings) -> Path:
    prompt_file = folder / "prompts.txt"
    prompt_file.write_text("\n".join(["Write one sentence about the sea.", "Name three colours."][:prompts]) + "\n")
    config = {"name": "rpc", "hardware": "test-2core", "backend": "llamacpp", "model_family": "SmolLM2 (forged)",
              "targets": [{"label": "241M split", "path": models["target-2x"], "rpc": endpoints}],
              "drafts": [{"label": "135M Q4_1", "path": models["base"]}],
              "settings": {"runs": 1, "stages": 1, "warmup": 0, "max_tokens": 8, "ctx_size": 512, "port": 0,
                           "prompts": str(prompt_file), "draft_placement": "rpc", "draft_max": 3, **settings}}
    path = folder / "rpc.json"
    path.write_text(json.dumps(config, indent=2))
    return path


def test_split_over_two_rpc_servers_is_proven_recorded_and_speculates(models, rpc_servers, tmp_path):
    endpoints = [rpc_servers().endpoint, rpc_servers().endpoint]
    results = tmp_path / "out.json"
    config = write_config(tmp_path, models, endpoints, draft_placement=["local", "rpc"])
    proc = run_cli("sweep.py", "--config", str(config), "--results", str(results))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Note: topology: target" in proc.stdout
    baseline, local, speculative = json.loads(results.read_text())["results"]
    for row in (baseline, local, speculative):
        topology = row["topology"]
        assert topology["split_proven"] is True
        assert [e["endpoint"] for e in topology["endpoints"]] == endpoints
        assert all(e["method"] == "rpc" and e["rtt_ms"] > 0 and e["device_names"] for e in topology["endpoints"])
        # llama-server's own buffer sizes: the target's weights on both endpoints
        assert all(topology["target"]["on_endpoints_mib"][e] > 0 for e in endpoints)
        command = row["server"]["command"]       # after the flags standing for the environment (--threads 1)
        assert command[command.index("--rpc"):command.index("--rpc") + 2] == ["--rpc", ",".join(endpoints)]
        assert command.index("--rpc") < command.index("-m")
    assert baseline["topology"]["draft"] is None and baseline["active_methods"] == []
    # two candidates of the same sweep: the draft kept here (nothing of it on the endpoints) and on the RPC devices
    assert local["draft"] == "135M Q4_1 placement=local" and local["speculation_active"] is True
    assert local["topology"]["draft"]["on_endpoints_mib"] == {} and local["topology"]["draft"]["local_mib"] > 0
    assert "-devd" in local["server"]["command"]
    assert speculative["draft"] == "135M Q4_1 placement=rpc" and speculative["speculation_active"] is True
    assert speculative["draft_n"] > 0
    assert speculative["topology"]["draft_placement"] == "rpc"
    assert sum(speculative["topology"]["draft"]["on_endpoints_mib"].values()) > 0
    page = (tmp_path / "out.html").read_text()
    assert 'id="topology-table"' in page and endpoints[0] in page


def test_a_dead_endpoint_is_a_config_error_before_anything_starts(models, rpc_servers, tmp_path):
    alive, dead = rpc_servers().endpoint, f"127.0.0.1:{free_port()}"
    results = tmp_path / "out.json"
    before = llama_server_pids()
    proc = run_cli("sweep.py", "--config", str(write_config(tmp_path, models, [alive, dead])),
                   "--results", str(results), timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "$.targets[0].rpc[1]" in proc.stderr and "connection refused" in proc.stderr
    assert "nothing was started" in proc.stderr and "Traceback" not in proc.stderr
    assert not results.exists() and llama_server_pids() == before


class KillsAnEndpoint(Reporter):
    """Stops one rpc-server after the first request of the speculative row."""

    def __init__(self, victim):
        self.victim, self.title, self.killed = victim, "", False

    def combination_started(self, index, total, title, at_most=False):
        self.title = title

    def request_done(self, done, total):
        if "+" in self.title and not self.killed:
            self.victim.stop()
            self.killed = True


def test_an_endpoint_dying_mid_row_ends_that_row_and_a_resume_measures_it(models, rpc_servers, tmp_path):
    first, second = rpc_servers(), rpc_servers()
    # two prompts: each stage's server (a session of its own; the design is bracketed, as for any split target)
    # sends both, so the endpoint dies between two requests of one session: mid-row, mid-stage
    config = load_config(write_config(tmp_path, models, [first.endpoint, second.endpoint], prompts=2,
                                      control_baseline=True, runs=2))
    results = tmp_path / "out.json"
    reporter = KillsAnEndpoint(second)
    code = Sweep(config, results, None, reporter=reporter).run()
    assert reporter.killed and code == 3                 # finished, with failed rows: the sweep went on
    rows = {r["role"]: r for r in json.loads(results.read_text())["results"]}
    speculative, control = rows["speculative"], rows["control"]
    assert rows["baseline"]["status"] == "ok"
    assert speculative["status"] == "error" and len(speculative["requests"]) >= 1   # what was measured is kept
    assert "an RPC endpoint went away" in speculative["reason"] and "server.py rpc-server" in speculative["reason"]
    assert speculative["topology"]["split_proven"] is True
    # the stage's next baseline server fails fast, before it starts, naming the endpoint: the target ends and the
    # candidate not measured yet is skipped with that reason
    assert control["status"] == "skipped" and second.endpoint in control["reason"]
    assert "connection refused" in control["reason"]
    # the endpoint comes back on the same port: a resume measures exactly the rows that failed
    rpc_servers(port=second.port)
    assert Sweep(config, results, None, reporter=Reporter()).run() == 0
    rows = {r["role"]: r for r in json.loads(results.read_text())["results"]}
    assert all(r["status"] == "ok" for r in rows.values())
    assert rows["speculative"]["speculation_active"] is True



def rpc_server_pids() -> set[int]:
    out = subprocess.run(["pgrep", "-x", "ggml-rpc-server"], capture_output=True, text=True)
    return {int(p) for p in out.stdout.split() if started_by_this_session(int(p))}


def test_server_cli_starts_the_engine_on_loopback_and_stops_it(llama_bin):
    proc = start_server_cli("rpc-server", "--port", "0")
    try:
        text = read_until(proc, "Press Ctrl-C", timeout=120)
        endpoint = re.search(r'"rpc": \["(127\.0\.0\.1:\d+)"\]', text).group(1)
        assert probe_endpoint(endpoint).reachable and rpc_server_pids()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and "ggml-rpc-server stopped" in out
    assert not probe_endpoint(endpoint, timeout_s=1).reachable and not rpc_server_pids()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads process groups from /proc")
@pytest.mark.parametrize("guard", ["pdeathsig", "portable"])
def test_sigkill_of_server_cli_takes_the_rpc_server_with_it(llama_bin, guard):
    """The same lifetime guarantee as llama-server's: nothing of the engine outlives a killed server.py."""
    before = rpc_server_pids()
    proc = subprocess.Popen([sys.executable, str(REPO / "server.py"), "rpc-server", "--port", "0"], cwd=str(REPO),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1", **{GUARD_ENV: guard}))
    try:
        read_until(proc, "Press Ctrl-C", timeout=120)
        (pid,) = rpc_server_pids() - before
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert_group_gone_within(pid, 5, f"after SIGKILL of server.py ({guard})")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
