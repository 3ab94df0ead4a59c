"""One-command A/B (``bench.py --target T --draft D``): the target alone against the target with one
speculative candidate, measured the way a sweep measures them; one screen with both rates, the
multiplier with its interval, acceptance, output match and a verdict.

The measurement is the sweep's: a target with one candidate, measured in ``runs`` stages of every prompt
on fresh servers, in the same design (``sweep/schedule.py``: both servers up together with requests in
ABBA order where they fit side by side, else a baseline server before and after the candidate's — never
the target first and the candidate minutes later, which puts every drift on one side), by the same
stage loop (:class:`run.TargetRun`: same launch path, same checks that the baseline did not
speculate and that the candidate did) and :func:`analysis.analyze` for the speed-up, so an A/B and a
sweep agree on the same pair. With one candidate there is nothing to select among.
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from .. import __version__
from ..analysis.busy import busy_before, busy_row
from ..analysis.context_length import extra_ttft_s, timing, typical_output_tokens
from ..analysis.draft.evidence import why_slower
from ..analysis.stats import BENCH_FLAGS, describe_speedup
from ..analysis.verdict import analyze
from ..backends.base import Backend
from ..common.redact_secrets import redact_args
from ..config.candidates import Candidate
from ..config.model_ref import ModelRef
from ..config.prompts import Prompt
from ..config.settings import Settings
from ..lifetime import machine_load
from ..measure.sequential import MeasureOptions
from ..results.file import SCHEMA_VERSION, ResultsFile, Row, now_iso
from ..results.host import host_info
from ..results.kinds import Role
from . import Combination, CombinationRunner, Reporter, RunnerIO, long_context
from .init_configs import this_hardware
from .launcher import Launcher
from .run import TargetRun
from .schedule import Design
from .session import MIN_WINDOW_S
from .stage_plan import plan_stages
from .stage_rows import RowWriter, StagedDesign
from .stages import Budget
from .store import RowStore
from .target_plan import TargetPlan, choose_design, conversation

WIDTH = 78
AB_NAME = "ab"


@dataclass(frozen=True)
class ABPlan:
    """What an A/B measures: a target, one candidate, the prompts and how."""

    target: ModelRef
    candidate: Candidate
    settings: Settings
    prompts: tuple[Prompt, ...]
    options: MeasureOptions
    context_tokens: int | None = None      # long prompts of this many tokens, cut with the target's tokenizer

    def combinations(self) -> tuple[Combination, Combination]:
        return (Combination(Role.BASELINE, self.target, context_tokens=self.context_tokens),
                Combination(Role.SPECULATIVE, self.target, self.candidate, context_tokens=self.context_tokens))


def run_ab(plan: ABPlan, backend: Backend, backend_name: str, logs_dir: Path, reporter: Reporter) -> ResultsFile:
    """Measure the baseline and the candidate in the sweep's design (the candidate skipped when the
    baseline failed); both rows, analysed. Every server is stopped before this returns or raises
    (Ctrl-C included): the step runner stops each one."""
    runner = CombinationRunner(backend, backend_name, plan.settings, list(plan.prompts), plan.options,
                               RunnerIO(logs_dir, reporter, flags=BENCH_FLAGS))
    prompt_set = None
    if plan.context_tokens is not None:
        built = long_context.build(runner, plan.target, (plan.context_tokens,), filler=plan.settings.context_filler,
                                   seed=plan.settings.seed)
        runner.prompts = built.by_length[plan.context_tokens]
        prompt_set = long_context.prompt_set_record(None, {plan.target.label: built})
    baseline, candidate = plan.combinations()
    design, why = choose_design(plan.settings, backend, baseline, [candidate])
    load = machine_load.now(machine_load.BEFORE_WINDOW_S)     # before any server of ours runs
    busy = busy_before(load, when="before the A/B started")
    if busy is not None:
        reporter.warning(busy.message)
    # settings as a sweep saves them: a key passed after -- is masked (sweep/resume.py)
    settings = {**plan.settings.to_dict(), "extra_args": redact_args(plan.settings.extra_args)}
    store = RowStore(ResultsFile(name=AB_NAME, hardware=this_hardware(), backend=backend_name, model_family="",
                                    settings=settings, results=(), timestamp=now_iso(), schema_version=SCHEMA_VERSION,
                                    tool_version=__version__, host=host_info(), prompt_set=prompt_set,
                                    made_by="bench.py", load_before=[{"at": now_iso(), **load.to_dict()}]))
    reporter.note(f"{design.label} — {why}")
    with machine_load.Monitor() as monitor:
        _measure(ab_plan(plan, runner.prompts, design, why), runner, store, reporter)
        results = store.current()
        rows = {r.role: _with_load(r, monitor) for r in results.results}
    ordered = tuple(r for role in (Role.BASELINE, Role.SPECULATIVE) if (r := rows.get(role)) is not None)
    return analyze(replace(results, results=ordered))


def ab_plan(plan: ABPlan, prompts: Sequence[Prompt], design: Design, why: str) -> TargetPlan:
    """The A/B as a sweep's target with one candidate: ``runs`` stages, each measuring every prompt on fresh
    servers in the design (with one candidate there is nothing to select among)."""
    baseline, candidate = plan.combinations()
    stages = plan_stages([p.category for p in prompts], [conversation(p) for p in prompts],
                         horizon=plan.options.runs, size=len(prompts), seed=plan.settings.seed)
    return TargetPlan(baseline, {candidate.name: candidate}, design, why, stages, tuple(prompts))


def _measure(target: TargetPlan, runner: CombinationRunner, store: RowStore, reporter: Reporter) -> None:
    """Every stage of the A/B (each server stopped before this returns, Ctrl-C included); the candidate is
    skipped when the baseline failed."""
    rows = RowWriter(store, runner, StagedDesign(target.design, target.stages.horizon, target.stages.size,
                                                 target.stages.fixed))
    run = TargetRun(Launcher(runner, reporter, time.perf_counter), target, rows, reporter)
    no_budget = Budget(None, time.perf_counter, 0.0, 0.0)
    for stage in range(target.stages.horizon):
        if run.stage(stage, {name: list(target.stages.stage(stage)) for name in target.candidates}, no_budget):
            for row in rows.skip_unmeasured(target.baseline, target.candidates.values(), run.baseline_failed):
                reporter.row_recorded(row)
            return
        if run.dead:
            return


def _with_load(row: Row, monitor: machine_load.Monitor) -> Row:
    """A row with other programs' CPU share over its measuring time (both sides of the A/B run together)."""
    load = monitor.over_last(max(row.wall_time or 0.0, MIN_WINDOW_S))
    row = replace(row, machine_load=machine_load.add_window(None, load) if load is not None else None)
    finding = busy_row(row)
    return replace(row, warnings=row.warnings + (finding,)) if finding is not None else row


