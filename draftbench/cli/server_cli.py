"""``python server.py``: start one inference server the way a sweep would, and keep it up until Ctrl-C."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

from ..backends import REGISTRY, get_backend
from ..common.errors import ServerError, ServerErrorKind, UsageError
from ..common.files import cache_dir
from ..common.redact_secrets import command_line
from ..common.text_safety import safe_text
from ..config.extra_args import bind_host, check_server_args, host_problems
from ..lifetime.process import free_port, port_is_free, prepare_to_start_servers
from . import run_main


def _split_extra(argv: list[str]) -> tuple[list[str], list[str]]:
    """Everything after a bare ``--`` goes to the server untouched."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="server.py", description="Start an inference server for benchmarking "
                                "(stops it on Ctrl-C). Arguments after -- are passed to the server as they are.")
    p.add_argument("--allow-remote", action="store_true", help="allow a --host (here or after --) other than "
                   "loopback: the server is then reachable from other machines")
    names = [backend.name for backend in REGISTRY.values()]
    sub = p.add_subparsers(dest="backend", required=True, metavar="{" + ",".join(names) + "}")
    for backend in REGISTRY.values():
        parser = sub.add_parser(backend.name, help=f"start {backend.name}")
        backend.add_server_arguments(parser)
        # also accepted after the backend name; SUPPRESS keeps the top-level value when absent here
        parser.add_argument("--allow-remote", action="store_true", default=argparse.SUPPRESS,
                            help="allow a --host (here or after --) other than loopback")
    return p


def check_exposure(args, extra: list[str]) -> list[str]:
    """Refuse --port after -- and a non-loopback host without --allow-remote; return warnings to print."""
    problems, warnings = check_server_args("--", extra, allow_remote=args.allow_remote, allow_flag="--allow-remote",
                                           where=lambda i: f"argument {i + 1} after --")
    host = getattr(args, "host", None)
    if isinstance(host, str):
        problems += host_problems("--host", host, allow_remote=args.allow_remote, allow_flag="--allow-remote",
                                  warnings=warnings)
    if problems:
        first = problems[0]
        raise UsageError(f"{first.path}: {first.message}", (first.fix or "").replace("settings.port", "--port"))
    return warnings


def main(argv: list[str]) -> int:
    ours, extra = _split_extra(argv)
    args = build_parser().parse_args(ours)
    for warning in check_exposure(args, extra):
        print(safe_text(f"Warning: {warning}"), flush=True)
    backend = get_backend(args.backend)
    spec = backend.spec_from_args(args, extra)
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
    print(safe_text(f"Starting {args.backend} on {spec.host}:{spec.port} (log: {spec.log_path}) ..."), flush=True)
    server = backend.launch(spec)
    try:
        print(f"Ready in {server.load_time_s:.1f} s at {server.base_url}" if server.load_time_s
              else f"Ready at {server.base_url}", flush=True)
        if server.command:
            print(safe_text("Command: " + command_line(server.command)), flush=True)
        if server.version:
            print(safe_text(f"Version: {server.version}"), flush=True)
        for note in server.notes:
            print(safe_text(f"Note: {note}"), flush=True)
        requested = spec.draft is not None
        status = server.speculation_status(requested=requested)
        if requested:
            if status.active:
                print("Speculative decoding: active", flush=True)
            elif status.active is False:
                print(safe_text(f"Warning: speculative decoding is NOT active: {status.reason}"), flush=True)
            else:
                print("Speculative decoding: requested (the server does not report whether it is active)", flush=True)
        print(f"Benchmark it with: {server.bench_hint}", flush=True)
        print("Press Ctrl-C to stop.", flush=True)
        if server.process:
            server.wait()            # blocks until the server exits; Ctrl-C interrupts it
        else:
            while True:              # a server we do not own a process of (LM Studio): wait for Ctrl-C
                time.sleep(3600)     # (signal.pause does not exist on Windows; sleep is interruptible everywhere)
        print(f"The server exited by itself (code {server.returncode}); "
              f"last log lines:\n{safe_text(server.log_tail(15))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nStopping ...", flush=True)
        return 0
    finally:
        server.stop()
        print("Server stopped", flush=True)


def entry() -> None:
    sys.exit(run_main(main))


if __name__ == "__main__":
    entry()
