#!/usr/bin/env python3
"""Does llama-server's trace verbosity (-lv 4, needed for per-method statistics) change tok/s?

    python benchmarks/trace_verbosity.py [--pairs 10] [--max-tokens 64] [--method ngram-simple] [--model GGUF]

Starts the same speculative server twice (a model-free method on the code-edit prompt, so the
per-method lines have content and only one model loads per server): once at the default
verbosity, once at trace verbosity. Both stay loaded (an idle llama-server waits without using
the CPU); requests then alternate between them (A B, B A, …), so each pair of requests sees the
same load on a shared machine. Prints the ratio of the servers' own decode tok/s (trace / default)
with a 95% CI over the pairs (a CI that includes 1.000 means: no measurable cost), and what each
server wrote to its log per request (the mechanism by which verbosity could cost time; it does
not depend on the machine's load).

``--control`` runs the same with both servers at the default verbosity (an A/A test): on a shared
machine it shows how far apart two identical servers measure, which the trace ratio must exceed
before it means anything.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from draftbench.analysis.stats import describe_speedup, speedup
from draftbench.backends.base import LaunchSpec, Server
from draftbench.backends.llamacpp.backend import LlamaCppBackend
from draftbench.backends.llamacpp.settings import LlamaCppSettings
from draftbench.common.errors import DraftbenchError
from draftbench.common.files import cache_dir
from draftbench.config.prompts import METHOD_PROMPTS
from draftbench.config.settings import Settings
from draftbench.lifetime.process import free_port
from draftbench.measure.sequential import MeasureOptions, run_prompts

PROMPT = next(p for p in METHOD_PROMPTS if p.category == "code-edit")


def launch(model: str, method: str, trace: bool, logs: Path) -> Server:
    settings = Settings(backend=LlamaCppSettings(method_stats=trace))
    port = free_port()
    spec = LaunchSpec(target=model, method=(method,), port=port, ctx_size=2048, gpu_layers=0,
                      settings=settings, startup_timeout_s=300, log_path=str(logs / f"server-{port}.log"))
    return LlamaCppBackend().launch(spec)


def log_size(server: Server) -> tuple[int, int]:
    """(lines, bytes) the server has written to its log so far."""
    data = Path(server.process.log_path).read_bytes() if server.process else b""
    return data.count(b"\n"), len(data)


def one(server: Server, options: MeasureOptions) -> tuple[float | None, bool]:
    (record,) = run_prompts(server, [PROMPT], options)
    return record.server_decode_tps, bool(record.draft_details)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=10, help="measured request pairs (default 10)")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--method", default="ngram-simple")
    p.add_argument("--model", default=str(cache_dir() / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--control", action="store_true", help="A/A: the second server at the default verbosity too")
    args = p.parse_args()
    if args.pairs < 1 or args.max_tokens < 1:
        p.error("--pairs and --max-tokens must be at least 1")
    if not Path(args.model).is_file():
        p.error(f"--model {args.model}: no such file (make models forges the default one)")
    options = MeasureOptions(runs=1, warmup=0, max_tokens=args.max_tokens)
    base: dict[tuple, float] = {}
    trace: dict[tuple, float] = {}
    with tempfile.TemporaryDirectory() as tmp, launch(args.model, args.method, False, Path(tmp)) as plain, \
                launch(args.model, args.method, not args.control, Path(tmp)) as traced:
        print(f"first:  {' '.join(plain.command or [])}\nsecond: {' '.join(traced.command or [])}", flush=True)
        run_prompts(plain, [PROMPT], MeasureOptions(runs=1, warmup=0, max_tokens=16))     # warm-up, both
        run_prompts(traced, [PROMPT], MeasureOptions(runs=1, warmup=0, max_tokens=16))
        stats_seen = 0
        logged_before = {id(plain): log_size(plain), id(traced): log_size(traced)}
        for i in range(args.pairs):
            order = ((plain, base), (traced, trace)) if i % 2 == 0 else ((traced, trace), (plain, base))
            line = []
            for server, into in order:
                tps, has_stats = one(server, options)
                stats_seen += has_stats and server is traced
                if tps:
                    into[(PROMPT.id, i)] = tps
                line.append(f"{'second' if server is traced else 'first'} {tps or 0:.2f}")
            print(f"pair {i + 1}: " + ", ".join(line) + " tok/s", flush=True)
        # What the higher verbosity adds, independent of the machine's load: log written per request.
        for name, server in (("first", plain), ("second", traced)):
            lines, size = (a - b for a, b in zip(log_size(server), logged_before[id(server)]))
            print(f"{name} server's log per measured request: {lines / args.pairs:.1f} lines, "
                  f"{size / args.pairs:.0f} bytes", flush=True)
    ratio = speedup(base, trace, noise_floor=0.0)
    if not ratio:
        print("no measurement")
        return 1
    second = "default (A/A control)" if args.control else "-lv 4"
    print(f"\nmedian tok/s: first server (default) {statistics.median(base.values()):.2f}, second ({second}) "
          f"{statistics.median(trace.values()):.2f}")
    print(f"per-method statistics recorded on {stats_seen} of {args.pairs} second-server requests")
    print(f"second / first decode tok/s: {ratio.ratio:.3f} — {describe_speedup(ratio)} ({ratio.n_pairs} pairs)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except DraftbenchError as exc:     # no llama-server, no models: its cause and fix in a line or two, not a traceback
        sys.exit(f"Error: {exc}")