# --------------------------------------------------------------------------- the verdict

def verdict(baseline: Row, spec: Row) -> str:
    """One plain sentence: use it, don't, or why the measurement cannot tell."""
    if not baseline.ok:
        return f"No verdict: the baseline did not run ({baseline.reason})."
    if not spec.ok:
        return f"No verdict: the speculative run did not complete ({spec.reason})."
    if spec.speculation_active is False:
        return ("Do not use it as configured: the server never speculated (the draft drafted nothing), so there is "
                "no speed-up to have.")
    s = spec.speedup
    if not s:
        return "No verdict: no decode rate was measured."
    text = describe_speedup(s)
    if s.significant is None:
        return (f"No verdict yet: {text} — too few requests for a confidence interval; raise --runs to 3 or add "
                "prompts.")
    if s.significant is False:
        out = (f"Not worth it here: the difference ({text}) is within the noise; raise --runs to resolve smaller "
               "effects.")
    elif s.ratio > 1:
        out = f"Use it: {s.ratio:.2f}x as fast with speculative decoding on this machine ({text})."
    else:
        out = (f"Do not use it here: speculative decoding is {1 / s.ratio:.2f}x slower on this machine ({text})."
               + why_slower(spec))
    if spec.acceptance_rate is not None and spec.acceptance_rate < 0.1:
        out += (f" The draft rarely predicts this target ({spec.acceptance_rate:.0%} accepted): use a draft from the "
                "same model family.")
    return out


# --------------------------------------------------------------------------- the screen

def _rate(row: Row) -> str:
    if not row.ok or row.mean_tps is None:
        return f"{row.status}: {row.reason}" if not row.ok else "n/a"
    tps = row.tps or {}
    text = f"{row.mean_tps:.2f} tok/s"
    if tps.get("ci95_low") is not None:
        text += f"   (median {tps['median']:.2f}, 95% CI [{tps['ci95_low']:.2f}, {tps['ci95_high']:.2f}])"
    return text


def _multiplier(spec: Row) -> str:
    s = spec.speedup
    if not spec.ok or not s:
        return "n/a"
    text = f"{s.ratio:.2f}x"
    if s.has_interval and s.ci95_low is not None:
        text += f" [{s.ci95_low:.2f}x, {f'{s.ci95_high:.2f}x' if s.ci95_high is not None else 'unbounded'}]"
    significance = {True: "significant", False: "not significant", None: "significance unknown"}
    return f"{text}  {significance[s.significant]}"


