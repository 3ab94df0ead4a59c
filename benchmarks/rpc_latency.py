#!/usr/bin/env python3
"""Speed-up of speculative decoding vs the link latency to llama.cpp's RPC servers, on one machine.

    python benchmarks/rpc_latency.py [--delays 0,0.5,2] [--rounds 4] [--max-tokens 32] [--threads 1]

A cluster's link is simulated: every RPC connection goes through a small asyncio TCP relay on
loopback (in a process of its own) that holds each chunk for D ms in each direction before passing
it on. Three llama-servers
stay loaded, each with its target split over two ggml-rpc-servers of its own (a ggml-rpc-server
serves one client at a time): the baseline (target alone), the draft kept here ("local", the
draftbench placement: ``-devd none``), and the draft split over the RPC devices ("rpc"). Requests
then go round robin: for each round and each delay (the delays' order rotates every round), one
request to each server in alternating order, so every comparison is made at the same moment and
the machine's drift falls on both sides. The relay's delay is changed between blocks while every
connection stays up.

Printed per delay: the nominal delay, the delay the relays achieved (mean hold per chunk), the round
trip a draftbench probe measures through a relay at the start of each block (to a seventh
ggml-rpc-server that no llama-server holds), each server's median decode tok/s (its own timings),
and each draft's speed-up over the baseline with a 95% CI over the rounds (paired by round).

Each llama-server gets ``-t 1 -td 1`` (``--threads``): on a small machine that also runs the RPC
servers, llama-server's default thread pool competes with them for the cores (a local draft ran at
2.4 tok/s instead of 16 on 2 shared cores); a real cluster's main host does not share its cores.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import selectors
import socket
import statistics
import sys
import tempfile
import threading
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from draftbench.analysis.stats import describe_speedup, speedup
from draftbench.backends.base import LaunchSpec, Server
from draftbench.backends.llamacpp.backend import LlamaCppBackend
from draftbench.backends.llamacpp.command import find_llama_server
from draftbench.backends.llamacpp.rpc import probe_endpoint
from draftbench.backends.llamacpp.rpc_server import find_rpc_server, start_rpc_server
from draftbench.backends.llamacpp.settings import LlamaCppSettings
from draftbench.common.errors import DraftbenchError
from draftbench.common.files import cache_dir
from draftbench.config.prompts import BUILTIN_PROMPTS
from draftbench.config.settings import Settings
from draftbench.lifetime.process import free_port
from draftbench.measure.sequential import MeasureOptions, run_prompts


class DelayRelay:
    """A loopback TCP relay to ``upstream`` that holds every chunk ``delay_s`` seconds, in each direction,
    keeping the order. Its event loop runs on a thread of its own with a select() selector, whose
    time-outs have microsecond resolution (epoll's are whole milliseconds: 0.5 ms would become 1)."""

    def __init__(self, upstream_port: int, delay_s: float = 0.0):
        self.upstream_port = upstream_port
        self.delay_s = delay_s
        self.held_s: list[float] = []          # how long each chunk was actually held
        self.loop = asyncio.SelectorEventLoop(selectors.SelectSelector())
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._client, "127.0.0.1", 0), self.loop).result(10)
        self.port = self.server.sockets[0].getsockname()[1]

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        for w in (writer, up_writer):
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        except asyncio.CancelledError:     # close(): end quietly (a stream callback reads this task's outcome)
            writer.close()
            up_writer.close()

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue = asyncio.Queue()

        async def deliver() -> None:
            try:
                while True:
                    read_at, due, data = await queue.get()
                    if data is None:
                        break
                    wait = due - self.loop.time()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    sink.write(data)
                    await sink.drain()
                    self.held_s.append(self.loop.time() - read_at)
            except (ConnectionError, OSError):
                pass
            finally:
                sink.close()

        sender = asyncio.ensure_future(deliver())
        try:
            while data := await source.read(1 << 16):
                now = self.loop.time()
                queue.put_nowait((now, now + self.delay_s, data))
        except (ConnectionError, OSError):
            pass
        queue.put_nowait((0.0, 0.0, None))
        await sender

    async def _shutdown(self) -> None:
        self.server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def _serve_relays(upstream_ports: list[int], conn) -> None:
    """The relays' process: one relay per upstream port; obeys ("delay", s), ("held",) and ("stop",)."""
    relays = [DelayRelay(port) for port in upstream_ports]
    conn.send([relay.port for relay in relays])
    while True:
        command = conn.recv()
        if command[0] == "delay":
            for relay in relays:
                relay.delay_s, relay.held_s = command[1], []
            conn.send(None)
        elif command[0] == "held":
            conn.send([h for relay in relays for h in relay.held_s])
        else:
            for relay in relays:
                relay.close()
            conn.send(None)
            return


class RelayProcess:
    """The relays run in a process of their own: in the benchmark's process, the client's threads would hold
    the interpreter lock while a chunk waits, and every chunk would be held longer than asked."""

    def __init__(self, upstream_ports: list[int]):
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve_relays, args=(upstream_ports, child), daemon=True)
        self.process.start()
        self.ports: list[int] = self.conn.recv()

    def set_delay(self, delay_s: float) -> None:
        self.conn.send(("delay", delay_s))
        self.conn.recv()

    def held_s(self) -> list[float]:
        self.conn.send(("held",))
        return self.conn.recv()

    def close(self) -> None:
        if self.process.is_alive():
            self.conn.send(("stop",))
            self.conn.recv()
        self.process.join(10)


