"""The sweep: every target alone, then with every draft; saved after each combination.

Order and console output follow upstream draftbench. What is new: validation before
anything starts, resume, speculation checks, statistics, and a guarantee that no server
outlives a combination (or the sweep) and no measured row is lost.
"""

from __future__ import annotations

import os
import platform
import re
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from . import __version__
from .analysis import analyze, summarize_records
from .backends import get_backend
from .backends.base import Backend, LaunchSpec
from .config import ModelRef, SweepConfig
from .errors import DraftbenchError, ResultsFileError, ServerError
from .fragments import describe as describe_fragments
from .measure import MeasurementFailed, MeasureOptions, run_prompts
from .process import free_port, port_is_free, wait_port_free
from .prompts import resolve_prompts
from .results import SCHEMA_VERSION, ResultsFile, Row, combination_title, load_results, now_iso, save_results
from .stats import describe_speedup

# Settings that change what is measured: a results file made with other values is not resumed.
MEASUREMENT_KEYS = ("runs", "max_tokens", "temperature", "gpu_layers", "ctx_size", "prompts", "seed", "warmup",
                    "extra_args", "draft_p_min",
                    # backend settings that change what is measured
                    "vllm_method", "vllm_speculative_config", "vllm_prefix_caching", "lmstudio_gpu",
                    "lmstudio_endpoint", "lmstudio_client", "lmstudio_min_draft_length")

EXIT_OK, EXIT_ERROR, EXIT_CONFIG, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


@dataclass(frozen=True)
class Run:
    """One planned combination."""

    role: str                  # baseline | speculative | control | draft_alone
    target: ModelRef           # the model the server loads as its main model
    draft: ModelRef | None = None
    draft_max: int | None = None

    @property
    def key(self) -> tuple:
        return (self.role, self.target.label, self.draft.label if self.draft else None, self.draft_max)

    def title(self, show_k: bool) -> str:
        return combination_title(self.role, self.target.label, self.draft.label if self.draft else None,
                                 self.draft_max, show_k=show_k)


def plan(config: SweepConfig) -> list[Run]:
    runs: list[Run] = []
    for target in config.targets:
        runs.append(Run("baseline", target))
        for draft in config.drafts:
            for k in config.draft_max_values:
                runs.append(Run("speculative", target, draft, k))
        if config.settings.get("control_baseline"):
            runs.append(Run("control", target))
    if config.settings.get("draft_alone"):
        for draft in config.drafts:
            runs.append(Run("draft_alone", draft))
    return runs


def default_paths(config: SweepConfig, results: str | None, chart: str | None) -> tuple[Path, Path]:
    results_path = Path(results) if results else Path("results") / f"{config.default_stem()}.json"
    chart_path = Path(chart) if chart else results_path.with_suffix(".html")
    return results_path, chart_path


def config_snapshot(config: SweepConfig) -> dict:
    return {
        "source": config.source,
        "targets": [{"label": t.label, "path": t.path} for t in config.targets],
        "drafts": [{"label": d.label, "path": d.path} for d in config.drafts],
        "measurement": {k: config.settings.get(k) for k in MEASUREMENT_KEYS},
    }


def check_resumable(existing: ResultsFile, config: SweepConfig, path: Path) -> None:
    """Refuse to mix rows from another config into a results file."""
    fix = (f"use --results with a new file name to start a separate sweep, or restore the config "
           f"that made {path}")
    if existing.is_upstream:
        raise ResultsFileError(f"{path} was written by upstream draftbench (no schema_version); it can be charted "
                               "(--chart-only) but not resumed", fix)
    differences = []
    for key in ("name", "hardware", "backend"):
        if getattr(existing, key) != getattr(config, key):
            differences.append(f"{key} {getattr(existing, key)!r} vs {getattr(config, key)!r}")
    old = (existing.config or {})
    old_measure = old.get("measurement") or {}
    for key in MEASUREMENT_KEYS:
        if key in old_measure and old_measure[key] != config.settings.get(key):
            differences.append(f"settings.{key} {old_measure[key]!r} vs {config.settings.get(key)!r}")
    for kind in ("targets", "drafts"):
        old_paths = {m["label"]: m["path"] for m in old.get(kind) or [] if isinstance(m, dict)}
        for ref in getattr(config, kind):
            if ref.label in old_paths and old_paths[ref.label] != ref.path:
                differences.append(f"{kind} {ref.label!r} points to {ref.path} now, {old_paths[ref.label]} then")
    if differences:
        raise ResultsFileError(f"{path} was made with a different config: " + "; ".join(differences), fix)


