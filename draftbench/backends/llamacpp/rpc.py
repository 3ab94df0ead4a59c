"""llama.cpp's RPC endpoints seen from here: is a ``ggml-rpc-server`` there, how far away is it, and
which device names llama-server will give its devices.

The probe speaks the RPC protocol itself (ggml/src/ggml-rpc/ggml-rpc.cpp of the vendored build,
protocol 7): a request is ``cmd (1 byte) | size (8 bytes) | data``, an answer ``size (8 bytes) |
data``, native byte order (little-endian on every platform llama.cpp supports). It sends HELLO
(24 zero bytes of transport capabilities: plain TCP), then times DEVICE_COUNT round trips — the
smallest request there is, so its round trip is the link's latency plus the server's turnaround.

A ``ggml-rpc-server`` serves one client at a time: while a llama-server is connected, a probe's
handshake is not answered. Probes therefore run before llama-server starts, never during a row.
"""

from __future__ import annotations

import socket
import statistics
import struct
import time
from dataclasses import asdict, dataclass

from ...common.errors import ServerError, ServerErrorKind
from ...config.rpc_endpoints import parse_endpoint

CMD_HELLO, CMD_DEVICE_COUNT = 14, 15
CONN_CAPS_SIZE = 24                   # RPC_CONN_CAPS_SIZE (transport.h): RDMA negotiation, zero = TCP
PROBE_SAMPLES = 20
PROBE_TIMEOUT_S = 3.0       # one connect or one wait for bytes
PROBE_DEADLINE_S = 10.0     # the whole probe of one endpoint: a server dribbling a byte every few seconds cannot
                            # hold a config check for minutes (a healthy one answers 20 round trips in milliseconds)


class ProbeFailed(Exception):
    pass


class ProbeTooSlow(ProbeFailed):
    """The endpoint answered, but not all of it before the probe's deadline."""


@dataclass(frozen=True)
class EndpointProbe:
    """What one probe of one endpoint found. Times in milliseconds; None = not measured."""

    endpoint: str
    reachable: bool
    rtt_ms: float | None = None          # median round trip of a DEVICE_COUNT request
    rtt_min_ms: float | None = None
    samples: int = 0
    method: str | None = None            # "rpc" (protocol round trips) or "tcp-connect" (an older protocol)
    protocol: str | None = None          # the server's RPC protocol version, e.g. "7.0.0"
    devices: int | None = None           # devices the server exposes
    error: str | None = None

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "reachable"}

    def describe(self) -> str:
        if not self.reachable:
            return f"{self.endpoint}: {self.error}"
        rtt = f"{self.rtt_ms:.3f} ms round trip" if self.rtt_ms is not None else "round trip not measured"
        return f"{self.endpoint}: {rtt}" + (f", {self.devices} device(s)" if self.devices is not None else "")


def _recv_exact(sock: socket.socket, n: int, deadline: float, wait_s: float) -> bytes:
    """``n`` bytes, each wait at most ``wait_s`` and all of them by ``deadline`` (a perf_counter time)."""
    data = b""
    while len(data) < n:
        left = deadline - time.perf_counter()
        if left <= 0:
            raise ProbeTooSlow(f"{len(data)} of {n} bytes of an answer came before the probe's "
                               f"{PROBE_DEADLINE_S:g} s deadline")
        sock.settimeout(min(wait_s, left))
        try:
            chunk = sock.recv(n - len(data))
        except TimeoutError:
            if left < wait_s:      # the deadline, not the wait, cut it short
                raise ProbeTooSlow(f"{len(data)} of {n} bytes of an answer came before the probe's "
                                   f"{PROBE_DEADLINE_S:g} s deadline") from None
            raise
        if not chunk:
            raise ProbeFailed("the server closed the connection")
        data += chunk
    return data


def _answer(sock: socket.socket, size: int, deadline: float, wait_s: float) -> bytes:
    (got,) = struct.unpack("<Q", _recv_exact(sock, 8, deadline, wait_s))
    if got != size:
        raise ProbeFailed(f"an answer of {got} bytes where {size} were expected (another RPC protocol version?)")
    return _recv_exact(sock, size, deadline, wait_s)


def _connect(host: str, port: int, timeout_s: float) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=timeout_s)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _unreachable(endpoint: str, exc: OSError) -> EndpointProbe:
    if isinstance(exc, ConnectionRefusedError):
        why = "connection refused: no ggml-rpc-server listens there"
    elif isinstance(exc, TimeoutError):
        why = "no answer (timed out): the host is down, or a firewall drops the connection"
    else:
        why = f"cannot connect ({exc.strerror or exc})"
    return EndpointProbe(endpoint, reachable=False, error=why)


