"""llama.cpp RPC targets without llama-server: config validation, the command, the endpoint probe (against a
stand-in that speaks the RPC protocol), the topology read from real log lines, rows and the report."""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
from pathlib import Path

import pytest
from draftbench.backends import REGISTRY
from draftbench.backends.base import LaunchSpec
from draftbench.backends.llamacpp.command import build_command
from draftbench.backends.llamacpp.rpc import CMD_DEVICE_COUNT, CMD_HELLO, CONN_CAPS_SIZE, device_names, probe_endpoint
from draftbench.backends.llamacpp.topology import model_sections, proven_topology
from draftbench.common.errors import ConfigError, ServerError, ServerErrorKind
from draftbench.config.candidates import expand
from draftbench.report.page import render_report
from draftbench.results.file import ResultsFile, Row
from draftbench.results.schema import first_problem
from draftbench.results.topology import describe
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.plan import plan
from draftbench.sweep.schedule import Design
from draftbench.sweep.target_plan import choose_design

from helpers import default_settings, run_cli

DATA = Path(__file__).resolve().parent / "data" / "rpc"
EP1, EP2 = "127.0.0.1:50911", "127.0.0.1:50912"
CAPS = {"flags": ["-m", "-md", "--spec-type", "--spec-draft-n-max", "-np", "--metrics", "-ngld", "-devd", "--rpc",
                  "-lv"], "version": "x", "binary": "/bin/llama-server"}


def config(*, rpc=(EP1, EP2), backend="llamacpp", **settings) -> dict:
    target = {"label": "70B split", "path": "/m/t.gguf"}
    if rpc is not None:
        target["rpc"] = rpc if isinstance(rpc, str) else list(rpc)
    return {"name": "rpc", "backend": backend, "targets": [target, {"label": "7B here", "path": "/m/s.gguf"}],
            "drafts": [{"label": "1B", "path": "/m/d.gguf"}], "settings": {"port": 0, **settings}}


def problems(data) -> list:
    with pytest.raises(ConfigError) as info:
        validate_config(data)
    for p in info.value.problems:
        assert p.path.startswith("$") and p.message and p.fix, p
    return info.value.problems


# --------------------------------------------------------------------------- config

def test_rpc_targets_and_placements_become_candidates_of_the_same_sweep():
    cfg = validate_config(config(draft_placement=["local", "rpc"], draft_max=4))
    assert cfg.targets[0].rpc == (EP1, EP2) and cfg.targets[1].rpc == ()
    combos = [(c.target.label, c.candidate.label if c.candidate else None) for c in plan(cfg)]
    # both placements on the split target; the target without endpoints gets the local draft only
    assert combos == [("70B split", None), ("70B split", "1B placement=local"), ("70B split", "1B placement=rpc"),
                      ("7B here", None), ("7B here", "1B placement=local")]
    local = next(c for c in plan(cfg) if c.candidate and c.candidate.draft_placement == "local")
    assert local.candidate.settings_params == {}        # a device choice, never a --spec-* flag
    assert local.key != next(c for c in plan(cfg) if c.candidate and c.candidate.draft_placement == "rpc").key


def test_one_placement_is_still_named_in_the_label():
    cfg = validate_config(config(draft_placement="rpc"))
    assert [c.label for spec in cfg.specs() for c in expand(spec)] == ["1B placement=rpc"]


@pytest.mark.parametrize("entry, fragment", [
    (["localhost"], "not host:port"),
    (["127.0.0.1:0"], "not host:port"),
    (["127.0.0.1:70000"], "not host:port"),
    (["[::1]:50052"], "IPv6"),
    ([EP1, EP1], "second time"),
    ([], "non-empty list"),
    ("127.0.0.1:50052", "non-empty list"),
    ([50052], "host:port"),
])
def test_bad_endpoints_are_named(entry, fragment):
    found = problems(config(rpc=entry))
    assert any(fragment in p.message and p.path.startswith("$.targets[0].rpc") for p in found), found


def test_a_remote_endpoint_needs_allow_remote_and_quotes_the_readme():
    remote = ("10.0.0.7:50052",)
    found = problems(config(rpc=remote))
    assert found[0].path == "$.targets[0].rpc[0]" and "proof-of-concept" in found[0].message
    assert "settings.allow_remote" in found[0].fix
    cfg = validate_config(config(rpc=remote, allow_remote=True))
    assert cfg.targets[0].rpc == remote
    assert any("Never run the RPC server on an open network" in w.message for w in cfg.warnings)


