"""Does "unresolved — about N more prompts × S more server pairs would settle it" come true?

A simulated sweep (:func:`sweeps.sweep`: ``run_sweep`` on a simulated backend) that ends unresolved (or in a
shortlist) with a forecast of S more stages is continued by exactly S, the same simulated machine going on:
``run_sweep(…, more=S)`` on its results, the call ``python sweep.py --config … --more S`` makes (its own
sweep, ``draftbench.sweep.Sweep``, also saves the file as it goes: :func:`continue_by`
runs that too, and the suite checks that both decide alike). It *settled* when it then recommends or finds
that nothing gains. The three guarantees are scored on the same sweeps, as they end.

For the forecast's next designer it also records, from the looks the verdict replays: what blocks at the
last look (the leader's floor, or the 2% margin to a named contender) against what the forecast is about;
the leader's estimate against its truth (selection inflates it: the winner's curse); and the pooled session
spread at every look — its degrees of freedom and whether a negative estimate was truncated to 0.
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from draftbench.analysis.decision import Decision, Outcome, decide
from draftbench.analysis.stage_evidence import up_to
from draftbench.analysis.stage_verdict import StagedVerdict, staged_verdict
from draftbench.backends.base import Backend
from draftbench.results.file import ResultsFile, load_results, save_results
from draftbench.sweep import Reporter, Sweep, run_sweep
from draftbench.sweep.session import RunOptions
from draftbench.sweep.store import RowStore

from .score import Score, score
from .sweeps import LOGS, Setup
from .sweeps import Sweep as SimSweep
from .sweeps import sweep as first_sweep
from .world import Truth

DECIDED = (Outcome.RECOMMEND.value, Outcome.NOTHING_GAINS.value)


@dataclass(frozen=True)
class Look:
    """The pooled session spread one look decided with (against the target alone, and between candidates)."""

    number: int
    df: float
    truncated: bool                  # its estimate was negative and is taken as 0 (with the df shown)
    between_df: float
    between_truncated: bool


@dataclass(frozen=True)
class Trial:
    first: Score                     # the sweep as it ended
    final: Score                     # … and after the continuation (the same, when none was named)
    forecast: int | None             # S: the stages the verdict said would settle it (None: none, or "more than")
    forecast_about: str | None       # what the forecast is about: "floor" or "margin"
    blocker: str | None              # what blocked at the last look: "floor", "margin" (or "waiting")
    contender: str | None            # the contender the margin was not shown against
    leader_estimate: float | None    # the leader's estimate at the last look (ratio)
    leader_truth: float | None       # its true gain on prompts like these
    looks: tuple[Look, ...]
    more_than: bool = False          # the forecast named no S: "not sure within 60 …" or "more than …"
    over_cap: bool = False           # named more stages than the harness continues (not continued)
    half: int | None = None          # named no S but the stages by which half the futures decide ("--more H …")
    half_settled: bool | None = None  # … continued by exactly H, it then decided (the half figure's promise: ~50%)
    beyond_settled: bool | None = None  # named neither ("more than …"), continued by the cap: it then decided (< 50%)

    @property
    def continued(self) -> bool:
        return self.forecast is not None and not self.over_cap

    @property
    def settled(self) -> bool | None:
        return self.final.decision in DECIDED if self.continued else None


def forecast_trial(setup: Setup, backend: Backend, truth: Truth, noise_floor: float, *, cap: int = 60,
                   folder: Path | None = None, beyond: bool = False) -> Trial:
    """One sweep, continued by exactly what its verdict named (up to ``cap`` stages), scored both times;
    ``beyond``: one that named neither S nor H ("more than …": fewer than half would decide) continued by ``cap``."""
    sim = first_sweep(setup, backend)
    first = score(sim, truth, noise_floor)
    v = sim.verdict
    decision = decide(sim.results).get("target")
    named = v.settle if v is not None and v.verdict in (Outcome.UNRESOLVED, Outcome.SHORTLIST) else None
    forecast = named.stages if named is not None else None
    blocker, contender = _blocker(decision, v)
    last = decision.last if decision is not None else None
    est = last.vs_base.get(v.best) if last is not None and v is not None and v.best else None
    trial = Trial(first, first, forecast, _about(named.about) if named else None, blocker, contender,
                  est.ratio if est else None, truth.population.get(v.best or "") if v else None,
                  _looks(decision) if decision is not None else (), more_than=named is not None and named.stages is None,
                  over_cap=forecast is not None and forecast > cap)
    half = named.half if named is not None and forecast is None else None
    if half is not None and half <= cap:        # "--more H settles it about half the time": continued by H
        after = continue_by(setup, backend, sim.results, half, folder=folder)
        return replace(trial, half=half, half_settled=after.verdict is not None and after.verdict.verdict in (
            Outcome.RECOMMEND, Outcome.NOTHING_GAINS))
    if beyond and named is not None and forecast is None and named.half is None:
        after = continue_by(setup, backend, sim.results, cap, folder=folder)
        return replace(trial, beyond_settled=after.verdict is not None and after.verdict.verdict in (
            Outcome.RECOMMEND, Outcome.NOTHING_GAINS))
    if not trial.continued or forecast is None:
        return trial
    return _continued(trial, setup, backend, sim, truth, noise_floor, forecast, folder)


def _continued(trial: Trial, setup: Setup, backend: Backend, sim: SimSweep, truth: Truth, noise_floor: float,
               more: int, folder: Path | None) -> Trial:
    return replace(trial, final=score(continue_by(setup, backend, sim.results, more, folder=folder), truth, noise_floor))


def continue_by(setup: Setup, backend: Backend, results: ResultsFile, more: int, *, cli: bool = False,
                folder: Path | None = None) -> SimSweep:
    """``results`` continued by ``more`` stages beyond the plan on the same simulated machine: ``run_sweep(…,
    more=more)`` on them, as the command line's sweep calls it (``cli``: through that sweep itself —
    ``draftbench.sweep.Sweep`` with ``RunOptions(more=…)`` on a saved results file, saved as it goes: the same
    decisions)."""
    world = getattr(backend, "world", None)
    clock = getattr(backend, "clock", None) or (world.clock if world is not None else None)
    if cli:
        path = Path(tempfile.mkdtemp(prefix="draftbench-forecast-", dir=folder)) / "results.json"
        save_results(results, path)
        options = RunOptions(more=more, clock=clock) if clock is not None else RunOptions(more=more)
        run = Sweep(setup.config, path, None, reporter=Reporter(), backend=backend, options=options)
        run.run()
        final = load_results(path)        # the file as saved (its journal read with it)
    else:
        final = run_sweep(setup.config, backend, store=RowStore(results), clock=clock or time.perf_counter,
                          logs_dir=LOGS, more=more).results
    found = decide(final).get("target")
    verdict: StagedVerdict | None = staged_verdict(found) if found is not None else None
    sessions = {r.session for row in final.results for r in row.requests if r.session}
    return SimSweep(final, verdict, sum(len(r.requests) for r in final.results), len(sessions),
                    clock() if clock is not None else 0.0)


def _about(about: str) -> str:
    return "margin" if about.startswith("whether") else "floor"


def _blocker(decision: Decision | None, v: StagedVerdict | None) -> tuple[str | None, str | None]:
    """What kept the leader from being recommended at the last look: its own lower bound against the floor,
    or its margin to a contender it is not shown within 2% of; None when the sweep decided."""
    last = decision.last if decision is not None else None
    if last is None or v is None or v.best is None or v.verdict in (Outcome.RECOMMEND, Outcome.NOTHING_GAINS):
        return None, None
    if v.best not in last.clearing:
        return "floor", None
    if last.not_separated:
        return "margin", next(iter(last.not_separated))
    return "waiting", None


def _looks(decision: Decision) -> tuple[Look, ...]:
    """The machine's pooled spread at every look, as the look used it (what was measured by then)."""
    series, out = decision.evidence.series, []
    for look in decision.looks:
        known = [s for s in (up_to(x, look.number) for x in series.values()) if s]
        at = decision.evidence.machine.at(max((s[-1].order for s in known), default=None))
        out.append(Look(look.number, at.pair.df, at.pair.variance == 0.0 and math.isfinite(at.pair.df),
                        at.between.df, at.between.variance == 0.0 and math.isfinite(at.between.df)))
    return tuple(out)
