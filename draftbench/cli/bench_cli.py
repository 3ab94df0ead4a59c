"""``python bench.py``: measure a running OpenAI-compatible server (and optionally compare two)."""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

import requests

from ..analysis.draft.positions import diagnose
from ..analysis.stats import BENCH_FLAGS, describe_speedup, speedup
from ..analysis.verdict import equivalence, summarize_records
from ..backends import backend_names, get_backend
from ..backends.base import Credentials, Server
from ..backends.http.client import RedirectRefused, new_session, probe_json
from ..backends.http.server_url import ServerURL, parse_server_url
from ..common.errors import DraftbenchError, UsageError
from ..common.files import atomic_write_text
from ..common.text_safety import without_lone_surrogates
from ..config.extra_args import split_server_args
from ..config.prompts import ALL_CATEGORIES, ALL_PROMPTS, BUILTIN_PROMPTS, Prompt, custom_prompts, load_prompt_file
from ..config.settings import COMMON_SETTINGS, DEFAULTS
from ..measure.concurrent import level_fields, run_streams
from ..measure.sequential import MeasurementFailed, MeasureOptions, run_prompts
from ..results.file import Row, now_iso
from ..results.kinds import Role
from . import run_main
from .ab_cli import add_ab_arguments, run_ab_command

MAX_TIMEOUT_S = COMMON_SETTINGS["request_timeout_s"].max or math.inf   # as settings.request_timeout_s / stall_timeout_s


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench.py", description="Stream chat completions from a running server and "
                                "report TTFT, decode tok/s and draft acceptance (from the server's own counters).")
    p.add_argument("--url", "--base-url", dest="url", default=None,
                   help="server address, e.g. http://127.0.0.1:8080 (a trailing /v1 is accepted); or use --target")
    p.add_argument("--model", default=None, help="model name sent in requests (needed by vLLM / LM Studio)")
    p.add_argument("--api-key", default=None, help="API key for the server (never written to files)")
    p.add_argument("--label", default=None, help="display label for --url")
    p.add_argument("--backend", default="auto", help=f"server kind: auto (detect llama.cpp), openai, "
                   f"{', '.join(backend_names())}")
    p.add_argument("--compare-url", default=None, help="a second server to compare against --url (same prompts)")
    p.add_argument("--compare-model", default=None, help="model name for --compare-url (default: --model)")
    p.add_argument("--compare-api-key", default=None, help="API key for --compare-url")
    p.add_argument("--compare-label", default=None, help="display label for --compare-url")
    p.add_argument("--requests", type=int, default=None, help="measured requests per run (cycles through the "
                   "prompts; default: one per prompt)")
    p.add_argument("--runs", type=int, default=DEFAULTS.runs,
                   help=f"repetitions of the prompt set (default {DEFAULTS.runs})")
    p.add_argument("--warmup", type=int, default=DEFAULTS.warmup,
                   help=f"warm-up requests, not measured (default {DEFAULTS.warmup})")
    p.add_argument("--max-tokens", type=int, default=DEFAULTS.max_tokens,
                   help=f"tokens per request (default {DEFAULTS.max_tokens})")
    p.add_argument("--temperature", type=float, default=DEFAULTS.temperature,
                   help=f"sampling temperature (default {DEFAULTS.temperature:g})")
    p.add_argument("--seed", type=int, default=DEFAULTS.seed,
                   help=f"base seed; each (prompt, run) gets its own (default {DEFAULTS.seed})")
    p.add_argument("--prompt", action="append", default=None, help="your own prompt (repeatable); replaces the "
                   "built-in set")
    p.add_argument("--prompt-file", default=None, help="prompts from a .txt (--- separates prompts, or one per line) "
                   "or .jsonl file ({\"prompt\": …, \"category\": …} per line)")
    p.add_argument("--category", action="append", default=None, choices=ALL_CATEGORIES,
                   help="use only these built-in categories (repeatable; code-edit, rewrite, summarise-long, "
                   "reasoning and session run only when named)")
    p.add_argument("--request-timeout", type=float, default=DEFAULTS.request_timeout_s,
                   help=f"seconds per request (default {DEFAULTS.request_timeout_s:g})")
    p.add_argument("--stall-timeout", type=float, default=DEFAULTS.stall_timeout_s, help="seconds without data "
                   f"before a request counts as stalled (default {DEFAULTS.stall_timeout_s:g})")
    p.add_argument("--concurrency", type=int, default=1, help="requests in flight at once: N client streams, "
                   "each sending its next request when its last one ended (default 1; the server needs N slots, "
                   "e.g. llama-server -np N)")
    p.add_argument("--json", dest="json_path", default=None, help="write every per-request value to this JSON file "
                   "(with --target: a results file that sweep.py --compare/--export/--chart-only read)")
    add_ab_arguments(p)
    return p