def test_rpc_settings_that_cannot_apply_are_refused():
    assert "only a target" in problems({**config(), "drafts": [{"label": "1B", "path": "/m/d.gguf",
                                                              "rpc": [EP1]}]})[0].message
    assert any("cannot split" in p.message for p in problems(config(backend="vllm")))
    assert "keeps every layer" in problems(config(gpu_layers=0))[0].message
    assert "no target" in problems(config(rpc=None, draft_placement="rpc"))[0].message
    assert "not a draft placement" in problems(config(draft_placement="gpu"))[0].message
    assert "more than once" in problems(config(draft_placement=["rpc", "rpc"]))[0].message
    assert problems(config(extra_args=["--rpc", EP1]))[0].path == "$.settings.extra_args[0]"
    bad_param = {**config(), "candidates": [{"label": "c", "draft": "1B", "params": {"draft_placement": "far"}}]}
    assert any(p.path == "$.candidates[0].params.draft_placement" for p in problems(bad_param))


def test_design_auto_brackets_a_split_target_and_interleaves_the_one_here():
    """Two llama-servers cannot share a ggml-rpc-server (it serves one client at a time): issue 23's
    interleaved design failed every candidate of a split target on the RPC handshake."""
    cfg = validate_config(config())
    on_cpu = cfg.settings.with_values(gpu_layers=0)        # the target here fits twice: it would be interleaved
    for target, expected in (("70B split", Design.BRACKETED), ("7B here", Design.INTERLEAVED)):
        mine = [c for c in plan(cfg) if c.target.label == target]
        baseline = next(c for c in mine if c.candidate is None)
        design, why = choose_design(on_cpu, REGISTRY["llamacpp"], baseline, [c for c in mine if c.candidate])
        assert design is expected, why
        assert ("RPC endpoints" in why) is (expected is Design.BRACKETED)
    assert problems(config(design="interleaved"))[0].path == "$.settings.design"     # asked for in the config


