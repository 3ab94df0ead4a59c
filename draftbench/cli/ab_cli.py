"""``bench.py --target T.gguf --draft D.gguf``: the one-command A/B on llama.cpp (see :mod:`draftbench.sweep.ab`).

No config file: the options become the settings a sweep config would hold, checked the same way
(models before any server starts, ``--spec-type`` against the binary's ``--help``).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from ..backends.llamacpp.backend import LlamaCppBackend
from ..backends.llamacpp.settings import LlamaCppSettings
from ..common.errors import DraftbenchError, Problem, UsageError
from ..common.files import cache_dir
from ..common.text_safety import safe_text
from ..config.candidates import DRAFT_MAX, DRAFT_SAMPLING, DRAFT_SAMPLINGS, CandidateSpec, expand
from ..config.extra_args import check_server_args
from ..config.flag_rules import AB
from ..config.labels import MAX_LABEL, check_label
from ..config.long_prompts import server_context
from ..config.model_ref import ModelRef
from ..config.prompts import Prompt
from ..config.settings import DEFAULTS, Override, Settings
from ..results.file import save_results
from ..results.lock import results_lock
from ..sweep import Console, logs_dir_for
from ..sweep.ab import ABPlan, run_ab, screen
from .bench_options import common_flags, flag_settings, measure_options, prompts_setting
from .share_cli import check_output

# bench.py options that only make sense against a running server
SERVER_ONLY = ("url", "compare_url", "model", "api_key", "label", "compare_model", "compare_api_key", "compare_label")


def add_ab_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("one-command A/B (starts llama-server itself; replaces --url)")
    g.add_argument("--target", metavar="T.gguf", help="target GGUF: measured alone, then with --draft/--spec-type")
    g.add_argument("--draft", metavar="D.gguf", help="draft GGUF (default method draft-simple)")
    g.add_argument("--spec-type", metavar="TYPES", help="llama.cpp speculative type(s), comma-separated, e.g. "
                   "ngram-mod (no --draft needed) or draft-simple,ngram-mod (a hybrid); checked against "
                   "llama-server --help")
    g.add_argument("--draft-max", type=int, metavar="K", help="draft length k (default: the server's)")
    g.add_argument("--llama-bin", metavar="PATH", help="llama-server binary (default: searched as for sweeps)")
    g.add_argument("--gpu-layers", type=int, default=DEFAULTS.gpu_layers, metavar="N", help="layers on the GPU, "
                   f"target and draft (default {DEFAULTS.gpu_layers}; 0 = CPU only)")
    g.add_argument("--ctx-size", type=int, default=DEFAULTS.ctx_size, metavar="N",
                   help=f"context size (default {DEFAULTS.ctx_size})")
    g.add_argument("--startup-timeout", type=float, default=DEFAULTS.startup_timeout_s, metavar="S",
                   help=f"seconds each server may take to load (default {DEFAULTS.startup_timeout_s:g})")
    g.add_argument("--draft-sampling", choices=DRAFT_SAMPLINGS, help="how the draft's tokens are chosen (llama.cpp "
                   "--spec-draft-sampling; default: the server's, greedy): probabilistic samples it and verifies by "
                   "rejection — compare the two at a --temperature above 0")
    g.add_argument("--distribution-samples", type=int, metavar="N", help="above temperature 0: N answers to each of 3 "
                   "prompts from the target alone and from the candidate, on servers of their own, tested for one "
                   "output distribution (docs/temperature.md)")
    g.add_argument("--context-tokens", type=int, metavar="N", help="measure on long prompts of N tokens (real "
                   "documents cut with the target's own tokenizer: summarise, question, code edit, continue); -c is "
                   "sized to fit, and a length the models cannot take is refused before any server starts")


def _label(path: str) -> str:
    name = Path(path).name
    return (name[:-5] if name.lower().endswith(".gguf") else name)[:MAX_LABEL]


def _check_labels(target: str, draft: str | None) -> None:
    """File names become labels (shown, and used in log file names): checked as a config's labels are."""
    problems: list[Problem] = []
    for flag, path in (("--target", target), ("--draft", draft)):
        if path is not None and not check_label(flag, _label(path), {}, problems):
            raise UsageError(f"{flag} {safe_text(path)}: the file name {problems[0].message}",
                             "rename the file (or link it under a plain name) and pass that")


def _check_model(backend: LlamaCppBackend, flag: str, path: str) -> None:
    problem = backend.model_problem(path)
    if problem:
        raise UsageError(f"{flag} {path}: {problem.message}", problem.fix)


def _problem_flag(where: str) -> str:
    for suffix, flag in ((".method", "--spec-type"), (".draft", "--draft"), (".params.draft_max", "--draft-max"),
                         (".params.draft_sampling", "--draft-sampling")):
        if where.endswith(suffix):
            return flag
    return "--target/--draft/--spec-type"