def choose_prompts(args) -> list[Prompt]:
    if args.prompt and args.prompt_file:
        raise UsageError("use either --prompt or --prompt-file, not both")
    if args.prompt:
        prompts = custom_prompts(args.prompt)
    elif args.prompt_file:
        prompts = load_prompt_file(args.prompt_file)
    else:
        prompts = (list(BUILTIN_PROMPTS) if not args.category
                   else [p for p in ALL_PROMPTS if p.category in args.category])
    if args.requests is not None:
        if args.requests < 1:
            raise UsageError(f"--requests must be at least 1 (got {args.requests})")
        cycled = []
        for i in range(args.requests):
            p = prompts[i % len(prompts)]
            rep = i // len(prompts)
            cycled.append(p if rep == 0 else Prompt(f"{p.id}#{rep + 1}", p.category, p.messages))
        prompts = cycled
    return prompts


def detect_kind(base: str, api_key: str | None, auth: tuple[str, str] | None = None) -> str:
    """``llamacpp`` if ``/props`` answers like llama-server, else ``openai``; a redirect is an error."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    session = new_session()
    session.auth = auth
    try:
        for path in ("/props", "/v1/models"):
            try:
                status, data = probe_json(session, base + path, headers=headers)
            except RedirectRefused as exc:
                raise DraftbenchError(str(exc), "give the address the server itself answers on in --url "
                                      "(draftbench never follows redirects)") from None
            except requests.RequestException as exc:
                if path == "/props":
                    continue
                raise DraftbenchError(f"cannot reach {base}: {type(exc).__name__}", "is the server running? "
                                      "start one with python server.py") from None
            if path == "/props" and status == 200 and isinstance(data, dict) and "build_info" in data:
                return "llamacpp"
        return "openai"
    finally:
        session.close()


def attach(url: ServerURL, kind: str, model: str | None, api_key: str | None) -> Server:
    base, auth = url.base, url.auth
    if kind == "auto":
        kind = detect_kind(base, api_key, auth)
    if kind == "openai":
        return Server(base, model=model or "default", credentials=Credentials(api_key, auth))
    try:
        backend = get_backend(kind)
    except KeyError:
        raise UsageError(f"unknown --backend {kind!r}", f"use auto, openai, or one of {', '.join(backend_names())}") \
            from None
    return backend.attach(base, model=model, api_key=api_key, auth=auth)


def check_slots(server: Server, label: str, streams: int) -> None:
    """Say so when the server cannot run ``streams`` requests at once (the rest would wait in its queue)."""
    slots = server.slot_states() if streams > 1 else None
    if slots is not None and len(slots) < streams:
        print(f"  Note: {label} has {len(slots)} slot{'s' if len(slots) != 1 else ''}, so at most {len(slots)} of the "
              f"{streams} streams run at once (the others wait in its queue); start it with -np {streams} "
              f"(python server.py llama-cpp --parallel {streams})", flush=True)


def measure(server: Server, label: str, prompts: list[Prompt], options: MeasureOptions, streams: int = 1) -> Row:
    check_slots(server, label, streams)
    print(f"  [{label}] {server.base_url} ", end="", flush=True)

    def dot(*_) -> None:
        print(".", end="", flush=True)

    load = None
    if streams > 1:
        level = run_streams(server, prompts, options, streams, on_request=dot)
        records, load = level.records, level.load
    else:
        records = run_prompts(server, prompts, options, on_request=dot)
    print(" done", flush=True)
    fields = summarize_records(records, max_tokens=options.max_tokens, runs=options.runs, flags=BENCH_FLAGS)
    if load is not None:
        # a server that says it does not speculate is a baseline: its zero draft totals are not an acceptance
        speculative = server.speculation_status(requested=True).active is not False
        fields = level_fields(fields, load, speculative=speculative, flags={**BENCH_FLAGS, "concurrency": "--concurrency"})
    fields["warnings"] = tuple(fields["warnings"])
    return Row(target=label, role=Role.BASELINE, requests=tuple(records), started_at=now_iso(), concurrency=streams,
               load=load, **fields)


def _percentiles_text(p: dict | None, unit: str) -> str:
    return "n/a" if not p else "  ".join(f"{q}={p[q]:.3f}{unit}" for q in ("p50", "p90", "p99")) + f"  (n={p['n']})"


def print_level(row: Row) -> None:
    """What N streams at once did: aggregate throughput, latency percentiles and the server's own counters."""
    load = row.load or {}
    side = load.get("server") or {}
    server_view = []
    if side.get("slots") is not None:
        server_view.append(f"{len(side['slots'])} slots")
    if side.get("busy_slots_max") is not None:
        server_view.append(f"at most {side['busy_slots_max']} busy")
    if side.get("busy_slots_per_decode") is not None:
        server_view.append(f"{side['busy_slots_per_decode']:.2f} busy per decode step")
    print(f"  {'streams':<18} {load.get('streams')} at once (at most {load.get('in_flight_max')} in flight"
          + (f"; server: {', '.join(server_view)}" if server_view else "") + ")")
    print(f"  {'aggregate tok/s':<18} {_fmt(load.get('aggregate_tps'), '')} over {_fmt(load.get('window_s'), 's')} "
          f"({load.get('output_tokens')} tokens, all streams)")
    print(f"  {'ttft':<18} {_percentiles_text(load.get('ttft_s'), 's')}")
    print(f"  {'latency (e2e)':<18} {_percentiles_text(load.get('total_s'), 's')}")
    checks = side.get("checks") or {}
    if checks:
        agree = all(c["match"] for c in checks.values())
        print(f"  {'server counters':<18} " + ("per-request counters add up to the server's totals: " if agree else
                                               "per-request counters do NOT add up to the server's totals: ")
              + ", ".join(f"{name} {c['requests']}{' = ' if c['match'] else ' vs '}{c['server']}"
                          for name, c in checks.items()))


