"""``sweep.py``'s sharing options: ``--compare``, ``--export``, ``--output`` and ``--redact-paths``.

Nothing here measures anything; every mode reads results files and writes something new.
An input file is never modified, and an existing results file is never overwritten (except a
redacted copy this command wrote before).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import replace
from pathlib import Path

from ..analysis.context_length import analyze_lengths, on_axis
from ..analysis.verdict import analyze, analyze_speedups
from ..common.errors import DraftbenchError, ResultsFileError, UsageError
from ..common.files import describe_write_error, same_as_stdout, write_output_text
from ..common.text_safety import safe_text
from ..results.file import ResultsFile, load_results, save_results
from ..results.output_paths import check_new_file
from ..results.peek import is_redacted_copy, peek_header
from ..share.compare import compare, load_compared, render
from ..share.compare.match import ComparedFile
from ..share.export import FORMATS, comparison_table, export, results_table
from ..share.redact_paths import redact_path_text, redacted_results
from . import write_stdout

REDACTED_MARK = "redacted_paths"     # top-level key of a redacted copy: it may be rewritten by the next one


def add_share_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--compare", nargs="+", metavar="FILE", help="compare two or more results files (upstream "
                   "files too): print a table and write a comparison report (--chart; --no-chart to skip)")
    p.add_argument("--export", choices=FORMATS, help="export --results FILE (or the --compare table) as a "
                   "Markdown table, CSV (one row per combination) or flat JSON, to standard output or --output")
    p.add_argument("--output", metavar="PATH", help="where --export (or the --redact-paths copy) is written; "
                   "never one of the input files")
    p.add_argument("--redact-paths", action="store_true", help="replace absolute paths with their file names and "
                   "home folders with ~ (and mask secret flag values) in what is written; with --results alone, "
                   "write a redacted copy (default <results>.shared.json)")


def wants_share(args: argparse.Namespace) -> bool:
    """Is this a sharing command (rather than a sweep or --chart-only)?"""
    return bool(args.compare or args.export or (args.redact_paths and not args.chart_only))


# --------------------------------------------------------------------------- outputs

def _looks_like_results(path: Path) -> bool | None:
    """True: a results file with measurements; False: something else; None: a redacted copy of ours.

    Judged from the file's first and last bytes, and only for a regular file: an output path may be
    /dev/stdout, a pipe or a process substitution, which must never be read (it would wait for ever)."""
    header = peek_header(path)
    if header is None or not header.is_results:
        return False
    return None if is_redacted_copy(path) else True


def check_output(path: Path, inputs: list[str], flag: str, *, html: bool = False) -> None:
    """Refuse to overwrite an input, a folder, or a results file (measurements are never overwritten)."""
    check_new_file(flag, path, [Path(p) for p in inputs], html=html)
    if path.exists() and _looks_like_results(path):
        raise UsageError(f"{flag} {path} is an existing results file; it is never overwritten",
                         "choose another path, or move that file away first")


def _info_stream(output: Path):
    """Where messages go: standard error when the output itself goes to standard output."""
    return sys.stderr if same_as_stdout(output) else sys.stdout


def write_text(path: Path, text: str, what: str) -> None:
    try:
        write_output_text(path, text)
    except OSError as exc:
        raise DraftbenchError(f"cannot write {what} {path}: {describe_write_error(exc)}",
                              "check the folder exists and is writable (and the disk has room), or choose another "
                              "path") from None


# --------------------------------------------------------------------------- modes

def _load(path: str, redact: bool) -> ResultsFile:
    results = load_results(path)
    return redacted_results(results) if redact else results


def export_results(args: argparse.Namespace) -> int:
    # Every export shows each row's figures and speed-up, recomputed; the Markdown and JSON exports also
    # end with each target's verdict and the command that runs it, which only the full analysis makes
    # (a CSV has no place for them: it takes the quicker analyze_speedups).
    loaded = _load(args.results, args.redact_paths)
    results = (analyze_lengths(loaded, analyze_speedups) if on_axis(loaded) else analyze_speedups(loaded)) \
        if args.export == "csv" else analyze(loaded)
    source = redact_path_text(str(args.results)) if args.redact_paths else str(args.results)
    text = export(results_table(results, source), args.export)
    if args.output:
        out = Path(args.output)
        check_output(out, [args.results], "--output")
        write_text(out, text, "the export")
        print(safe_text(f"Exported {len(results.results)} combinations to {out}"), file=_info_stream(out))
    else:
        write_stdout(safe_text(text), "the export")
    return 0


def redact_copy(args: argparse.Namespace) -> int:
    source = Path(args.results)
    out = Path(args.output) if args.output else source.with_name(source.stem + ".shared.json")
    check_output(out, [args.results], "--output")
    redacted = redacted_results(load_results(source))
    redacted = replace(redacted, extra={**redacted.extra, REDACTED_MARK: True})
    try:
        save_results(redacted, out)
    except ResultsFileError as exc:
        raise DraftbenchError(exc.message.replace("results file", "the redacted copy"), exc.fix) from None
    print(safe_text(f"Wrote a copy of {source} with local paths redacted to {out} (the original is unchanged)"),
          file=_info_stream(out))
    return 0


def default_chart(paths: list[str]) -> Path:
    stems = "-vs-".join(re.sub(r"[^A-Za-z0-9._+-]+", "-", Path(p).stem)[:40] for p in paths)
    return Path("results") / f"compare-{stems[:150]}.html"


def _refuse_one_file_twice(paths: list[str]) -> None:
    """``--compare A A`` (or A and a link to it) would say "the files agree" about one file."""
    for i, path in enumerate(paths):
        for earlier in paths[:i]:
            try:
                same = os.path.samefile(earlier, path)
            except (OSError, ValueError):
                continue     # a missing file is named when it is loaded
            if same:
                real = os.path.realpath(path)
                also = "" if str(earlier) == str(path) else f" ({real})"
                raise UsageError(f"--compare {earlier} and {path} are the same file{also}: comparing a file with "
                                 "itself shows no difference", "give each results file once, and at least two "
                                 "different files")


def run_compare(args: argparse.Namespace) -> int:
    paths = list(args.compare)
    if len(paths) < 2:
        raise UsageError("--compare needs at least two results files", "e.g. python sweep.py --compare a.json b.json")
    _refuse_one_file_twice(paths)
    chart = None if args.no_chart else Path(args.chart) if args.chart else default_chart(paths)
    output = Path(args.output) if args.output else None
    if output is not None and not args.export:
        raise UsageError("--output with --compare is where --export writes", "add --export md|csv|json, or use "
                         "--chart for the report")
    for path, flag in ((chart, "--chart"), (output, "--output")):
        if path is not None:     # checked before anything is written
            check_output(path, paths, flag, html=flag == "--chart")
    files = load_compared(paths)
    if args.redact_paths:
        files = [ComparedFile(f.letter, redact_path_text(f.path), analyze(redacted_results(f.results))) for f in files]
    comparison = compare(files)
    export_to_stdout = bool(args.export) and (output is None or same_as_stdout(output))
    info = sys.stderr if export_to_stdout else sys.stdout   # standard output carries the export alone
    if args.export:
        table = comparison_table(comparison)
        text = export(table, args.export)
        if output is not None:
            write_text(output, text, "the export")
        else:
            write_stdout(safe_text(text), "the export")
    if not export_to_stdout:
        print(safe_text(render(comparison)))
    if args.export and output is not None:
        print(safe_text(f"\nExported {len(table.records)} combinations to {output}"), file=info)
    if chart is not None:
        from ..report.compare_page import write_comparison
        try:
            write_comparison(comparison, chart, cdn=args.cdn)
        except OSError as exc:
            raise DraftbenchError(f"cannot write the comparison report {chart}: {describe_write_error(exc)}",
                                  "choose another --chart path") from None
        print(("" if export_to_stdout else "\n") + safe_text(f"Comparison report saved to {chart}"), file=info)
    return 0


def run_share(args: argparse.Namespace) -> int:
    """Dispatch a sharing command after checking that its options fit together."""
    if args.config or args.config_dir or args.dry_run:
        raise UsageError("--compare, --export and --redact-paths read results files; they do not run a sweep",
                         "drop --config/--config-dir/--dry-run, or run the sweep first")
    if args.compare:
        if args.results or args.chart_only:
            raise UsageError("--compare takes the results files itself", "drop --results/--chart-only: "
                             "python sweep.py --compare a.json b.json")
        return run_compare(args)
    if args.chart_only:
        raise UsageError("--chart-only and --export are separate commands", "run them one after the other")
    if not args.results:
        raise UsageError(f"{'--export' if args.export else '--redact-paths'} needs --results FILE (or --compare)",
                         "e.g. python sweep.py --results results/x.json --export md")
    if args.chart:
        raise UsageError("--chart is for a sweep, --chart-only or --compare",
                         "use --output PATH for where the export goes")
    return export_results(args) if args.export else redact_copy(args)
