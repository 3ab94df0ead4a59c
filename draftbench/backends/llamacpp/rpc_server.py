"""Starting llama.cpp's own ``ggml-rpc-server`` (``server.py rpc-server``, the tests, benchmarks/rpc_latency.py).

draftbench does not build a distribution of its own: it starts the engine llama.cpp ships, with
the same lifetime guarantees as llama-server (a supervised process group, a PID file per port,
stopped when we exit however we exit). It binds loopback unless the caller names an address.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ...common.errors import BinaryNotFoundError, ServerError, ServerErrorKind
from ...common.files import cache_dir
from ...lifetime.polling import poll
from ...lifetime.process import ManagedProcess, free_port, port_is_free
from ..executables import find_executable
from .builds import cached_bin_dirs
from .rpc import EndpointProbe, probe_endpoint

NAMES = ("ggml-rpc-server", "rpc-server")     # this build's binary; llama.cpp's docs call it rpc-server
DEFAULT_PORT = 50052
_HOW_TO_GET = ("run `make llama-server` in the draftbench folder (builds llama-server and ggml-rpc-server with "
               "GGML_RPC=ON into ~/.cache/draftbench), or set --rpc-bin / $DRAFTBENCH_RPC_SERVER")


def find_rpc_server(explicit: str | None = None, beside: str | None = None) -> str:
    """Locate ggml-rpc-server: an explicit path, $DRAFTBENCH_RPC_SERVER, PATH, beside ``beside`` (a
    llama-server), then our cached builds."""
    folders = ([os.path.dirname(beside)] if beside else []) + list(cached_bin_dirs())
    found = find_executable(NAMES[0], explicit, env_var="DRAFTBENCH_RPC_SERVER", setting="--rpc-bin",
                            how_to_get=_HOW_TO_GET, candidates=tuple(os.path.join(d, n) for d in folders for n in NAMES))
    if found:
        return found
    raise BinaryNotFoundError(f"ggml-rpc-server was not found (searched PATH, beside llama-server and {cache_dir()})",
                              _HOW_TO_GET)


@dataclass
class RpcServer:
    """A ggml-rpc-server we started; ``stop()`` is idempotent."""

    process: ManagedProcess
    host: str
    port: int
    probe: EndpointProbe

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    def stop(self) -> None:
        self.process.stop()

    def __enter__(self) -> RpcServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_rpc_server(binary: str, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT, log_path: str | None = None,
                     threads: int | None = None, devices: str | None = None, cache: bool = False,
                     startup_timeout_s: float = 60.0) -> RpcServer:
    """Start one ggml-rpc-server and wait until it answers the RPC handshake (port 0: any free port)."""
    if port == 0:
        port = free_port(host)
    elif not port_is_free(host, port):
        raise ServerError(f"port {port} on {host} is already in use by another program",
                          "stop that program, pass another --port, or --port 0 for any free port",
                          kind=ServerErrorKind.PORT_IN_USE)
    cmd = [binary, "--host", host, "--port", str(port)]
    if threads is not None:
        cmd += ["--threads", str(threads)]
    if devices:
        cmd += ["--device", devices]
    if cache:
        cmd.append("--cache")
    log = log_path or str(cache_dir() / "logs" / f"rpc-server-{port}.log")
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    process = ManagedProcess(cmd, log, port=port)
    endpoint = f"{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}"     # a wildcard is reached on loopback

    def answered() -> EndpointProbe | None:
        if not process.alive():
            raise ServerError(f"ggml-rpc-server exited with code {process.returncode} while starting",
                              "see the log lines below (a port in use, or a device it cannot open)",
                              log_tail=process.log_tail(15), log_path=log, kind=ServerErrorKind.SERVER)
        probe = probe_endpoint(endpoint, samples=3, timeout_s=2.0)
        return probe if probe.reachable else None

    try:
        probe = poll(answered, startup_timeout_s)
        if probe is None:
            raise ServerError(f"ggml-rpc-server did not answer on {endpoint} within {startup_timeout_s:g} s",
                              "see its log", log_tail=process.log_tail(15), log_path=log, kind=ServerErrorKind.TIMEOUT)
    except BaseException:
        process.stop()
        raise
    return RpcServer(process=process, host=host, port=port, probe=probe)