def _fmt(value, unit: str, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}{unit}"


def print_table(row: Row) -> None:
    print(f"\n{'=' * 78}\n  RESULTS: {row.target}\n{'=' * 78}")
    metrics = [("ttft", row.ttft_s, "s", 3), ("decode tok/s", row.tps, "", 2), ("server tok/s", row.server_tps, "", 2),
               ("total time", row.total_s, "s", 2)]
    from ..analysis.stats import summarize
    tokens = summarize(r.completion_tokens for r in row.requests)
    metrics.append(("completion tokens", tokens, "", 0))
    for name, s, unit, d in metrics:
        if not s:
            print(f"  {name:<18} n/a")
            continue
        print(f"  {name:<18} min={_fmt(s['min'], unit, d):>9}  median={_fmt(s['median'], unit, d):>9}  "
              f"mean={_fmt(s['mean'], unit, d):>9}  p95={_fmt(s['p95'], unit, d):>9}  max={_fmt(s['max'], unit, d):>9}")
    if row.concurrency > 1:
        print_level(row)
    if row.tps and row.tps.get("ci95_low") is not None:
        print(f"  {'':<18} mean tok/s 95% CI [{row.tps['ci95_low']:.2f}, {row.tps['ci95_high']:.2f}], "
              f"CV {row.tps['cv']:.1%}")
    if row.acceptance_rate is not None:
        line = f"  acceptance         {row.acceptance_rate:.1%} ({row.draft_n_accepted} accepted / {row.draft_n} drafted)"
        if row.mean_accepted_len:
            line += f", {row.mean_accepted_len:.2f} tokens per verify step"
        print(line)
        if row.accepted_per_pos and row.verify_steps:
            shares = ", ".join(f"{a / row.verify_steps:.0%}" for a in row.accepted_per_pos)
            print(f"  by draft position  {shares} of verify steps")
            diagnosis = diagnose(row.accepted_per_pos, row.verify_steps)
            if diagnosis:
                print(f"  diagnosis          {diagnosis.message}")
        else:
            print("  by draft position  not reported by this server")
    elif row.draft_n == 0:
        print("  acceptance         n/a — the server drafted nothing (speculation not active)")
    else:
        print("  acceptance         n/a (the server reports no draft counters)")
    if row.by_category and len(row.by_category) > 1:
        print("  by category:")
        for cat, v in row.by_category.items():
            acc = "n/a" if v["acceptance_rate"] is None else f"{v['acceptance_rate']:.0%}"
            print(f"    {cat:<16} {_fmt(v['mean_tps'], ' tok/s')}  acceptance {acc}")
    for w in row.warnings:
        print(f"  ! {w}")


