"""Issue 36, RPC endpoints: a slow-loris endpoint (a byte every few seconds) cannot hold the config check past the
probe's deadline; an endpoint that answered the probe and then hangs is blamed for a llama-server that never became
ready, not the load; ports in ASCII digits only (the config's rpc list; `--rpc` after -- in test_config_extra_args_hostile)."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
from draftbench.backends.llamacpp import rpc
from draftbench.backends.llamacpp.rpc import CONN_CAPS_SIZE, probe_endpoint, rpc_startup_timeout
from draftbench.common.errors import ServerError, ServerErrorKind

from test_backends_llamacpp_rpc import config, problems
from test_backends_llamacpp_rpc_llama import rpc_servers  # noqa: F401  (fixture)


class Endpoint:
    """``slow``: answers HELLO one byte every ``gap_s``; ``hang_after_probe``: answers the first client as
    ggml-rpc-server does, then accepts the next and never answers (one client at a time, stuck on it)."""

    def __init__(self, mode: str, gap_s: float = 0.4):
        self.mode, self.gap_s = mode, gap_s
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.endpoint = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        clients = 0
        self.sock.settimeout(0.05)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            clients += 1
            with conn:
                if self.mode == "slow" or clients > 1:
                    self.dribble(conn) if self.mode == "slow" else self.stop.wait(30)
                    continue
                conn.recv(9 + CONN_CAPS_SIZE, socket.MSG_WAITALL)
                conn.sendall(struct.pack("<Q", 4 + CONN_CAPS_SIZE) + bytes([7, 0, 0, 0]) + bytes(CONN_CAPS_SIZE))
                while len(conn.recv(9, socket.MSG_WAITALL)) == 9:
                    conn.sendall(struct.pack("<QI", 4, 1))

    def dribble(self, conn):
        answer = struct.pack("<Q", 4 + CONN_CAPS_SIZE) + bytes([7, 0, 0, 0]) + bytes(CONN_CAPS_SIZE)
        for byte in answer:
            if self.stop.wait(self.gap_s):
                return
            try:
                conn.sendall(bytes([byte]))
            except OSError:
                return

    def close(self):
        self.stop.set()
        self.sock.close()


@pytest.fixture
def endpoint():
    made = []

    def make(mode, **kw):
        made.append(Endpoint(mode, **kw))
        return made[-1]
    yield make
    for e in made:
        e.close()


def test_a_slow_loris_endpoint_is_cut_at_the_probes_deadline(endpoint):
    slow = endpoint("slow", gap_s=0.2)           # 36 bytes of HELLO answer: 7 s; the deadline stops it at 1 s
    started = time.perf_counter()
    probe = probe_endpoint(slow.endpoint, timeout_s=0.5, deadline_s=1.0)
    assert not probe.reachable and "too slowly" in probe.error and "deadline" in probe.error
    assert time.perf_counter() - started < 6         # a guard against a hang, not a speed expectation
    assert rpc.PROBE_DEADLINE_S <= 10


def test_an_endpoint_that_hangs_after_the_probe_is_blamed_not_the_load(endpoint):
    hanging = endpoint("hang_after_probe")
    assert probe_endpoint(hanging.endpoint, samples=3).reachable            # before llama-server starts
    # llama-server held it and timed out; stopped now, the endpoint still does not answer
    timeout = ServerError("llama-server did not become ready within 5 s", "raise settings.startup_timeout_s",
                          kind=ServerErrorKind.TIMEOUT)
    with_socket = socket.create_connection(("127.0.0.1", int(hanging.endpoint.rpartition(":")[2])))
    try:
        time.sleep(0.2)           # the endpoint is now stuck on this client, as on llama-server's connection
        blamed = rpc_startup_timeout(timeout, (hanging.endpoint,))
    finally:
        with_socket.close()
    assert blamed.kind == ServerErrorKind.UNREACHABLE and hanging.endpoint in blamed.message
    assert "not on loading" in blamed.message and "startup_timeout_s" not in (blamed.fix or "")


def test_a_healthy_endpoint_is_still_named_before_the_timeout_setting(endpoint):
    from test_backends_llamacpp_rpc import FakeRpcServer
    healthy = FakeRpcServer()
    try:
        err = rpc_startup_timeout(ServerError("llama-server did not become ready within 5 s",
                                              kind=ServerErrorKind.TIMEOUT), (healthy.endpoint,))
    finally:
        healthy.close()
    assert err.kind == ServerErrorKind.TIMEOUT and healthy.endpoint in err.message
    assert err.fix.index("ggml-rpc-server") < err.fix.index("startup_timeout_s")


@pytest.mark.parametrize("endpoint_text", ["127.0.0.1:5²", "127.0.0.1:５００５２", "127.0.0.1:٥٠٠٥٢"])
def test_non_ascii_digits_in_a_port_are_refused_by_name(endpoint_text):
    [p] = problems(config(rpc=(endpoint_text,)))
    assert p.path == "$.targets[0].rpc[0]" and "not only the digits 0-9" in p.message


class WedgingEndpoint:
    """Answers HELLO and DEVICE_COUNT (all a probe sends) as ggml-rpc-server does, one client at a time; on the
    first other command (llama-server loading through it) it wedges for good: that client is never answered,
    and no other is served again."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.endpoint = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        self.wedged = threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        self.sock.settimeout(0.05)
        while not self.stop.is_set() and not self.wedged.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                while len(header := conn.recv(9, socket.MSG_WAITALL)) == 9:
                    cmd, size = struct.unpack("<BQ", header)
                    payload = conn.recv(size, socket.MSG_WAITALL) if size else b""
                    if cmd == rpc.CMD_HELLO and len(payload) == CONN_CAPS_SIZE:
                        conn.sendall(struct.pack("<Q", 4 + CONN_CAPS_SIZE) + bytes([7, 0, 0, 0]) + bytes(CONN_CAPS_SIZE))
                    elif cmd == rpc.CMD_DEVICE_COUNT:
                        conn.sendall(struct.pack("<QI", 4, 1))
                    else:
                        self.wedged.set()
                        self.stop.wait(120)
                        return

    def close(self):
        self.stop.set()
        self.sock.close()


