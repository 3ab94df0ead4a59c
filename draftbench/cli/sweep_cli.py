"""``python sweep.py``: run sweeps, resume them, and regenerate reports."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..analysis.busy import busy_before
from ..analysis.next_step import rerun_of
from ..analysis.summary import verdicts_of
from ..analysis.verdict import analyze
from ..backends import get_backend
from ..backends.base import Backend
from ..common.bulk import collector_paused
from ..common.errors import ConfigError, DraftbenchError, UsageError
from ..common.numbers import number_text, temperature_text
from ..common.text_safety import safe_text
from ..config.prompts import prompts_for
from ..config.settings import MAX_STAGES, Override
from ..lifetime import machine_load
from ..lifetime.process import prepare_to_start_servers
from ..results.file import load_results
from ..results.lock import results_lock
from ..results.output_paths import check_output_paths, default_chart_for
from ..share.redact_paths import redacted_results
from ..sweep import EXIT_CONFIG, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, Sweep, default_paths, plan, shows_k
from ..sweep.config_file import SweepConfig, load_config
from ..sweep.console import Reporter, format_duration
from ..sweep.estimate import Estimator, accuracy, estimate_of, total_s
from ..sweep.memory_plan import memory_lines, planned_servers
from ..sweep.preflight import model_problems
from ..sweep.probe import probe_targets
from ..sweep.runner import EveryServerFails
from ..sweep.session import RunOptions
from ..sweep.stage_rows import in_stages
from ..sweep.target_plan import describe_cost, stages_seconds, target_plan
from . import run_main
from .init_cli import run_init
from .share_cli import add_share_arguments, run_share, wants_share

DRY_RUN_LOAD_S = 0.25    # the machine's load is read over the dry run, at least this long
PLAN_SHOWN = 30      # combinations --dry-run lists without --full-plan: the plan fits on a screen
EPILOG = """exit codes: 0 every combination measured; 3 finished, but some combinations failed or were
skipped (see the summary); 2 invalid config or arguments, or output paths that would overwrite an
input (nothing started); 1 other error (e.g. the results file is in use by another sweep);
130 interrupted (completed rows are saved; run the same command to resume)."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sweep.py", description="Benchmark every target alone and with every draft, "
                                "save results as it goes (resumable), and write an HTML report.", epilog=EPILOG)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--config", help="sweep config (JSON); see configs/example_sweep.json")
    src.add_argument("--config-dir", help="run every *.json in this folder except example_*.json, in name order")
    p.add_argument("--results", help="results JSON (default: results/<hardware>_<backend>_<name>.json); an "
                   "existing file is resumed")
    p.add_argument("--chart", help="report HTML (default: the results path with .html)")
    p.add_argument("--chart-only", action="store_true", help="only regenerate the report from --results")
    p.add_argument("--no-chart", action="store_true", help="do not write a report")
    p.add_argument("--cdn", action="store_true", help="load plotly.js from its CDN (small file, needs internet to "
                   "view) instead of embedding it")
    p.add_argument("--search", choices=("exhaustive", "adaptive"), help="override settings.search: exhaustive "
                   "measures every candidate at every stage until the verdict decides; adaptive races them (see "
                   "docs/adaptive.md)")
    p.add_argument("--design", choices=("auto", "interleaved", "bracketed", "sequential"), help="override "
                   "settings.design: how candidates are measured against the baseline (see README \"How the numbers "
                   "are made\")")
    p.add_argument("--budget", type=float, metavar="SECONDS", help="override settings.budget_s: seconds of "
                   "measuring per target; when spent the target is unresolved, and the same command with a larger "
                   "budget continues it")
    p.add_argument("--more", type=int, metavar="STAGES", default=0, help="continue every target left unresolved "
                   "(or with a shortlist) for this many stages beyond those planned, keeping every measurement")
    p.add_argument("--init", metavar="MODELS_DIR", help="write one config per model family found in this folder "
                   "of GGUF files into --config-dir (targets, the drafts that share their vocabulary, the n-gram "
                   "methods and heads this llama-server offers); existing files are never overwritten")
    p.add_argument("--dry-run", action="store_true", help="validate the config and print the plan; start nothing")
    p.add_argument("--full-plan", action="store_true", help=f"with --dry-run: list every combination (by default "
                   f"the plan shows the first {PLAN_SHOWN})")
    p.add_argument("--probe", action="store_true", help="with --dry-run: start each target not measured before "
                   "for one request, so the estimate rests on this machine's speed (nothing is saved)")
    p.add_argument("--ceiling", action="store_true", help="also run each draft at synthetic acceptance (its measured "
                   "mean accepted length, and full acceptance) to show what its cost allows; same as "
                   "settings.ceiling: true (llama.cpp only)")
    add_share_arguments(p)
    return p