def check_seconds(flag: str, value: float) -> None:
    if not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT_S):
        raise UsageError(f"{flag} is {value:g}; it must be a number of seconds above 0 and at most {MAX_TIMEOUT_S}",
                         f"e.g. {flag} 120")


def check_output_file(path: str, flag: str, inputs: tuple[str | None, ...] = ()) -> Path:
    """The file ``path`` will be written to, refused now (before measuring) if it cannot be.

    A symlink is followed, so the file it points to is updated, never replaced by a file.
    """
    target = Path(path).expanduser().resolve()
    if target.is_dir():
        raise UsageError(f"{flag} {path} is a folder", f"give a file name, e.g. {flag} {Path(path) / 'bench.json'}")
    for other in inputs:
        if other and target == Path(other).expanduser().resolve():
            raise UsageError(f"{flag} {path} is also an input ({other}); writing it would destroy it",
                             f"give {flag} another file name")
    if target.exists():
        if not target.is_file():
            raise UsageError(f"{flag} {path} is not a regular file", f"give {flag} a file name")
        try:
            with open(target, "r+b"):    # opened for writing, not truncated
                pass
        except OSError as exc:
            raise UsageError(f"{flag} {path} cannot be written ({exc.strerror})",
                             "choose another path, or make the file writable") from None
    folder = target.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise UsageError(f"{flag} {path} cannot be created: {folder} is a file, not a folder",
                         f"give {flag} a path inside a folder")
    try:   # the file is written as a temporary file beside it, then renamed
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as exc:
        raise UsageError(f"{flag} {path} cannot be written: no new file can be made in {folder} ({exc.strerror})",
                         "choose a folder you can write to") from None
    return target