def host_info() -> dict:
    info = {"os": platform.platform(), "machine": platform.machine(), "python": platform.python_version(),
            "cpu_count": os.cpu_count(), "cpu": None, "memory_gb": None}
    try:
        with open("/proc/cpuinfo") as fh:
            m = re.search(r"model name\s*:\s*(.+)", fh.read())
            info["cpu"] = m.group(1).strip() if m else None
        with open("/proc/meminfo") as fh:
            m = re.search(r"MemTotal:\s*(\d+) kB", fh.read())
            info["memory_gb"] = round(int(m.group(1)) / 1024 / 1024, 1) if m else None
    except OSError:
        info["cpu"] = platform.processor() or None
    return info


class Console:
    def __init__(self, stream=None):
        self.stream = stream or sys.stdout

    def line(self, text: str = "") -> None:
        print(text, file=self.stream, flush=True)

    def part(self, text: str) -> None:
        print(text, end="", file=self.stream, flush=True)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-")[:60] or "run"


def _fmt_duration(seconds: float) -> str:
    seconds = round(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


class Sweep:
    def __init__(self, config: SweepConfig, results_path: Path, chart_path: Path | None, *, console: Console | None = None,
                 cdn: bool = False):
        self.config = config
        self.settings = config.settings
        self.results_path = results_path
        self.chart_path = chart_path
        self.console = console or Console()
        self.cdn = cdn
        self.backend: Backend = get_backend(config.backend)
        self.logs_dir = results_path.with_name(results_path.stem + ".logs")

    # ------------------------------------------------------------------ setup
    def load_or_create(self) -> ResultsFile:
        if self.results_path.exists():
            existing = load_results(self.results_path)
            check_resumable(existing, self.config, self.results_path)
            return replace(existing, config=config_snapshot(self.config), settings=self._public_settings())
        return ResultsFile(name=self.config.name, hardware=self.config.hardware, backend=self.config.backend,
                           model_family=self.config.model_family, settings=self._public_settings(),
                           timestamp=now_iso(), schema_version=SCHEMA_VERSION, tool_version=__version__,
                           config=config_snapshot(self.config), host=host_info())

    def _public_settings(self) -> dict:
        # Secrets (API keys) never reach results: only settings that are not credentials.
        return {k: v for k, v in self.settings.items() if ("key" not in k.lower() and "token" not in k.lower())
                or k == "max_tokens"}

    # ------------------------------------------------------------------ main loop
    def run(self) -> int:
        c = self.console
        for warning in self.config.warnings:
            c.line(f"Warning: {warning}")
        results = self.load_or_create()
        runs = plan(self.config)
        done = {r.key for r in results.results if r.ok}
        pending = [r for r in runs if r.key not in done]
        prompts = resolve_prompts(self.settings.get("prompts"))
        options = MeasureOptions.from_settings(self.settings)
        show_k = len(self.config.draft_max_values) > 1
        # One clear error before anything starts if the backend cannot run at all.
        self.backend.check_ready_to_run(self.settings)

        n_targets, n_drafts = len(self.config.targets), len(self.config.drafts)
        c.line("=" * 60)
        c.line(f"  Sweep: {n_targets} target{'s' if n_targets != 1 else ''} x {n_drafts} draft"
               f"{'s' if n_drafts != 1 else ''} = {len(runs)} runs")
        c.line(f"  {len(prompts)} prompts x {options.runs} run(s), max_tokens {options.max_tokens}, "
               f"backend {self.config.backend}")
        if len(pending) < len(runs):
            c.line(f"  Resuming {self.results_path}: {len(runs) - len(pending)} done, {len(pending)} remaining")
        for note in self.backend.sweep_notes(self.settings):
            c.line(f"  Note: {note}")
        c.line("=" * 60)
        c.line()

        save_results(analyze(results), self.results_path)
        durations: list[float] = []
        failed_baselines: dict[str, str] = {}
        sweep_start = time.perf_counter()
        interrupted = False
        try:
            for index, run in enumerate(runs, 1):
                if run.key in done:
                    continue
                c.line(f"[{index}/{len(runs)}] {run.title(show_k)}")
                started = time.perf_counter()
                row = self._run_one(run, index, prompts, options, failed_baselines)
                if run.role == "baseline" and not row.ok:
                    failed_baselines[run.target.label] = row.reason or row.status
                results = analyze(results.with_row(row))
                save_results(results, self.results_path)
                self._print_row(results.row(row.key) or row)
                if row.status != "skipped":
                    durations.append(time.perf_counter() - started)
                remaining = sum(1 for r in runs[index:] if r.key not in done)
                elapsed = time.perf_counter() - sweep_start
                eta = f", about {_fmt_duration(remaining * sum(durations) / len(durations))} left" \
                    if durations and remaining else ""
                c.line(f"  Elapsed {_fmt_duration(elapsed)}{eta}")
                c.line()
        except KeyboardInterrupt as exc:
            interrupted = True
            c.line()
            c.line(f"Interrupted ({exc or 'Ctrl-C'}). Every completed combination is saved in {self.results_path}.")
            c.line("Resume with the same command; only the remaining combinations will run.")
        finally:
            results = analyze(results)
            save_results(results, self.results_path)
            chart_written = bool(self.chart_path) and self._write_chart(results)
        if interrupted:
            return EXIT_INTERRUPTED
        self._print_summary(results, chart_written)
        bad = [r for r in results.results if not r.ok]
        return EXIT_INCOMPLETE if bad else EXIT_OK

    def _write_chart(self, results: ResultsFile) -> bool:
        from .report import write_report
        try:
            write_report(results, self.chart_path, cdn=self.cdn)
            return True
        except Exception as exc:  # the results are what matter; never lose them over a chart
            self.console.line(f"Warning: could not write the report {self.chart_path}: {exc}; regenerate it with "
                              f"--chart-only --results {self.results_path}")
            return False

    # ------------------------------------------------------------------ one combination
    def _row_base(self, run: Run) -> dict:
        if run.role == "draft_alone":
            return dict(target=run.target.label, draft=None, role=run.role, target_path=run.target.path)
        return dict(target=run.target.label, draft=run.draft.label if run.draft else None, role=run.role,
                    draft_max=run.draft_max if run.draft else None, target_path=run.target.path,
                    draft_path=run.draft.path if run.draft else None, started_at=now_iso(),
                    speculation_active=None if run.draft else (False if run.role == "speculative" else None))

    def _run_one(self, run: Run, index: int, prompts, options: MeasureOptions, failed_baselines: dict) -> Row:
        c = self.console
        base = self._row_base(run)
        if run.role in ("speculative", "control") and run.target.label in failed_baselines:
            reason = f"skipped: the baseline of {run.target.label} failed ({failed_baselines[run.target.label]})"
            return Row(status="skipped", reason=reason.splitlines()[0], **base)
        for ref in (run.target, run.draft):
            if ref is None:
                continue
            problem = self.backend.model_problem(ref.path)
            if problem:
                # A model that is not there yet is skipped (add it and resume); a broken one is an error.
                status = "error" if os.path.exists(ref.path) else "skipped"
                return Row(status=status, reason=problem.replace("\n  Fix:", " — fix:"), **base)

        port = self._choose_port()
        log_path = self.logs_dir / f"{index:03d}-{_slug(run.title(True))}.log"
        extra = tuple(self.settings.get("extra_args") or ()) + run.target.extra_args + \
            (run.draft.extra_args if run.draft else ())
        spec = LaunchSpec(target=run.target.path, draft=run.draft.path if run.draft else None,
                          draft_max=run.draft_max if run.draft else None, host=self.settings["host"], port=port,
                          ctx_size=self.settings["ctx_size"], gpu_layers=self.settings["gpu_layers"],
                          extra_args=extra, settings=self.settings,
                          startup_timeout_s=self.settings["startup_timeout_s"], log_path=str(log_path))
        wall_start = time.perf_counter()
        server = None
        c.part("  Starting server ... ")
        try:
            try:
                server = self.backend.launch(spec)
            except ServerError as exc:
                if exc.kind != "port_in_use":
                    raise
                # Someone took the port between our check and the server's bind: once more elsewhere.
                spec = replace(spec, port=free_port(spec.host))
                c.part(f"port {port} was taken, retrying on {spec.port} ... ")
                server = self.backend.launch(spec)
            c.line(f"ready ({server.load_time_s:.1f} s)" if server.load_time_s else "ready")
            for note in server.warnings:   # e.g. "attached to a running LM Studio server"
                c.line(f"  Note: {note}")
            server_info = {"backend": self.config.backend, "command": server.command, "version": server.version,
                           "log": server.log_path, "port": server.port or spec.port}
            status = server.speculation_status(requested=run.draft is not None)
            if run.draft is not None and status.active is False:
                c.line(f"  ! Speculation is not active: {status.reason}")
                return Row(status="error", reason=f"speculation not active: {status.reason}", server=server_info,
                           load_time_s=_r(server.load_time_s), wall_time=_r(time.perf_counter() - wall_start),
                           **dict(base, speculation_active=False))
            c.part("  Benchmarking ... ")
            records = run_prompts(server, prompts, options, on_request=lambda i, n, rec: c.part("."))
            c.part(" ")
            fields = summarize_records(records, max_tokens=options.max_tokens, runs=options.runs)
            speculation_active = None
            warnings = list(server.warnings) + list(fields.pop("warnings"))
            if run.draft is not None:
                drafted = fields.get("draft_n")
                if drafted is None:
                    speculation_active = status.active
                    if status.active is None:
                        warnings.append("the server reports no draft counters: acceptance unknown")
                else:
                    speculation_active = drafted > 0
                    if drafted == 0:
                        warnings.append("the draft never drafted a token (draft_n = 0 on every request): this row is "
                                        "not a speed-up. Likely causes: incompatible vocabularies, a draft the server "
                                        "dropped, or draft settings (p-min) that reject every draft")
            tps = fields.get("mean_tps")
            line = f"{tps:.2f} tok/s" if tps is not None else "n/a tok/s"
            if run.role == "speculative":
                rate = fields.get("acceptance_rate")
                line += f" (acceptance: {'n/a' if rate is None else f'{rate:.0%}'})"
            c.line(line)
            return Row(status="ok", warnings=tuple(warnings),
                       server=server_info, load_time_s=_r(server.load_time_s), requests=tuple(records),
                       wall_time=_r(time.perf_counter() - wall_start),
                       **{**base, **fields, "speculation_active": speculation_active})
        except MeasurementFailed as failure:
            c.line("failed")
            err = failure.error
            tail = getattr(err, "log_tail", "") or (server.log_tail(20) if server else "")
            c.line(f"  ! {_first_line(err)}")
            return Row(status="error", reason=_first_line(err), requests=tuple(failure.records),
                       server={"backend": self.config.backend, "command": server.command if server else None,
                               "version": server.version if server else None,
                               "log": server.log_path if server else str(log_path), "log_tail": tail},
                       wall_time=_r(time.perf_counter() - wall_start), **base)
        except DraftbenchError as exc:
            c.line("failed")
            c.line(f"  ! {_first_line(exc)}")
            if getattr(exc, "fix", None):
                c.line(f"    Fix: {exc.fix}")
            return Row(status="error", reason=_first_line(exc) + (f" — {exc.fix}" if getattr(exc, 'fix', None) else ""),
                       server={"backend": self.config.backend, "log": str(log_path),
                               "log_tail": getattr(exc, "log_tail", "")},
                       wall_time=_r(time.perf_counter() - wall_start), **base)
        finally:
            if server is not None:
                server.stop()
                c.line("  Server stopped")

    def _choose_port(self) -> int:
        host, port = self.settings["host"], self.settings["port"]
        if port == 0:
            return free_port(host)
        # Our previous server has exited; its socket may linger for a moment.
        if port_is_free(host, port) or wait_port_free(host, port, timeout_s=3.0):
            return port
        new = free_port(host)
        self.console.line(f"  Note: port {port} is in use by another program; using port {new} for this run")
        return new

    # ------------------------------------------------------------------ output
    def _print_row(self, row: Row) -> None:
        c = self.console
        if row.status == "skipped":
            c.line(f"  Skipped: {row.reason}")
            return
        if row.status == "error":
            c.line(f"  Error recorded: {row.reason}")
            return
        if row.role == "speculative" and row.speculation_active is False:
            c.line("  Speed-up vs baseline: none — speculation was not active, so this is the target alone")
        elif row.role in ("speculative", "control") and row.speedup:
            label = "Drift vs first baseline" if row.role == "control" else "Speed-up vs baseline"
            c.line(f"  {label}: {describe_speedup(row.speedup)}")
        if row.equivalence and row.equivalence.get("checked"):
            eq = row.equivalence
            c.line(f"  Output: identical to the baseline on {eq['matched']}/{eq['compared']} requests"
                   + ("" if not eq["mismatches"] else
                      f" (first difference at character {eq['mismatches'][0]['char_pos']} of "
                      f"{eq['mismatches'][0]['prompt_id']})"))
        if row.role == "speculative" and row.draft_fragments:
            c.line(f"  {describe_fragments(row.draft_fragments)}")
        if row.role == "speculative" and row.speculation_active is False:
            c.line("  ! Speculation was not active: this row is not counted as a speed-up")
        for warning in row.warnings:
            c.line(f"  ! {warning}")

    def _print_summary(self, results: ResultsFile, chart_written: bool = False) -> None:
        c = self.console
        c.line("=== Sweep complete ===")
        bad = [r for r in results.results if not r.ok]
        if bad:
            c.line(f"{len(bad)} combination(s) did not produce a measurement:")
            for r in bad:
                c.line(f"  - {r.target}{' + ' + r.draft if r.draft else ''}: {r.status}: {r.reason}")
        c.line()
        c.line("Verdict:")
        for entry in (results.summary or {}).get("targets", []):
            c.line(f"  {entry['verdict']}")
        c.line()
        c.line(f"Results saved to {self.results_path}")
        if chart_written:
            c.line(f"Chart saved to {self.chart_path}")


def _first_line(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


def _r(x):
    return None if x is None else round(x, 3)
