"""``python bench.py``'s options, checked once before anything is measured: the prompts they choose,
the file ``--json`` will write, and the settings and measurement options they stand for (the same for
``--url`` and for the A/B of ``--target``)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..backends import backend_names, get_backend
from ..common.errors import Problem, UsageError
from ..config.prompts import ALL_PROMPTS, BUILTIN_PROMPTS, Prompt, custom_prompts, load_prompt_file
from ..config.settings import BackendSettings, Origin, Override, Settings
from ..config.settings_check import check_settings
from ..measure.sequential import MeasureOptions


def check_options(args: argparse.Namespace) -> tuple[list[Prompt], Path | None]:
    """The prompts to send and the checked ``--json`` path; a :class:`UsageError` for the first bad option."""
    if args.server_args and not args.target:
        raise UsageError("arguments after -- go to the servers that --target starts; --url measures a server "
                         "that is already running", "pass them when you start that server, or use --target")
    if args.context_tokens is not None and not args.target:
        raise UsageError("--context-tokens cuts long prompts with the target's own tokenizer on servers it starts",
                         "use it with --target T.gguf (and --draft or --spec-type)")
    flag_settings(common_flags(args))         # each value within its setting's bounds, as in a config
    if len(args.temperatures) > 1 and not args.target:
        raise UsageError("--temperature takes one value with --url: a list measures the A/B at each, on servers it "
                         "starts", "use one temperature, or --target T.gguf with the list")
    check_concurrency(args)
    json_path = check_output_file(args.json_path, "--json", (args.prompt_file,)) if args.json_path else None
    prompts = choose_prompts(args)
    if args.concurrency > len(prompts) * args.runs:
        raise UsageError(f"--concurrency {args.concurrency} asks for more requests at once than the "
                         f"{len(prompts) * args.runs} it sends (prompts × --runs): they could never all be in flight",
                         f"use --concurrency {len(prompts) * args.runs} at most, or more prompts (--requests N) or --runs")
    if not args.target and not args.url:
        raise UsageError("give --url URL (a running server) or --target T.gguf (an A/B that starts its own servers)",
                         "see python bench.py --help")
    return prompts, json_path


def check_concurrency(args: argparse.Namespace) -> None:
    if args.concurrency < 1:
        raise UsageError(f"--concurrency must be at least 1 (got {args.concurrency})")
    if args.concurrency > 1 and args.backend in backend_names() and not get_backend(args.backend).concurrent_streams:
        raise UsageError(f"--concurrency is not supported with {args.backend}", "measure it with --concurrency 1, or "
                         "benchmark concurrency on llama-server or vLLM")
    if args.concurrency > 1 and args.target:
        raise UsageError("--concurrency applies to --url only; the one-command A/B measures one stream",
                         "for an A/B under load, sweep a config with settings.concurrency (see docs/concurrency.md)")


def choose_prompts(args: argparse.Namespace) -> list[Prompt]:
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


def measure_options(args: argparse.Namespace) -> MeasureOptions:
    return MeasureOptions(runs=args.runs, warmup=args.warmup, max_tokens=args.max_tokens,
                          temperature=args.temperature, seed=args.seed, request_timeout_s=args.request_timeout,
                          stall_timeout_s=args.stall_timeout)


def prompts_setting(args: argparse.Namespace) -> str | list[str]:
    """``settings.prompts`` as a config would say it: the file, "custom", the categories, or "builtin"."""
    return (args.prompt_file if args.prompt_file else "custom" if args.prompt
            else list(args.category) if args.category else "builtin")


def common_flags(args: argparse.Namespace) -> list[Override]:
    """The flags ``--url`` and the A/B share, each as the setting a sweep config would hold."""
    temperature = list(args.temperatures) if len(args.temperatures) > 1 else args.temperatures[0]
    return [Override("runs", args.runs, "--runs"), Override("warmup", args.warmup, "--warmup"),
            Override("max_tokens", args.max_tokens, "--max-tokens"),
            Override("temperature", temperature, "--temperature"), Override("seed", args.seed, "--seed"),
            Override("request_timeout_s", args.request_timeout, "--request-timeout"),
            Override("stall_timeout_s", args.stall_timeout, "--stall-timeout")]


def flag_settings(given: Sequence[Override], *, prompts: str | list[str] = "builtin", fixed: dict | None = None,
                  backend: type[BackendSettings] = BackendSettings, path_keys: tuple[str, ...] = ()) -> Settings:
    """bench.py's flags as the settings a sweep config would hold, checked by the one route a config's settings
    take (:func:`check_settings`): a value out of its setting's bounds is refused naming its flag and value.
    ``fixed``: settings bench.py sets itself, no flag of its own (checked the same way, as a config's keys).
    ``prompts`` is recorded as it is: bench.py chose and read its prompts already (``custom`` has no config form)."""
    problems: list[Problem] = []
    settings = check_settings(fixed or {}, backend=backend, path_keys=path_keys, base_dir=os.getcwd(),
                              origin=Origin(tuple(o for o in given if o.value is not None)), other_backends={},
                              problems=problems)
    if problems:
        first = problems[0]
        place = re.sub(r"\[(\d+)\]$", lambda m: f" (value {int(m.group(1)) + 1})", first.path)   # of a list
        raise UsageError(f"{place}: {first.message}", first.fix)
    return dataclasses.replace(settings, prompts=prompts)


def url_settings(args: argparse.Namespace) -> Settings:
    """The settings ``bench.py --url`` measured with, as a sweep's results file records them."""
    return flag_settings([*common_flags(args), Override("concurrency", args.concurrency, "--concurrency")],
                         prompts=prompts_setting(args))