def chart_only(args) -> int:
    if not args.results:
        raise UsageError("--chart-only needs --results FILE", "e.g. python sweep.py --chart-only --results "
                         "results/x.json")
    from ..report import write_report
    chart = Path(args.chart) if args.chart else default_chart_for(Path(args.results))
    check_output_paths(Path(args.results), chart, sweeping=False)
    results = load_results(args.results)
    results = analyze(redacted_results(results) if args.redact_paths else results)
    try:
        write_report(results, chart, cdn=args.cdn)
    except OSError as exc:
        raise DraftbenchError(f"cannot write the report {chart}: {exc.strerror or exc}",
                              "check free disk space and the folder's permissions, or pass another --chart") from None
    rerun = rerun_of(results, None, args.results)
    for verdict in verdicts_of(results):
        print(safe_text(verdict.verdict))
        for text in verdict.command_lines():      # what the console printed after the sweep, the same
            print(safe_text(f"  {text}"))
        if verdict.next_step is not None:
            print(safe_text(f"  {verdict.next_step.text(rerun)}"))
    print(f"Chart saved to {safe_text(chart)}")
    return EXIT_OK


SOURCES = {"measured": "measured before", "baseline": "from its target's baseline",
           "one stream": "from its one-stream run, slowed as its baseline was",
           "real run": "from its draft's real run", "probe": "from a short probe of its target",
           "model size": "rough guess from the model size"}


def overrides(args) -> tuple[Override, ...]:
    """The settings given on the command line: they replace the file's before the config is checked."""
    given = [Override("search", args.search, "--search"), Override("design", args.design, "--design"),
             Override("budget_s", args.budget, "--budget"), Override("ceiling", True if args.ceiling else None, "--ceiling")]
    return tuple(o for o in given if o.value is not None)


def run_config(path: str, args, *, results: str | None, chart: str | None, batch: tuple[Path, ...] = (),
               used: dict[str, Path] | None = None) -> int:
    """One config. ``batch``: every config of a --config-dir run, none of which may be written over;
    ``used``: results files of the batch's earlier configs (real path -> config), never shared."""
    config = load_config(path, overrides(args))
    backend = get_backend(config.backend)
    problems = backend.validate_candidates(config.specs(), config.settings)
    if problems:
        raise ConfigError(config.source, problems)
    results_path, default_chart = default_paths(config, results, chart)
    chart_path = None if args.no_chart else default_chart
    check_output_paths(results_path, chart_path, (Path(path), *batch))
    if used is not None:
        real = os.path.realpath(results_path)
        if real in used:
            raise UsageError(f"{path} would write {results_path}, the results file of {used[real]} in this batch",
                             "give the configs different names (or hardware), which name their results files")
        used[real] = Path(path)
    if args.dry_run:
        return dry_run(config, backend, args, results_path)
    # One writer per results file, for the whole run; taken before anything (logs included) is written.
    with results_lock(results_path):
        return Sweep(config, results_path, chart_path, options=RunOptions(cdn=args.cdn, more=args.more)).run()