def test_design_interleaved_asked_on_the_command_line_for_a_split_target_is_refused(tmp_path):
    path = tmp_path / "rpc.json"
    path.write_text(json.dumps(config()))
    proc = run_cli("sweep.py", "--config", str(path), "--design", "interleaved", "--dry-run", timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("Error: --design interleaved"), proc.stderr
    assert "serves one at a time" in proc.stderr and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- command

def spec(**kw) -> LaunchSpec:
    base = dict(target="/m/t.gguf", draft="/m/d.gguf", draft_max=4, port=8080, ctx_size=512, gpu_layers=99,
                settings=default_settings(method_stats=False), rpc=(EP1, EP2))
    base.update(kw)
    return LaunchSpec(**base)


def test_command_puts_rpc_first_and_places_the_draft():
    names = {EP1: ["RPC0"], EP2: ["RPC1", "RPC2"]}
    cmd = build_command("/bin/llama-server", CAPS, spec(draft_placement="rpc"), rpc_devices=names)
    # --rpc registers the devices that -devd names, so it must come first
    assert cmd[1:3] == ["--rpc", f"{EP1},{EP2}"]
    assert cmd[cmd.index("-devd") + 1] == "RPC0,RPC1,RPC2"
    assert cmd[cmd.index("-lv") + 1] == "4"          # the buffer sizes that prove the split are logged at 4
    local = build_command("/bin/llama-server", CAPS, spec(draft_placement="local"), rpc_devices=names)
    assert local[local.index("-devd") + 1] == "none"      # no GPU here: the draft runs on this CPU
    on_gpu = build_command("/bin/llama-server", CAPS, spec(draft_placement="local"), rpc_devices=names, local=["CUDA0"])
    assert on_gpu[on_gpu.index("-devd") + 1] == "CUDA0"
    default = build_command("/bin/llama-server", CAPS, spec(), rpc_devices=names)
    assert "-devd" not in default
    plain = build_command("/bin/llama-server", CAPS, spec(rpc=()))
    assert "--rpc" not in plain and "-lv" not in plain


def test_a_build_without_rpc_is_named():
    caps = dict(CAPS, flags=[f for f in CAPS["flags"] if f != "--rpc"])
    with pytest.raises(ServerError, match="without RPC support") as info:
        build_command("/bin/llama-server", caps, spec())
    assert info.value.kind is ServerErrorKind.FLAGS


def test_device_names_count_across_endpoints():
    from draftbench.backends.llamacpp.rpc import EndpointProbe
    probes = [EndpointProbe(EP1, True, devices=2), EndpointProbe(EP2, True, devices=1)]
    assert device_names(probes) == {EP1: ["RPC0", "RPC1"], EP2: ["RPC2"]}


# --------------------------------------------------------------------------- the probe

class FakeRpcServer:
    """Speaks HELLO and DEVICE_COUNT as ggml-rpc-server (protocol 7) does, one client at a time; or
    ``silent`` (accepts, never answers: busy with another client) or ``old`` (closes on HELLO)."""

    def __init__(self, mode: str = "ok", devices: int = 2):
        self.mode, self.devices = mode, devices
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.endpoint = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        self.sock.settimeout(0.05)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                self.client(conn)

    def client(self, conn):
        if self.mode == "silent":
            self.stop.wait(5)
            return
        header = conn.recv(9, socket.MSG_WAITALL)
        if len(header) < 9:
            return              # a connection that only measured the TCP handshake
        cmd, size = struct.unpack("<BQ", header)
        if self.mode == "old" or cmd != CMD_HELLO or size != CONN_CAPS_SIZE:
            return
        conn.recv(size, socket.MSG_WAITALL)
        conn.sendall(struct.pack("<Q", 4 + CONN_CAPS_SIZE) + bytes([7, 0, 0, 0]) + bytes(CONN_CAPS_SIZE))
        while len(header := conn.recv(9, socket.MSG_WAITALL)) == 9:
            if struct.unpack("<BQ", header) != (CMD_DEVICE_COUNT, 0):
                return
            conn.sendall(struct.pack("<QI", 4, self.devices))

    def close(self):
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
def fake_rpc(request):
    servers = []

    def start(mode="ok", devices=2):
        servers.append(FakeRpcServer(mode, devices))
        return servers[-1]
    yield start
    for s in servers:
        s.close()


def test_probe_times_protocol_round_trips(fake_rpc):
    probe = probe_endpoint(fake_rpc(devices=3).endpoint, samples=5)
    assert probe.reachable and probe.method == "rpc" and probe.protocol == "7.0.0" and probe.devices == 3
    assert probe.samples == 5 and 0 < probe.rtt_min_ms <= probe.rtt_ms


def test_probe_names_a_dead_a_busy_and_an_older_endpoint(fake_rpc):
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    dead = f"127.0.0.1:{port.getsockname()[1]}"
    port.close()
    assert "connection refused" in probe_endpoint(dead).error
    busy = probe_endpoint(fake_rpc("silent").endpoint, timeout_s=0.3)
    assert not busy.reachable and "one at a time" in busy.error
    older = probe_endpoint(fake_rpc("old").endpoint, samples=4)
    assert older.reachable and older.method == "tcp-connect" and "handshake failed" in older.error


# --------------------------------------------------------------------------- the split, from the log

def test_topology_from_real_log_lines():
    text = (DATA / "draft-rpc.log").read_text()
    target, draft_section = model_sections(text)
    assert target.path == "/m/target-2x.gguf" and target.offloaded == "61/61"
    assert target.on_endpoints() == {EP1: 65.53, EP2: 89.99} and target.local_mib() == 28.69
    assert [d["name"] for d in target.devices] == ["RPC0", "RPC1"] and draft_section.path == "/m/draft-135m.gguf"
    topology, notes = proven_topology(text, target="/m/target-2x.gguf", draft="/m/draft-135m.gguf",
                                      endpoints=(EP1, EP2), placement="rpc")
    assert topology["split_proven"] and notes == []
    assert topology["draft"]["on_endpoints_mib"] == {EP1: 33.82, EP2: 58.28}
    assert "65.5 MiB on 127.0.0.1:50911" in describe(topology) and "draft (rpc)" in describe(topology)
    local, _ = proven_topology((DATA / "draft-local.log").read_text(), target="/m/target-2x.gguf",
                               draft="/m/draft-135m.gguf", endpoints=(EP1, EP2), placement="local")
    assert local["draft"]["on_endpoints_mib"] == {} and local["draft"]["local_mib"] == 92.1


def test_a_split_that_did_not_happen_is_an_error():
    text = (DATA / "draft-local.log").read_text()
    with pytest.raises(ServerError, match="asked to run on the RPC devices"):
        proven_topology(text, target="/m/target-2x.gguf", draft="/m/draft-135m.gguf", endpoints=(EP1, EP2),
                        placement="rpc")
    with pytest.raises(ServerError, match="asked to run here"):
        proven_topology((DATA / "draft-rpc.log").read_text(), target="/m/target-2x.gguf",
                        draft="/m/draft-135m.gguf", endpoints=(EP1, EP2), placement="local")
    kept_here = "\n".join(line for line in text.splitlines() if "RPC0[" not in line)
    with pytest.raises(ServerError, match="none of the target"):
        proven_topology(kept_here, target="/m/target-2x.gguf", draft=None, endpoints=(EP1, EP2), placement=None)
    with pytest.raises(ServerError, match="cannot prove"):
        proven_topology("listening on http://127.0.0.1:1", target="/m/target-2x.gguf", draft=None,
                        endpoints=(EP1,), placement=None)
    _, notes = proven_topology(text, target="/m/target-2x.gguf", draft=None, endpoints=(EP1, EP2, "127.0.0.1:1"),
                               placement=None)
    assert notes == [notes[0]] and "holds nothing on RPC endpoint 127.0.0.1:1" in notes[0]


def test_rows_keep_the_topology_and_the_report_shows_it():
    topology, _ = proven_topology((DATA / "draft-rpc.log").read_text(), target="/m/target-2x.gguf",
                                  draft="/m/draft-135m.gguf", endpoints=(EP1, EP2), placement="rpc")
    topology["endpoints"] = [{"endpoint": EP1, "rtt_ms": 0.025, "method": "rpc", "device_names": ["RPC0"]}]
    rows = (Row(target="T", mean_tps=10.0, role="baseline", topology=topology),
            Row(target="T", draft="1B placement=rpc", role="speculative", mean_tps=12.0, topology=topology))
    results = ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="f", settings={}, results=rows)
    data = results.to_dict()
    assert first_problem(data) is None
    assert data["results"][1]["topology"]["target"]["on_endpoints_mib"][EP1] == 65.53
    page = render_report(results)
    assert 'id="topology-table"' in page and "127.0.0.1:50911 0.025 ms" in page and "rpc: 33.8 MiB on" in page
    data["results"][0]["topology"]["endpoints"][0]["rtt_ms"] = "fast"
    assert first_problem(data)[0] == "$.results[0].topology.endpoints[0].rtt_ms"


