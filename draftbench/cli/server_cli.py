"""``python server.py``: start one inference server the way a sweep would, and keep it up until Ctrl-C."""

from __future__ import annotations

import argparse
import sys
import time

from ..backends import get_backend
from ..backends.base import LaunchSpec
from ..errors import ServerError, UsageError
from ..paths import cache_dir
from ..process import free_port, port_is_free, prepare_to_start_servers
from ..settings_schema import COMMON_SETTINGS
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
    sub = p.add_subparsers(dest="backend", required=True, metavar="{llama-cpp,vllm,lm-studio}")
    llama = sub.add_parser("llama-cpp", help="start llama.cpp's llama-server")
    llama.add_argument("--model-path", required=True, help="target GGUF")
    llama.add_argument("--draft-path", default=None, help="draft GGUF (turns speculative decoding on)")
    llama.add_argument("--draft-max", type=int, default=None, help="draft length k (default: the server's)")
    _common(llama, port=8080)
    llama.add_argument("--gpu-layers", type=int, default=99, help="layers on the GPU (default 99)")
    llama.add_argument("--ctx-size", type=int, default=4096, help="context size (default 4096)")
    llama.add_argument("--llama-bin", default=None, help="llama-server binary (default: searched)")
    from ..backends import REGISTRY
    for key in ("vllm", "lmstudio"):
        backend = REGISTRY[key]
        add = getattr(backend, "add_server_arguments", None)
        sp = sub.add_parser(backend.name, help=f"start {backend.name}")
        if add:
            add(sp)
        else:
            sp.add_argument("--model", required=False)
            _common(sp, port=backend.default_port)
    return p


def _common(p, port: int) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=port, help=f"port (default {port}; 0 = any free port)")
    p.add_argument("--startup-timeout", type=float, default=600.0, help="seconds to wait for loading (default 600)")
    p.add_argument("--log", default=None, help="server log file (default: under ~/.cache/draftbench/logs)")


def launch_spec(args, extra: list[str]) -> tuple[object, LaunchSpec]:
    if args.backend == "llama-cpp":
        backend = get_backend("llamacpp")
        settings = {k: f.default for k, f in COMMON_SETTINGS.items()}
        settings.update(llama_bin=args.llama_bin, host=args.host)
        spec = LaunchSpec(target=args.model_path, draft=args.draft_path, draft_max=args.draft_max, host=args.host,
                          port=args.port, ctx_size=args.ctx_size, gpu_layers=args.gpu_layers, extra_args=tuple(extra),
                          settings=settings, startup_timeout_s=args.startup_timeout, log_path=args.log)
        for label, path in (("--model-path", args.model_path), ("--draft-path", args.draft_path)):
            if path:
                problem = backend.model_problem(path)
                if problem:
                    raise UsageError(f"{label}: {problem}")
        return backend, spec
    backend = get_backend(args.backend)
    make = getattr(backend, "spec_from_args", None)
    if make is None:
        raise UsageError(f"{args.backend} cannot be started by server.py yet")
    return backend, make(args, extra)


def main(argv: list[str]) -> int:
    ours, extra = _split_extra(argv)
    args = build_parser().parse_args(ours)
    backend, spec = launch_spec(args, extra)
    owns_port = getattr(backend, "owns_port", True)   # False: LM Studio's one server is reused, not started anew
    prepare_to_start_servers()   # a server left over from a crashed run is named before "port in use"
    if spec.port == 0 and owns_port:
        spec = spec.__class__(**{**spec.__dict__, "port": free_port(spec.host)})
    elif owns_port and not port_is_free(spec.host, spec.port):
        raise ServerError(f"port {spec.port} on {spec.host} is already in use by another program",
                          "stop that program, pass another --port, or --port 0 for any free port", kind="port_in_use")
    if spec.log_path is None:
        spec = spec.__class__(**{**spec.__dict__, "log_path": str(cache_dir() / "logs" / f"server-{spec.port}.log")})
    print(f"Starting {args.backend} on {spec.host}:{spec.port} (log: {spec.log_path}) ...", flush=True)
    server = backend.launch(spec)
    try:
        print(f"Ready in {server.load_time_s:.1f} s at {server.base_url}" if server.load_time_s
              else f"Ready at {server.base_url}", flush=True)
        if server.command:
            print("Command: " + " ".join(server.command), flush=True)
        if server.version:
            print(f"Version: {server.version}", flush=True)
        for note in server.warnings:
            print(f"Note: {note}", flush=True)
        requested = spec.draft is not None
        status = server.speculation_status(requested=requested)
        if requested:
            if status.active:
                print("Speculative decoding: active", flush=True)
            elif status.active is False:
                print(f"Warning: speculative decoding is NOT active: {status.reason}", flush=True)
            else:
                print("Speculative decoding: requested (the server does not report whether it is active)", flush=True)
        hint = getattr(server, "bench_hint", None) or f"python bench.py --url {server.base_url}"
        print(f"Benchmark it with: {hint}", flush=True)
        print("Press Ctrl-C to stop.", flush=True)
        if server.process:
            server.process.wait()  # blocks until the server exits; Ctrl-C interrupts it
        else:
            while True:            # a server we do not own a process of (LM Studio): wait for Ctrl-C
                time.sleep(3600)   # (signal.pause does not exist on Windows; sleep is interruptible everywhere)
        print(f"The server exited by itself (code {server.process.returncode if server.process else '?'}); "
              f"last log lines:\n{server.log_tail(15)}", file=sys.stderr)
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