def probe_endpoint(endpoint: str, *, samples: int = PROBE_SAMPLES, timeout_s: float = PROBE_TIMEOUT_S,
                   deadline_s: float | None = None) -> EndpointProbe:
    """Connect, shake hands, time ``samples`` DEVICE_COUNT round trips, disconnect, all within ``deadline_s``
    (default :data:`PROBE_DEADLINE_S`). Never raises."""
    parsed = parse_endpoint(endpoint)
    if parsed is None:
        return EndpointProbe(endpoint, reachable=False, error="is not host:port")
    host, port = parsed
    deadline = time.perf_counter() + (PROBE_DEADLINE_S if deadline_s is None else deadline_s)
    try:
        sock = _connect(host, port, timeout_s)
    except OSError as exc:
        return _unreachable(endpoint, exc)
    try:
        with sock:
            sock.sendall(struct.pack("<BQ", CMD_HELLO, CONN_CAPS_SIZE) + bytes(CONN_CAPS_SIZE))
            hello = _answer(sock, 4 + CONN_CAPS_SIZE, deadline, timeout_s)
            protocol = f"{hello[0]}.{hello[1]}.{hello[2]}"
            times, devices = [], None
            for _ in range(samples):
                started = time.perf_counter()
                sock.sendall(struct.pack("<BQ", CMD_DEVICE_COUNT, 0))
                (devices,) = struct.unpack("<I", _answer(sock, 4, deadline, timeout_s))
                times.append((time.perf_counter() - started) * 1000)
    except ProbeTooSlow as exc:
        return EndpointProbe(endpoint, reachable=False, error=f"answers the RPC protocol too slowly ({exc}): it is "
                             "overloaded, on a link that drops most packets, or not a ggml-rpc-server")
    except TimeoutError:
        return EndpointProbe(endpoint, reachable=False, error=f"accepts connections but did not answer the RPC "
                             f"handshake within {timeout_s:g} s: it is serving another client (a ggml-rpc-server "
                             "serves one at a time; is an earlier llama-server still connected?), or it is not a "
                             "ggml-rpc-server")
    except (OSError, ProbeFailed) as exc:
        return _tcp_probe(endpoint, host, port, samples, timeout_s, why=str(exc), deadline=deadline)
    return EndpointProbe(endpoint, reachable=True, rtt_ms=round(statistics.median(times), 4),
                         rtt_min_ms=round(min(times), 4), samples=len(times), method="rpc", protocol=protocol,
                         devices=devices)


def _tcp_probe(endpoint: str, host: str, port: int, samples: int, timeout_s: float, *, why: str,
               deadline: float) -> EndpointProbe:
    """The handshake failed (an older protocol): time TCP connections instead, which the kernel answers."""
    times: list[float] = []
    try:
        for _ in range(max(1, samples // 4)):
            if times and time.perf_counter() > deadline:
                break
            started = time.perf_counter()
            _connect(host, port, timeout_s).close()
            times.append((time.perf_counter() - started) * 1000)
    except OSError as exc:
        return _unreachable(endpoint, exc)
    return EndpointProbe(endpoint, reachable=True, rtt_ms=round(statistics.median(times), 4),
                         rtt_min_ms=round(min(times), 4), samples=len(times), method="tcp-connect",
                         error=f"RPC handshake failed ({why}); the round trip is a TCP connection's")


def device_names(probes: list[EndpointProbe]) -> dict[str, list[str]]:
    """The names llama-server gives the endpoints' devices: ``RPC0``, ``RPC1``, … counted across the
    endpoints in ``--rpc`` order (ggml_backend_rpc_add_server), each endpoint exposing ``devices``."""
    out, index = {}, 0
    for probe in probes:
        count = probe.devices if probe.devices is not None else 1
        out[probe.endpoint] = [f"RPC{index + i}" for i in range(count)]
        index += count
    return out


def reachable_endpoints(endpoints: tuple[str, ...]) -> list[EndpointProbe]:
    """Probe every endpoint; raise :class:`ServerError` naming each one that does not answer (before
    llama-server starts: it aborts on an endpoint it cannot reach)."""
    probes = [probe_endpoint(e) for e in endpoints]
    dead = [p for p in probes if not p.reachable]
    if dead:
        first = dead[0].endpoint.rpartition(":")[2]
        raise ServerError("RPC endpoint " + "; ".join(p.describe() for p in dead),
                          f"start ggml-rpc-server there (on that host: python server.py rpc-server --port {first}) and "
                          "run the same command again: rows that failed are measured then",
                          kind=ServerErrorKind.UNREACHABLE)
    return probes


def rpc_startup_timeout(timeout: ServerError, endpoints: tuple[str, ...]) -> ServerError:
    """A llama-server split over ``endpoints`` never became ready. The endpoints answered the probe before it
    started; one that then stopped answering (a hung or overloaded ggml-rpc-server, a dropped link) holds its
    load for ever, which looks like a slow load. llama-server is stopped by now, so each endpoint should answer
    a probe again: one that does not is named as the cause; otherwise the endpoints are still named first."""
    probes = [probe_endpoint(e) for e in endpoints]
    dead = [p for p in probes if not p.reachable]
    if dead:
        first = dead[0].endpoint.rpartition(":")[2]
        return ServerError(f"{timeout.message}: RPC endpoint " + "; ".join(p.describe() for p in dead)
                           + " (it answered the probe before llama-server started, then stopped answering: llama-server "
                           "waited on it, not on loading)",
                           f"restart ggml-rpc-server there (on that host: python server.py rpc-server --port {first}) "
                           "and check the link to it, then run the same command again",
                           log_tail=timeout.log_tail, log_path=timeout.log_path, kind=ServerErrorKind.UNREACHABLE)
    return ServerError(f"{timeout.message}; its target is split over the RPC endpoints {', '.join(endpoints)}, which "
                       "answer a probe again now that it stopped",
                       "an endpoint that stalls mid-load (overloaded, a link dropping packets) holds llama-server as "
                       "surely as a slow load: check ggml-rpc-server's log on each endpoint; if they are fine, raise "
                       "settings.startup_timeout_s (a large model over the network loads slowly)",
                       log_tail=timeout.log_tail, log_path=timeout.log_path, kind=ServerErrorKind.TIMEOUT)