def dry_run(config: SweepConfig, backend: Backend, args, results_path: Path) -> int:
    """What a run would do, checked and costed, starting nothing (``--probe``: one request per target)."""
    first_reading = machine_load.read()      # the machine's load over the dry run (ours counted apart)
    for warning in config.warnings:
        print(safe_text(f"Warning: {warning}"))
    runs = plan(config)
    # the checks the run makes before each combination, made now for all of them (exit 2)
    problems = model_problems(config, backend, runs)
    if problems:
        raise ConfigError(config.source, problems)
    print(safe_text(f"{config.source}: valid. {len(runs)} combination{'s' if len(runs) != 1 else ''}; "
                    f"results would go to {results_path}"))
    estimator = Estimator.for_results_path(config, len(prompts_for(config.settings).prompts), results_path)
    if args.probe:
        backend.check_ready_to_run(config.settings)
        prepare_to_start_servers()
        print("Probing the targets (one request each):")
        for line in probe_targets(config, backend, estimator, Reporter()):
            print(safe_text(f"  {line}"))
    _print_plan(config, runs, estimator, args.full_plan)
    _print_duration(config, backend, runs, estimator)
    now = machine_load.since(first_reading, at_least_s=DRY_RUN_LOAD_S)
    for line in accuracy([estimate_of(estimator, c) for c in runs], probed=args.probe, now=now):
        print(safe_text(line))
    for line in memory_lines(planned_servers(config, backend, runs)):     # what cannot fit, before anything starts
        print(safe_text(line))
    busy_now = busy_before(now, when="right now")
    if busy_now is not None:
        print(safe_text(f"Warning: {busy_now.message}"))
    print("Models (each checked: readable, and each draft's vocabulary against its targets):")
    for ref in config.targets + config.drafts:
        print(safe_text(f"  {ref.label}: {ref.path}"))
    for unreachable in backend.target_problems(config.targets, config.settings):   # connects; starts nothing
        print(safe_text(f"Warning: {unreachable}"))
    return EXIT_OK


def _print_plan(config: SweepConfig, runs: list, estimator: Estimator, full: bool) -> None:
    show_k = shows_k(config)
    shown = runs if full else runs[:PLAN_SHOWN]
    for i, run in enumerate(shown, 1):
        est = estimate_of(estimator, run)
        when = f"~{format_duration(est.seconds)} ({SOURCES[est.source]})" if est.source != "unknown" else \
            "duration unknown"
        print(safe_text(f"  [{i}/{len(runs)}] {run.title(show_k)}  {when}"))
    if len(shown) < len(runs):
        print(f"  … and {len(runs) - len(shown)} more (add --full-plan to list every combination)")


def _print_duration(config: SweepConfig, backend: Backend, runs: list, estimator: Estimator) -> None:
    """Each target's design and the cost of its stages, and the most the whole run may take."""
    prompts = list(prompts_for(config.settings).prompts)
    total = total_s(estimator, [c for c in runs if not in_stages(c)])
    settings = config.settings
    for target in config.targets:
        for heat in settings.temperatures if settings.temperature_axis else (None,):   # each temperature's stages
            found = target_plan(settings, backend, [c for c in runs if c.temperature == heat], target.label, prompts)
            if found is None:
                continue
            where = target.label + (f" at temperature {temperature_text(heat)}" if heat is not None else "")
            print(safe_text(f"Design for {where}: {found.design.label} — {found.why}."))
            print(safe_text(f"  {describe_cost(found, settings.warmup)}"))
            seconds = stages_seconds(found, estimator)
            total = (total or 0.0) + seconds if seconds else total
    if total is not None:
        budget = settings.budget_s
        print(f"Estimated duration: at most ~{format_duration(total)} (less where a target is decided early"
              + (" or the race leaves candidates behind" if settings.search == "adaptive" else "")
              + (f"; the budget caps each target at {format_duration(budget)}" if budget else "") + ")")


