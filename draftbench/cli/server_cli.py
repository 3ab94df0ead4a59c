"""``python server.py``: start one inference server the way a sweep would, and keep it up until Ctrl-C."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import replace

from ..backends import REGISTRY, get_backend
from ..backends.base import Backend, LaunchSpec, Server
from ..backends.llamacpp.rpc_server import DEFAULT_PORT, find_rpc_server, start_rpc_server
from ..common.errors import ServerError, ServerErrorKind, UsageError
from ..common.files import cache_dir
from ..common.redact_secrets import shell_line
from ..common.text_safety import safe_text
from ..config.extra_args import (
    bind_host,
    check_server_args,
    host_problems,
    is_loopback,
    split_server_args,
    take_rpc,
)
from ..config.flag_rules import SERVER, EntryPoint
from ..config.rpc_endpoints import README_WARNING
from ..config.settings import DEFAULTS
from ..lifetime.process import free_port, port_is_free, prepare_to_start_servers
from . import run_main


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="server.py", description="Start an inference server for benchmarking "
                                "(stops it on Ctrl-C). Arguments after -- are passed to the server as they are.")
    p.add_argument("--allow-remote", action="store_true", help="allow a --host (here or after --) other than "
                   "loopback: the server is then reachable from other machines")
    names = [backend.name for backend in REGISTRY.values()] + ["rpc-server"]
    sub = p.add_subparsers(dest="backend", required=True, metavar="{" + ",".join(names) + "}")
    for backend in REGISTRY.values():
        parser = sub.add_parser(backend.name, help=f"start {backend.name}")
        backend.add_server_arguments(parser)
        # also accepted after the backend name; SUPPRESS keeps the top-level value when absent here
        parser.add_argument("--allow-remote", action="store_true", default=argparse.SUPPRESS,
                            help="allow a --host (here or after --) other than loopback")
    rpc = sub.add_parser("rpc-server", help="start llama.cpp's ggml-rpc-server (an RPC endpoint for a target split "
                         "over several machines: targets[].rpc)")
    rpc.add_argument("--host", default=DEFAULTS.host, help=f"address to bind (default {DEFAULTS.host}; another address needs "
                     "--allow-remote: the RPC protocol has no authentication)")
    rpc.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 = any free port)")
    rpc.add_argument("--threads", type=int, default=None, help="threads for its CPU device (default: the server's)")
    rpc.add_argument("--device", default=None, help="devices to expose, e.g. CUDA0 (default: all; CPU without any)")
    rpc.add_argument("--cache", action="store_true", help="let it cache large tensors on disk (faster reloads)")
    rpc.add_argument("--rpc-bin", default=None, help="the ggml-rpc-server binary (default: searched beside "
                     "llama-server)")
    rpc.add_argument("--log", default=None, help="its log (default: under ~/.cache/draftbench/logs)")
    rpc.add_argument("--allow-remote", action="store_true", default=argparse.SUPPRESS,
                     help="allow a --host other than loopback")
    return p


def run_rpc_server(args) -> int:
    """``server.py rpc-server``: one ggml-rpc-server, up until Ctrl-C."""
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port} is not a port", "give 1-65535, or 0 for any free port")
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads must be at least 1 (got {args.threads})")
    if not is_loopback(args.host):
        print(safe_text(f"Warning: {README_WARNING}"), flush=True)
    binary = find_rpc_server(args.rpc_bin)
    prepare_to_start_servers()
    where = f"{args.host}:{args.port}" if args.port else f"{args.host} (any free port)"
    print(safe_text(f"Starting ggml-rpc-server on {where} ..."), flush=True)
    server = start_rpc_server(binary, host=args.host, port=args.port, log_path=args.log, threads=args.threads,
                              devices=args.device, cache=args.cache)

    def ready() -> None:
        print(safe_text(f"Ready: {server.probe.describe()} (protocol {server.probe.protocol}); log "
                        f"{server.process.log_path}"), flush=True)
        print(safe_text(f"Use it in a sweep config: \"rpc\": [\"{server.endpoint}\"] in a target entry"), flush=True)
    return serve_until_ctrl_c(ready, server.process.wait, lambda: f"ggml-rpc-server exited by itself (code "
                              f"{server.process.returncode}); last log lines:\n{server.process.log_tail(15)}",
                              server.stop, "ggml-rpc-server stopped")


def serve_until_ctrl_c(ready: Callable[[], None], wait: Callable[[], object], exited: Callable[[], str],
                       stop: Callable[[], None], stopped: str) -> int:
    """Say the started server is ready, keep it up until Ctrl-C (exit 0) or until it exits by itself (exit 1,
    with why); stopped in every case."""
    try:
        ready()
        print("Press Ctrl-C to stop.", flush=True)
        wait()
        print(safe_text(exited()), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nStopping ...", flush=True)
        return 0
    finally:
        stop()
        print(stopped, flush=True)


def _forever() -> None:
    """A server we do not own a process of (LM Studio): only Ctrl-C ends the wait (signal.pause does not exist on
    Windows; sleep is interruptible everywhere)."""
    while True:
        time.sleep(3600)


def check_exposure(args, extra: list[str], entry: EntryPoint) -> list[str]:
    """Hold the arguments after -- to ``entry``'s rules (config/extra_args.py: --port, -m, -md, the draft
    length refused with server.py's own option; --host and --rpc off this machine only with --allow-remote)
    and refuse a non-loopback --host without --allow-remote; return warnings to print."""
    problems, warnings = check_server_args("--", extra, allow_remote=args.allow_remote, entry=entry,
                                           where=lambda i: f"argument {i + 1} after --")
    host = getattr(args, "host", None)
    if isinstance(host, str):
        problems += host_problems("--host", host, allow_remote=args.allow_remote, allow_flag="--allow-remote",
                                  warnings=warnings)
    if problems:
        first = problems[0]
        raise UsageError(f"{first.path}: {first.message}", first.fix)
    return warnings


def main(argv: list[str]) -> int:
    ours, extra = split_server_args(argv)
    args = build_parser().parse_args(ours)
    if args.backend == "rpc-server" and extra:
        raise UsageError("rpc-server takes no arguments after --", "use its own options (see server.py rpc-server "
                         "--help)")
    backend = None if args.backend == "rpc-server" else get_backend(args.backend)
    entry = SERVER.get(backend.config_name if backend else "llamacpp", SERVER["llamacpp"])
    for warning in check_exposure(args, extra, entry):
        print(safe_text(f"Warning: {warning}"), flush=True)
    if backend is None:
        return run_rpc_server(args)
    spec = launch_spec(backend, args, extra, entry)
    print(safe_text(f"Starting {args.backend} on {spec.host}:{spec.port} (log: {spec.log_path}) ..."), flush=True)
    server = backend.launch(spec)
    return serve_until_ctrl_c(lambda: describe(server, draft_requested=spec.draft is not None),
                              server.wait if server.process else _forever,
                              lambda: f"The server exited by itself (code {server.returncode}); last log lines:\n"
                              f"{server.log_tail(15)}", server.stop, "Server stopped")


def launch_spec(backend: Backend, args: argparse.Namespace, extra: list[str], entry: EntryPoint) -> LaunchSpec:
    """What to start, from the options and the arguments after --, with its port free and its log named."""
    spec = backend.spec_from_args(args, extra)
    if entry.checks_rpc:     # --rpc after --: the endpoints are probed before the start and recorded, as a target's are
        endpoints, rest = take_rpc(spec.extra_args)
        if endpoints:
            spec = replace(spec, rpc=endpoints, extra_args=tuple(rest))
    if backend.owns_port:     # a --host after -- is where the server listens, so where we connect
        spec = replace(spec, host=bind_host(spec.host, spec.extra_args))
    prepare_to_start_servers()   # a server left over from a crashed run is named before "port in use"
    if spec.port == 0 and backend.owns_port:
        spec = replace(spec, port=free_port(spec.host))
    elif backend.owns_port and not port_is_free(spec.host, spec.port):
        raise ServerError(f"port {spec.port} on {spec.host} is already in use by another program",
                          "stop that program, pass another --port, or --port 0 for any free port", kind=ServerErrorKind.PORT_IN_USE)
    if spec.log_path is None:
        spec = replace(spec, log_path=str(cache_dir() / "logs" / f"server-{spec.port}.log"))
    return spec


def describe(server: Server, *, draft_requested: bool) -> None:
    """The ready server: where, the command to paste, its version and notes, whether it speculates, how to bench it."""
    print(f"Ready in {server.load_time_s:.1f} s at {server.base_url}" if server.load_time_s
          else f"Ready at {server.base_url}", flush=True)
    if server.command:
        # a line to paste: a secret is a reference to a variable the shell insists on, never "***"
        print(safe_text("Command: " + shell_line(server.command)), flush=True)
    if server.version:
        print(safe_text(f"Version: {server.version}"), flush=True)
    for note in server.notes:
        print(safe_text(f"Note: {note}"), flush=True)
    status = server.speculation_status(requested=draft_requested)
    if draft_requested:
        if status.active:
            print("Speculative decoding: active", flush=True)
        elif status.active is False:
            print(safe_text(f"Warning: speculative decoding is NOT active: {status.reason}"), flush=True)
        else:
            print("Speculative decoding: requested (the server does not report whether it is active)", flush=True)
    print(f"Benchmark it with: {server.bench_hint}", flush=True)


def entry() -> None:
    sys.exit(run_main(main))


if __name__ == "__main__":
    entry()