@pytest.mark.llama
def test_a_sweep_blames_an_endpoint_that_answers_the_probes_then_hangs(models, tmp_path):
    import json

    from helpers import run_cli
    wedging = WedgingEndpoint()
    try:
        config = tmp_path / "c.json"
        config.write_text(json.dumps({
            "name": "wedge", "hardware": "h", "targets": [{"label": "T", "path": models["base"],
                                                            "rpc": [wedging.endpoint]}],
            "candidates": [{"label": "ngram", "method": "ngram-mod"}],
            "settings": {"runs": 1, "warmup": 0, "max_tokens": 8, "ctx_size": 512, "prompts": ["code"], "port": 0,
                         "startup_timeout_s": 8}}))
        proc = run_cli("sweep.py", "--config", str(config), "--results", str(tmp_path / "r.json"), "--no-chart",
                       timeout=300, cwd=tmp_path)
    finally:
        wedging.close()
    assert wedging.wedged.is_set(), proc.stdout + proc.stderr          # llama-server got past the probes
    rows = json.loads((tmp_path / "r.json").read_text())["results"]
    assert rows[0]["status"] == "error" and "not on loading" in rows[0]["reason"], rows[0]["reason"]
    assert wedging.endpoint in rows[0]["reason"] and "Traceback" not in proc.stderr


@pytest.mark.llama
def test_server_py_rpc_after_the_double_dash_is_probed_and_passed_first(models, rpc_servers):  # noqa: F811
    from helpers import interrupt_server_cli
    endpoint = rpc_servers().endpoint
    code, out = interrupt_server_cli("llama-cpp", "--model-path", models["base"], "--port", "0", "--gpu-layers", "99",
                                     "--ctx-size", "512", "--", "--rpc", endpoint)
    assert code == 0, out
    command = next(line for line in out.splitlines() if line.startswith("Command: "))
    assert command.split()[2:4] == ["--rpc", endpoint] and command.count("--rpc") == 1     # first, once
