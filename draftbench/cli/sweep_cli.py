"""``python sweep.py``: run sweeps, resume them, and regenerate reports."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..analysis import analyze
from ..backends import get_backend
from ..config import load_config
from ..errors import ConfigError, DraftbenchError, UsageError
from ..redact import redacted_results
from ..results import load_results
from ..sweep import EXIT_CONFIG, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, Sweep, default_paths, plan, shows_k
from . import run_main
from .share_cli import add_share_arguments, run_share, wants_share

EPILOG = """exit codes: 0 every combination measured; 3 finished, but some combinations failed or were
skipped (see the summary); 2 invalid config or arguments (nothing started); 1 other error;
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
    p.add_argument("--dry-run", action="store_true", help="validate the config and print the plan; start nothing")
    add_share_arguments(p)
    return p


def chart_only(args) -> int:
    if not args.results:
        raise UsageError("--chart-only needs --results FILE", "e.g. python sweep.py --chart-only --results "
                         "results/x.json")
    from ..report import write_report
    results = load_results(args.results)
    results = analyze(redacted_results(results) if args.redact_paths else results)
    chart = Path(args.chart) if args.chart else Path(args.results).with_suffix(".html")
    write_report(results, chart, cdn=args.cdn)
    for entry in (results.summary or {}).get("targets", []):
        print(entry["verdict"])
    print(f"Chart saved to {chart}")
    return EXIT_OK


def run_config(path: str, args, *, results: str | None, chart: str | None) -> int:
    config = load_config(path)
    backend = get_backend(config.backend)
    problems = backend.validate_candidates(config.specs(), config.settings)
    if problems:
        raise ConfigError(config.source, problems)
    results_path, chart_path = default_paths(config, results, chart)
    if args.dry_run:
        for warning in config.warnings:
            print(f"Warning: {warning}")
        runs = plan(config)
        print(f"{config.source}: valid. {len(runs)} combination{'s' if len(runs) != 1 else ''}; "
              f"results would go to {results_path}")
        show_k = shows_k(config)
        for i, run in enumerate(runs, 1):
            print(f"  [{i}/{len(runs)}] {run.title(show_k)}")
        print("Models:")
        for ref in config.targets + config.drafts:
            problem = backend.model_problem(ref.path)
            print(f"  {ref.label}: {ref.path}" + (f"  <- {problem.message}" if problem else ""))
        return EXIT_OK
    return Sweep(config, results_path, None if args.no_chart else chart_path, cdn=args.cdn).run()


def run_config_dir(folder: str, args) -> int:
    d = Path(folder)
    if not d.is_dir():
        raise UsageError(f"--config-dir {folder} is not a folder", "give the folder that holds your sweep configs")
    configs = sorted(p for p in d.glob("*.json") if not p.name.startswith("example_"))
    if not configs:
        raise UsageError(f"{folder} holds no *.json configs (example_*.json are ignored)", "add a config")
    outcomes = []
    for path in configs:
        print(f"\n##### {path} #####\n", flush=True)
        try:
            code = run_config(str(path), args, results=None, chart=None)
        except DraftbenchError as exc:
            print(f"Error: {exc}", file=sys.stderr, flush=True)
            code = exc.exit_code
        outcomes.append((path, code))
        if code == EXIT_INTERRUPTED:
            break
    print("\n=== Config summary ===")
    labels = {0: "ok", 1: "FAILED", 2: "INVALID CONFIG", 3: "finished with failed or skipped combinations",
              130: "INTERRUPTED"}
    for path, code in outcomes:
        print(f"  {path.name}: {labels.get(code, f'exit {code}')}")
    if any(code == EXIT_INTERRUPTED for _, code in outcomes):
        return EXIT_INTERRUPTED
    failed = [p for p, code in outcomes if code not in (EXIT_OK,)]
    if not failed:
        return EXIT_OK
    return EXIT_CONFIG if all(code == EXIT_CONFIG for _, code in outcomes if code != EXIT_OK) else EXIT_ERROR


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if wants_share(args):
        return run_share(args)
    if args.output:
        raise UsageError("--output is where --export or --redact-paths writes", "add --export md|csv|json, or drop it")
    if args.chart_only:
        if args.config_dir:
            raise UsageError("--chart-only works on one --results file, not --config-dir")
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