def run_config_dir(folder: str, args) -> int:
    d = Path(folder)
    if not d.is_dir():
        raise UsageError(f"--config-dir {folder} is not a folder", "give the folder that holds your sweep configs")
    configs = sorted(p for p in d.glob("*.json") if not p.name.startswith("example_") and not p.is_dir())
    if not configs:
        raise UsageError(f"{folder} holds no *.json configs (example_*.json are ignored)", "add a config")
    outcomes = []
    labels_by_path: dict[Path, str | None] = {}
    used: dict[str, Path] = {}
    for path in configs:
        print(f"\n##### {path} #####\n", flush=True)
        stopped = None
        try:
            code = run_config(str(path), args, results=None, chart=None, batch=tuple(configs), used=used)
        except DraftbenchError as exc:
            print(f"Error: {safe_text(exc)}", file=sys.stderr, flush=True)
            code = exc.exit_code
            # exit 2 is a config refused, or a run stopped before it measured (its server cannot run here)
            stopped = "STOPPED (the server cannot run on this machine)" if isinstance(exc, EveryServerFails) else None
        outcomes.append((path, code))
        labels_by_path[path] = stopped
        if code == EXIT_INTERRUPTED:
            break
    print("\n=== Config summary ===")
    labels = {0: "ok", 1: "FAILED", 2: "INVALID CONFIG", 3: "finished with failed or skipped combinations",
              130: "INTERRUPTED"}
    for path, code in outcomes:
        print(safe_text(f"  {path.name}: {labels_by_path.get(path) or labels.get(code, f'exit {code}')}"))
    if any(code == EXIT_INTERRUPTED for _, code in outcomes):
        return EXIT_INTERRUPTED
    failed = [p for p, code in outcomes if code not in (EXIT_OK,)]
    if not failed:
        return EXIT_OK
    return EXIT_CONFIG if all(code == EXIT_CONFIG for _, code in outcomes if code != EXIT_OK) else EXIT_ERROR


MORE_MAX = MAX_STAGES     # --more: as many stages as a plan may have


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if wants_share(args):
        with collector_paused():     # one pass over files, then exit: see common/bulk.py
            return run_share(args)
    if args.full_plan and not args.dry_run:
        raise UsageError("--full-plan lists the plan of --dry-run", "add --dry-run, or drop --full-plan")
    if args.probe and not args.dry_run:
        raise UsageError("--probe only goes with --dry-run (a sweep measures every target anyway)",
                         "add --dry-run, or drop --probe")
    if args.output:
        raise UsageError("--output is where --export or --redact-paths writes", "add --export md|csv|json, or drop it")
    if not 0 <= args.more <= MORE_MAX:
        shown = args.more if abs(args.more) < 10**18 else f"({number_text(args.more)})"
        raise UsageError(f"--more {shown}: must be a number of stages from 0 to {MORE_MAX:,}",
                         "give the stages to add to every unresolved target, e.g. --more 2 (each is one more look at "
                         "fresh prompts; settings.stages bounds a plan the same way)")
    if args.init:
        return run_init(args)
    if args.chart_only:
        if args.config_dir:
            raise UsageError("--chart-only works on one --results file, not --config-dir")
        with collector_paused():
            return chart_only(args)
    if args.config_dir:
        if args.results or args.chart:
            raise UsageError("--results/--chart name one file; with --config-dir each config gets its default "
                             "results/<hardware>_<backend>_<name>.json")
        return run_config_dir(args.config_dir, args)
    if not args.config:
        raise UsageError("give --config FILE, --config-dir DIR, or --chart-only --results FILE",
                         "see python sweep.py --help")
    return run_config(args.config, args, results=args.results, chart=args.chart)


def entry() -> None:
    sys.exit(run_main(main))


if __name__ == "__main__":
    entry()