def main(argv: list[str]) -> int:
    ours, server_args = split_server_args(argv)
    args = build_parser().parse_args(ours)
    args.server_args = server_args
    if server_args and not args.target:
        raise UsageError("arguments after -- go to the servers that --target starts; --url measures a server "
                         "that is already running", "pass them when you start that server, or use --target")
    if args.context_tokens is not None and not args.target:
        raise UsageError("--context-tokens cuts long prompts with the target's own tokenizer on servers it starts",
                         "use it with --target T.gguf (and --draft or --spec-type)")
    for name in ("runs", "max_tokens"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1 (got {getattr(args, name)})")
    if args.warmup < 0 or not math.isfinite(args.temperature) or args.temperature < 0:
        raise UsageError("--warmup and --temperature must not be negative")
    if args.concurrency < 1:
        raise UsageError(f"--concurrency must be at least 1 (got {args.concurrency})")
    if args.concurrency > 1 and args.backend not in ("auto", "openai") and args.backend in backend_names() \
            and get_backend(args.backend).config_name == "lmstudio":
        raise UsageError("--concurrency is not supported with LM Studio", "measure it with --concurrency 1, or "
                         "benchmark concurrency on llama-server or vLLM")
    check_seconds("--request-timeout", args.request_timeout)
    check_seconds("--stall-timeout", args.stall_timeout)
    json_path = check_output_file(args.json_path, "--json", (args.prompt_file,)) if args.json_path else None
    prompts = choose_prompts(args)
    if args.concurrency > len(prompts) * args.runs:
        raise UsageError(f"--concurrency {args.concurrency} asks for more requests at once than the "
                         f"{len(prompts) * args.runs} it sends (prompts × --runs): they could never all be in flight",
                         f"use --concurrency {len(prompts) * args.runs} at most, or more prompts (--requests N) or --runs")
    if args.target:
        if args.concurrency > 1:
            raise UsageError("--concurrency applies to --url only; the one-command A/B measures one stream",
                             "for an A/B under load, sweep a config with settings.concurrency (see README)")
        return run_ab_command(args, prompts)
    if not args.url:
        raise UsageError("give --url URL (a running server) or --target T.gguf (an A/B that starts its own servers)",
                         "see python bench.py --help")
    url = parse_server_url(args.url, "--url")
    compare_url = parse_server_url(args.compare_url, "--compare-url") if args.compare_url else None
    for flag, where, key in (("--url", url, args.api_key), ("--compare-url", compare_url, args.compare_api_key)):
        if where is not None and where.auth is not None and key:
            raise UsageError(f"{flag} holds a user name and password and an API key is given too: both would be "
                             "the request's Authorization header", "keep one of them")
    options = MeasureOptions(runs=args.runs, warmup=args.warmup, max_tokens=args.max_tokens,
                             temperature=args.temperature, seed=args.seed, request_timeout_s=args.request_timeout,
                             stall_timeout_s=args.stall_timeout)
    label_a = args.label or "baseline"
    streams = f", {args.concurrency} concurrent streams" if args.concurrency > 1 else ""
    print(f"{'=' * 78}\n  draftbench bench — {len(prompts)} prompts x {args.runs} run(s), max_tokens {args.max_tokens}, "
          f"temperature {args.temperature:g}{streams}\n{'=' * 78}")
    servers = [(label_a, attach(url, args.backend, args.model, args.api_key))]
    if compare_url is not None:
        servers.append((args.compare_label or "speculative",
                        attach(compare_url, args.backend, args.compare_model or args.model,
                               args.compare_api_key)))
    rows = []
    try:
        for label, server in servers:
            try:
                rows.append(measure(server, label, prompts, options, args.concurrency))
            except MeasurementFailed as failure:
                print(" failed", flush=True)
                raise failure.error from None
    finally:
        for _, server in servers:
            server.stop()
    for row in rows:
        print_table(row)
    comparison = None
    if len(rows) == 2:
        a, b = rows
        ratio = speedup({(r.prompt_id, r.run): r.decode_tps for r in a.requests},
                        {(r.prompt_id, r.run): r.decode_tps for r in b.requests})
        eq = equivalence(b, a, temperature=args.temperature)
        comparison = {"speedup": ratio.to_dict() if ratio else None, "equivalence": eq}
        print(f"\n{'=' * 78}\n  COMPARISON ({b.target} vs {a.target})\n{'=' * 78}")
        print(f"  Mean tok/s : {_fmt(a.mean_tps, '')} -> {_fmt(b.mean_tps, '')}   speed-up {describe_speedup(ratio)}")
        print(f"  Mean TTFT  : {_fmt(a.mean_ttft, 's', 3)} -> {_fmt(b.mean_ttft, 's', 3)}")
        if a.load and b.load:
            print(f"  Aggregate  : {_fmt(a.load.get('aggregate_tps'), '')} -> {_fmt(b.load.get('aggregate_tps'), '')} "
                  f"tok/s ({args.concurrency} streams, all together)")
        if eq and eq.get("checked"):
            print(f"  Output     : identical on {eq['matched']}/{eq['compared']} requests"
                  + (f"; first difference in {eq['mismatches'][0]['prompt_id']} at character "
                     f"{eq['mismatches'][0]['char_pos']}" if eq["mismatches"] else ""))
    if json_path:
        payload = {"timestamp": now_iso(), "tool": "draftbench bench",
                   "settings": {"runs": args.runs, "warmup": args.warmup, "max_tokens": args.max_tokens,
                                "concurrency": args.concurrency,
                                "temperature": args.temperature, "seed": args.seed, "prompts": [p.to_dict() for p in prompts]},
                   "servers": [{"label": label, "url": server.base_url, "version": server.version}
                               for label, server in servers],
                   "results": [r.to_dict() for r in rows], "comparison": comparison}
        try:
            # strict JSON: a NaN that slipped through is refused here, not written
            text = json.dumps(without_lone_surrogates(payload), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
        except ValueError as exc:
            raise DraftbenchError(f"cannot write --json {args.json_path}: {exc}") from None
        try:
            atomic_write_text(json_path, text)
        except OSError as exc:
            raise DraftbenchError(f"cannot write --json {args.json_path}: {exc.strerror or exc}",
                                  "the measurements above are all there is; choose another path") from None
        print(f"\nPer-request values written to {args.json_path}")
    return 0


def entry() -> None:
    sys.exit(run_main(main))


if __name__ == "__main__":
    entry()