def build_plan(args: argparse.Namespace, prompts: list[Prompt], backend: LlamaCppBackend) -> ABPlan:
    used = [f"--{name.replace('_', '-')}" for name in SERVER_ONLY if getattr(args, name, None)]
    if used:
        raise UsageError(f"{', '.join(used)} measure a running server; --target starts its own",
                         "use either --url (a server you started) or --target (the A/B), not both")
    if args.backend not in ("auto", "llamacpp", "llama-cpp"):
        raise UsageError(f"the A/B runs llama.cpp only, not --backend {args.backend}",
                         "drop --backend, or start the server yourself and use --url")
    methods = tuple(m.strip() for m in (args.spec_type or "").split(",") if m.strip())
    if not args.draft and not methods:
        raise UsageError("--target needs --draft D.gguf or --spec-type (e.g. ngram-mod) to compare against",
                         "e.g. python bench.py --target big.gguf --draft small.gguf")
    if args.draft_max is not None and args.draft_max < 1:     # a candidate's parameter, not a setting
        raise UsageError(f"--draft-max must be at least 1 (got {args.draft_max})")
    samples = _distribution_samples(args)
    server_args = list(getattr(args, "server_args", None) or [])
    settings = flag_settings([
        *common_flags(args), Override("llama_bin", args.llama_bin, "--llama-bin"),
        Override("gpu_layers", args.gpu_layers, "--gpu-layers"), Override("ctx_size", args.ctx_size, "--ctx-size"),
        Override("distribution_samples", samples, "--distribution-samples"),
        Override("startup_timeout_s", args.startup_timeout, "--startup-timeout"),
        Override("context_tokens", args.context_tokens, "--context-tokens")],
        # after --: to both servers, as settings.extra_args in a sweep (e.g. --threads 8 -fa on; their rules are
        # checked just below); a free port for each server
        fixed={"extra_args": server_args, "port": 0},
        prompts=prompts_setting(args), backend=LlamaCppSettings, path_keys=LlamaCppBackend.path_settings)
    problems, _ = check_server_args("--", server_args, allow_remote=False, entry=AB,
                                    where=lambda i: f"argument {i + 1} after --")
    if problems:
        raise UsageError(f"{problems[0].path}: {problems[0].message}", problems[0].fix)
    _check_labels(args.target, args.draft)
    _check_model(backend, "--target", args.target)
    if args.draft:
        _check_model(backend, "--draft", args.draft)
        pair = backend.pair_problem(args.target, args.draft)
        if pair:
            raise UsageError(f"--draft {args.draft}: {pair.message}", pair.fix)
    if args.context_tokens is not None:
        _check_context(args, backend, settings)
    draft = ModelRef(label=_label(args.draft), path=args.draft, raw_path=args.draft) if args.draft else None
    params = {**({DRAFT_MAX: args.draft_max} if args.draft_max else {}),
              **({DRAFT_SAMPLING: args.draft_sampling} if args.draft_sampling else {})}
    spec = CandidateSpec(label=draft.label if draft else "+".join(methods), method=methods, draft=draft,
                         params=params, where="$")
    problems = backend.validate_candidates((spec,), settings)
    if problems:
        p = problems[0]
        raise UsageError(f"{_problem_flag(p.path)}: {p.message}", p.fix)
    target = ModelRef(label=_label(args.target), path=args.target, raw_path=args.target)
    if draft is not None and draft.label == target.label:
        draft = ModelRef(label=draft.label + " (draft)", path=draft.path, raw_path=draft.raw_path)
        spec = CandidateSpec(label=draft.label, method=methods, draft=draft, params=spec.params, where="$")
    return ABPlan(target, expand(spec)[0], settings, tuple(prompts), measure_options(args), args.context_tokens)


def _distribution_samples(args: argparse.Namespace) -> int | None:
    n = args.distribution_samples         # its bounds are the setting's, checked with the others
    if n is not None and not any(t > 0 for t in args.temperatures):
        raise UsageError("--distribution-samples checks the output distribution above temperature 0; at 0 the "
                         "output check compares answers exactly", "add a --temperature above 0, or drop it")
    return n


def _check_context(args: argparse.Namespace, backend: LlamaCppBackend, settings: Settings) -> None:
    """--context-tokens: its own long prompts, and a length both models can take (before any server starts)."""
    if args.prompt or args.prompt_file or args.category:
        raise UsageError("--context-tokens measures its own long prompts (docs/long-context.md)",
                         "drop --prompt, --prompt-file and --category, or --context-tokens")
    found = backend.context_problem(args.target, args.draft, args.context_tokens,
                                    server_context(args.context_tokens, args.max_tokens, args.draft_max), settings)
    if found:
        raise UsageError(f"--context-tokens {args.context_tokens}: {found.message}",
                         (found.fix or "").replace("settings.context_tokens", "--context-tokens")
                         .replace("settings.max_tokens", "--max-tokens"))


def run_ab_command(args: argparse.Namespace, prompts: list[Prompt]) -> int:
    """Exit 0 when both combinations were measured (whatever the verdict); 1 when one failed."""
    backend = LlamaCppBackend()
    results_path = Path(args.json_path) if args.json_path else None
    if results_path is not None:     # the models and prompts are inputs; a results file is never overwritten
        check_output(results_path, [p for p in (args.target, args.draft, args.prompt_file) if p], "--json")
    plan = build_plan(args, prompts, backend)
    backend.check_ready_to_run(plan.settings)      # a missing llama-server is one error before anything starts
    console = Console()
    if results_path is None:
        logs = cache_dir() / "logs" / f"ab-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        results = run_ab(plan, backend, "llamacpp", logs, console)
        console.line()
        console.line(screen(results, plan))
    else:
        logs = logs_dir_for(results_path)
        with results_lock(results_path):     # one writer per results file, as for a sweep
            results = run_ab(plan, backend, "llamacpp", logs, console)
            console.line()
            console.line(screen(results, plan))
            save_results(results, results_path)
        console.line(f"Results saved to {results_path} (python sweep.py --results {results_path} --export md, "
                     "--chart-only, or --compare with another file)")
    console.line(f"Server logs: {logs}")
    failed = [r for r in results.results if not r.ok]
    if failed:
        raise DraftbenchError(f"the {failed[0].role} run did not produce a measurement: {failed[0].reason}",
                              f"see the server log in {logs}")
    return 0