def _acceptance(spec: Row) -> str:
    if spec.acceptance_rate is not None:
        return f"{spec.acceptance_rate:.1%}  ({spec.draft_n_accepted} of {spec.draft_n} drafted tokens accepted)"
    if spec.draft_n == 0:
        return "n/a — the server drafted nothing"
    return "n/a — the server reported no draft counters"


def _output(spec: Row) -> str:
    eq = spec.equivalence or {}
    if not eq:
        return "not compared"
    if not eq.get("checked"):
        return f"not compared ({eq.get('reason')})"
    text = f"identical to the baseline on {eq['matched']}/{eq['compared']} requests"
    if eq.get("mismatches"):
        first = eq["mismatches"][0]
        text += f" (first difference in {first['prompt_id']} at character {first['char_pos']})"
    return text


def _first_token(baseline: Row, spec: Row, plan: ABPlan) -> list[tuple[str, str]]:
    """Long prompts: time to first token split (the server's prefill; the draft's own prefill shows as the extra
    time over the baseline) and a whole request of the typical output length, modelled from both."""
    typical = typical_output_tokens(plan.settings)
    base, mine = timing(baseline, typical), timing(spec, typical)
    prompt = f"{base.prompt_tokens:.0f}" if base.prompt_tokens else "n/a"
    extra = extra_ttft_s(spec, baseline)
    first = (f"{base.ttft_s:.2f} s alone, {mine.ttft_s:.2f} s speculative" if base.ttft_s and mine.ttft_s
             else "n/a") + (f" ({extra:+.2f} s: the candidate's own prefill)" if extra is not None else "")
    prefill = (f"{base.prefill_tps:,.0f} tok/s alone, {mine.prefill_tps:,.0f} tok/s speculative (server "
               f"timings; {prompt}-token prompts)" if base.prefill_tps and mine.prefill_tps else "n/a")
    e2e = (f"{base.end_to_end_s:.2f} s alone, {mine.end_to_end_s:.2f} s speculative for {typical} output tokens "
           f"({base.end_to_end_s / mine.end_to_end_s:.2f}x; first token + decode)"
           if base.end_to_end_s and mine.end_to_end_s else "n/a")
    return [("prefill", prefill), ("first token", first), ("end to end", e2e)]


def screen(results: ResultsFile, plan: ABPlan) -> str:
    """Everything the A/B prints after measuring, on one screen."""
    baseline, spec = results.results
    version = next((v for r in results.results if (v := (r.server or {}).get("version"))), None)
    opts = plan.options
    lines = ["=" * WIDTH,
             f"  A/B: {plan.target.label} alone vs with {plan.candidate.label}"
             f" ({'+'.join(plan.candidate.method) or 'draft-simple'}"
             f"{f', k={plan.candidate.draft_max}' if plan.candidate.draft_max else ''})",
             f"  llama-server {version or '(version unknown)'}; {len(plan.prompts)} prompt"
             f"{'s' if len(plan.prompts) != 1 else ''} x {opts.runs} run(s), max_tokens {opts.max_tokens}, "
             f"temperature {opts.temperature:g}",
             "=" * WIDTH]
    items = [("baseline", _rate(baseline)), ("speculative", _rate(spec)), ("multiplier", _multiplier(spec)),
             ("acceptance", _acceptance(spec) if spec.ok else "n/a"),
             ("mean accepted len", f"{spec.mean_accepted_len:.2f} tokens per verify step" if spec.mean_accepted_len
              else "n/a (the server reports no verify steps)"),
             ("output", _output(spec) if spec.ok else "n/a"), ("verdict", verdict(baseline, spec))]
    if plan.context_tokens is not None:
        items[3:3] = _first_token(baseline, spec, plan)
    for name, value in items:
        lines += textwrap.wrap(value, WIDTH, initial_indent=f"  {name:<18} ", subsequent_indent=" " * 21,
                               break_on_hyphens=False) or [f"  {name}"]
    warnings = [(label, w.message) for label, row in (("baseline", baseline), ("speculative", spec))
                for w in row.warnings]
    if warnings:
        lines.append("-" * WIDTH)
        for label, message in warnings:
            lines += textwrap.wrap(f"{label}: {message}", WIDTH, initial_indent="  ! ", subsequent_indent="    ",
                                   break_on_hyphens=False)
    lines.append("=" * WIDTH)
    return "\n".join(lines)
