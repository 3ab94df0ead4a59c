"""``python bench.py``: measure a running OpenAI-compatible server (and optionally compare two).

``main`` is the story of a run: parse → check → measure → show → write; any expected failure becomes one
``Error: …`` line and an exit code (:func:`draftbench.cli.run_main`).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace

import requests

from ..analysis.row_analysis import equivalence
from ..analysis.stats import BENCH_FLAGS, speedup
from ..analysis.verdict import summarize_records
from ..backends import backend_names, get_backend
from ..backends.base import Credentials, Server
from ..backends.http.client import RedirectRefused, new_session, probe_json
from ..backends.http.server_url import ServerURL, parse_server_url
from ..common.errors import DraftbenchError, UsageError
from ..config.extra_args import split_server_args
from ..config.prompts import ALL_CATEGORIES, Prompt
from ..config.settings import DEFAULTS
from ..measure.concurrent import level_fields, run_streams
from ..measure.sequential import MeasurementFailed, MeasureOptions, run_prompts
from ..results.file import Row, now_iso
from ..results.kinds import Role
from . import run_main
from .ab_cli import add_ab_arguments, run_ab_command
from .bench_console import print_comparison, print_header, print_table
from .bench_options import check_options, measure_options, url_settings
from .bench_results import Measured, results_file, write


def main(argv: list[str]) -> int:
    args = parse(argv)
    prompts, json_path = check_options(args)
    if args.target:
        return run_ab_command(args, prompts)
    addresses = check_addresses(args)
    print_header(len(prompts), args.runs, args.max_tokens, args.temperature, args.concurrency)
    measured = measure_all(addresses, args, prompts, measure_options(args))
    for m in measured:
        print_table(m.row)
    comparison = compare(measured[0].row, measured[1].row, args.temperature) if len(measured) == 2 else None
    if json_path:
        write(results_file(measured, url_settings(args), prompts, comparison), json_path)
        print(f"\nResults written to {args.json_path} (python sweep.py --results {args.json_path} --export md, "
              "--chart-only, or --compare with another file)")
    return 0


def parse(argv: list[str]) -> argparse.Namespace:
    ours, server_args = split_server_args(argv)
    args = build_parser().parse_args(ours)
    args.server_args = server_args
    return args


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
    p.add_argument("--json", dest="json_path", default=None, help="write every per-request value to this results "
                   "file, which sweep.py --chart-only/--compare/--export read")
    add_ab_arguments(p)
    return p


@dataclass(frozen=True)
class Address:
    """A running server to measure, as the options name it."""

    label: str
    url: ServerURL
    model: str | None
    api_key: str | None


def check_addresses(args: argparse.Namespace) -> list[Address]:
    """--url, then --compare-url, each checked before anything is reached."""
    addresses = [Address(args.label or "baseline", parse_server_url(args.url, "--url"), args.model, args.api_key)]
    if args.compare_url:
        addresses.append(Address(args.compare_label or "speculative",
                                 parse_server_url(args.compare_url, "--compare-url"),
                                 args.compare_model or args.model, args.compare_api_key))
    for address, flag in zip(addresses, ("--url", "--compare-url")):
        if address.url.auth is not None and address.api_key:
            raise UsageError(f"{flag} holds a user name and password and an API key is given too: both would be "
                             "the request's Authorization header", "keep one of them")
    if len(addresses) == 2 and addresses[0].label == addresses[1].label:
        raise UsageError(f"--label and --compare-label are both {addresses[0].label!r}: the two servers would be "
                         "one row in the results", "give them different labels")
    return addresses


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
    """A server somebody else started, taken as ``kind`` (resolved: see :func:`server_kind`)."""
    base, auth = url.base, url.auth
    if kind == "openai":
        return Server(base, model=model or "default", credentials=Credentials(api_key, auth))
    try:
        backend = get_backend(kind)
    except KeyError:
        raise UsageError(f"unknown --backend {kind!r}", f"use auto, openai, or one of {', '.join(backend_names())}") \
            from None
    return backend.attach(base, model=model, api_key=api_key, auth=auth)


def server_kind(url: ServerURL, kind: str, api_key: str | None) -> str:
    """``--backend`` as given, or for ``auto`` what the server answers like."""
    return detect_kind(url.base, api_key, url.auth) if kind == "auto" else kind


def measure_all(addresses: list[Address], args: argparse.Namespace, prompts: list[Prompt],
                options: MeasureOptions) -> list[Measured]:
    """Attach to every server first (a bad address fails before anything is measured), then measure each in
    turn; attached servers are only let go, never stopped."""
    attached: list[tuple[Address, str, Server]] = []
    try:
        for address in addresses:
            kind = server_kind(address.url, args.backend, address.api_key)
            attached.append((address, kind, attach(address.url, kind, address.model, address.api_key)))
        measured = []
        for address, kind, server in attached:
            try:
                row = measure(server, address.label, prompts, options, args.concurrency)
            except MeasurementFailed as failure:
                print(" failed", flush=True)
                raise failure.error from None
            server_info = {"backend": kind, "version": server.version} if server.version else {"backend": kind}
            measured.append(Measured(address.label, kind, server, replace(row, server=server_info)))
        return measured
    finally:
        for _, _, server in attached:
            server.stop()


def compare(a: Row, b: Row, temperature: float) -> dict:
    """``b`` against ``a`` on the same prompts: the paired speed-up and, at temperature 0, identical output."""
    ratio = speedup({(r.prompt_id, r.run): r.decode_tps for r in a.requests},
                    {(r.prompt_id, r.run): r.decode_tps for r in b.requests})
    eq = equivalence(b, a, temperature=temperature)
    print_comparison(a, b, ratio, eq)
    return {"speedup": ratio.to_dict() if ratio else None, "equivalence": eq}


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
               load=load, memory=server.memory_use(), **fields)     # a server we did not start: why it says nothing


def entry() -> None:
    sys.exit(run_main(main))


if __name__ == "__main__":
    entry()