def start_llama(binary: str, target: str, draft: str | None, placement: str | None, endpoints: list[str],
                threads: int, logs: Path) -> Server:
    port = free_port()
    settings = Settings(llama_bin=binary, backend=LlamaCppSettings(method_stats=False))
    spec = LaunchSpec(target=target, draft=draft, draft_max=4 if draft else None, port=port, ctx_size=1024,
                      gpu_layers=99, settings=settings, startup_timeout_s=600, rpc=tuple(endpoints),
                      draft_placement=placement, extra_args=("-t", str(threads), "-td", str(threads)),
                      log_path=str(logs / f"llama-server-{port}.log"))
    return LlamaCppBackend().launch(spec)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--delays", default="0,0.5,2", help="milliseconds per direction (default 0,0.5,2)")
    p.add_argument("--rounds", type=int, default=4, help="rounds of one request per server and delay (default 4)")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=1, help="llama-server -t/-td (default 1: see the docstring)")
    models = cache_dir() / "models"
    p.add_argument("--target", default=str(models / "smollm2-target-2x.Q4_1.gguf"))
    p.add_argument("--draft", default=str(models / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    args = p.parse_args()
    try:
        delays = [float(d) for d in args.delays.split(",")]
    except ValueError:
        p.error(f"--delays {args.delays!r}: not a comma-separated list of milliseconds (e.g. 0,0.5,2)")
    if min(delays) < 0 or min(args.rounds, args.max_tokens, args.threads) < 1:
        p.error("--delays must not be negative; --rounds, --max-tokens and --threads must be at least 1")
    for flag, path in (("--target", args.target), ("--draft", args.draft)):
        if not Path(path).is_file():
            p.error(f"{flag} {path}: no such file (make models forges the default one)")
    binary = find_llama_server()
    rpc_bin = find_rpc_server(beside=binary)
    prompts = [pr for pr in BUILTIN_PROMPTS if pr.category in ("code", "json", "list")]
    options = MeasureOptions(runs=1, warmup=0, max_tokens=args.max_tokens)
    roles = {"baseline": (None, None), "local": (args.draft, "local"), "rpc": (args.draft, "rpc")}
    tps: dict[str, dict[float, dict[tuple, float]]] = {r: {d: {} for d in delays} for r in roles}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        logs = Path(tmp)
        # two ggml-rpc-servers per llama-server (each serves one client), and one more that only the probe uses
        rpc_ports = [stack.enter_context(start_rpc_server(rpc_bin, port=0, log_path=str(logs / f"rpc-{i}.log"))).port
                     for i in range(2 * len(roles) + 1)]
        relays = RelayProcess(rpc_ports)
        stack.callback(relays.close)
        endpoints = [f"127.0.0.1:{port}" for port in relays.ports]
        servers: dict[str, Server] = {}
        for i, (role, (draft, placement)) in enumerate(roles.items()):
            servers[role] = stack.enter_context(start_llama(binary, args.target, draft, placement,
                                                            endpoints[2 * i:2 * i + 2], args.threads, logs))
            print(f"{role}: {' '.join(servers[role].command or [])}", flush=True)
        for server in servers.values():          # warm-up, not measured
            run_prompts(server, prompts[:1], replace(options, max_tokens=8))
        held: dict[float, list[float]] = {d: [] for d in delays}
        rtt: dict[float, list[float]] = {d: [] for d in delays}
        rtt_min: dict[float, list[float]] = {d: [] for d in delays}
        for r in range(args.rounds):
            for delay in delays[r % len(delays):] + delays[:r % len(delays)]:
                relays.set_delay(delay / 1000)
                probe = probe_endpoint(endpoints[-1], samples=10)      # the link as a probe sees it now
                if probe.rtt_ms is not None and probe.rtt_min_ms is not None:
                    rtt[delay].append(probe.rtt_ms)
                    rtt_min[delay].append(probe.rtt_min_ms)
                prompt = prompts[r % len(prompts)]
                order = list(roles) if r % 2 == 0 else list(reversed(roles))
                line = []
                for role in order:
                    (record,) = run_prompts(servers[role], [prompt], options)
                    if record.server_decode_tps:
                        tps[role][delay][(prompt.id, r)] = record.server_decode_tps
                    line.append(f"{role} {record.server_decode_tps or 0:.1f}")
                held[delay] += relays.held_s()
                print(f"round {r + 1} delay {delay:g} ms (probe {probe.rtt_ms or 0:.3f} ms, least "
                      f"{probe.rtt_min_ms or 0:.3f}): " + ", ".join(line)
                      + " tok/s", flush=True)
    print("\ndelay per direction (nominal -> held per chunk) | probe round trip: median of the blocks' medians "
          "(smallest) | median tok/s base / local / rpc | "
          "speed-up local draft | speed-up rpc draft")
    for delay in delays:
        mean_held = statistics.mean(held[delay]) * 1000 if held[delay] else float("nan")
        median_rtt = statistics.median(rtt[delay]) if rtt[delay] else float("nan")
        least_rtt = min(rtt_min[delay]) if rtt_min[delay] else float("nan")
        medians = " / ".join(f"{statistics.median(tps[r][delay].values()):.1f}" if tps[r][delay] else "n/a"
                             for r in roles)
        local = speedup(tps["baseline"][delay], tps["local"][delay], noise_floor=0.0)
        remote = speedup(tps["baseline"][delay], tps["rpc"][delay], noise_floor=0.0)
        print(f"{delay:g} ms -> {mean_held:.2f} ms | {median_rtt:.3f} ms ({least_rtt:.3f}) | {medians} | {describe_speedup(local)} | "
              f"{describe_speedup(remote)}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except DraftbenchError as exc:     # no llama-server, no models: its cause and fix in a line or two, not a traceback
        sys.exit(f"Error: {exc}")