def test_server_cli_refuses_an_open_address_without_allow_remote():
    proc = run_cli("server.py", "rpc-server", "--host", "0.0.0.0", "--port", "0", timeout=60)
    assert proc.returncode == 2 and "--allow-remote" in proc.stderr and "Traceback" not in proc.stderr


def test_the_latency_benchmark_relay_holds_every_chunk(fake_rpc):
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from rpc_latency import DelayRelay
    relay = DelayRelay(int(fake_rpc().endpoint.rpartition(":")[2]), delay_s=0.002)
    try:
        probe = probe_endpoint(relay.endpoint, samples=3)
        assert probe.reachable and probe.devices == 2           # the protocol passes through unchanged
        assert probe.rtt_min_ms >= 4.0                           # 2 ms each way, at least
        assert relay.held_s and min(relay.held_s) >= 0.002
    finally:
        relay.close()


def test_a_results_file_resumes_only_on_the_same_split(tmp_path):
    from draftbench.backends import get_backend
    from draftbench.common.errors import ResultsFileError
    from draftbench.sweep.resume import check_resumable, config_snapshot
    backend = get_backend("llamacpp")
    before = validate_config(config())
    existing = ResultsFile(name=before.name, hardware=before.hardware, backend=before.backend, model_family="",
                           settings={}, config=config_snapshot(before, backend))
    assert first_problem(existing.to_dict()) is None
    check_resumable(existing, validate_config(config()), backend, tmp_path / "r.json")      # same split: fine
    with pytest.raises(ResultsFileError, match=re.escape("split over 127.0.0.1:50911 now, 127.0.0.1:50911, 127.0.0.1:50912")):
        check_resumable(existing, validate_config(config(rpc=(EP1,))), backend, tmp_path / "r.json")
