"""Adaptive search (``settings.search: "adaptive"``): race each target's candidates.

The race runs the same passes as an exhaustive sweep (``sweep/schedule.py``: block 0 of every
candidate, then block 1, …, in the target's design, each candidate block beside or between
baseline blocks), but after every pass the rules of :mod:`draftbench.analysis.racing` decide who
is measured further: the probe is block 0 (every prompt, or with one run half of them, categories
interleaved); eliminated, resolved, tied and unresolved candidates stop; the open ones and the
leader go on until the leader's win clears the spent boundary or the blocks run out.
``settings.budget_s`` caps the measuring time per target.

Resume: rows carry everything the race knows (their requests with their blocks, eliminated rows
their status and reason), so a resumed race rebuilds its state from the results file.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from ..analysis.comparison import check_counters
from ..analysis.decision import confirmed_winner
from ..analysis.pairing import Pair, pairs
from ..analysis.race_outcome import LEADER_NOT_CONFIRMED, NOT_A_SPEEDUP, UNRESOLVED, RaceOutcome
from ..analysis.racing import Look, RaceRules, Standing, judge
from ..analysis.verdict import analyze
from ..config.prompts import Prompt
from ..config.workloads import SESSION_CATEGORY
from ..measure.sequential import MeasureOptions
from ..results.file import ResultsFile, Row
from ..results.kinds import Role, Status
from .config_file import SweepConfig
from .console import Reporter, format_duration
from .estimate import Estimator
from .passes import TargetPasses, confirm, in_passes, step_seconds, target_passes
from .plan import Combination, shows_k
from .runner import CombinationRunner
from .schedule import Design, Kind, Request, Side, Step, confirmation_steps, pass_steps, sweep_steps
from .step_records import steps_measured
from .steps import StepRunner

# What the race decided about each contender (``race.decision``); analysis/race_outcome.py reads them
DECISIONS = {Standing.LEADER: "winner", Standing.TIED: "tied with the winner",
             Standing.RESOLVED: "within the noise floor of the winner",
             Standing.UNRESOLVED: UNRESOLVED, Standing.OPEN: "not separated"}


class RowStore(Protocol):
    """Where rows go: the session analyses and saves the file after every row."""

    def current(self) -> ResultsFile: ...
    def record(self, row: Row) -> Row: ...


class MemoryStore:
    """A :class:`RowStore` without the file: it re-analyses after every row as the session does, for
    tests and the simulator (``benchmarks/verdicts.py``). The race decides on the raw rows (pairs and
    counters), so ``analyse=False`` (analyse once at the end) reaches the same decisions, faster."""

    def __init__(self, results: ResultsFile, analyse: bool = True):
        self.results, self.analyse = results, analyse

    def current(self) -> ResultsFile:
        return self.results

    def record(self, row: Row) -> Row:
        self.results = self.results.with_row(row)
        if self.analyse:
            self.results = analyze(self.results)
        return self.results.row(row.key) or row


def decision_of(name: str, look: Look) -> str:
    """What the race decided about a contender, as the results file says it (``race.decision``)."""
    standing = look.standing.get(name)
    if standing is None:
        return "eliminated" if name in look.eliminated else "not separated"
    if standing is Standing.LEADER:
        return "winner" if look.winner == name else LEADER_NOT_CONFIRMED
    if look.winner is None and standing is not Standing.OPEN:
        return {Standing.TIED: "tied with the leader", Standing.RESOLVED: "within the noise floor of the leader",
                Standing.UNRESOLVED: UNRESOLVED}[standing]
    return DECISIONS[standing]


OPEN_DECISIONS = ("running", "not separated", DECISIONS[Standing.OPEN], LEADER_NOT_CONFIRMED)


def may_continue(row: Row) -> bool:
    """Can a resumed sweep measure this row further? It has blocks of its design not measured yet
    (``design.planned`` requests), and no race decided about it."""
    planned = (row.design or {}).get("planned")
    if not row.ok or not isinstance(planned, int):
        return False
    measured = sum(1 for r in row.requests if r.error is None and r.decode_tps)
    decision = (row.race or {}).get("decision")
    return measured < planned and (decision is None or decision in OPEN_DECISIONS)


class AdaptiveSearch:
    def __init__(self, config: SweepConfig, runner: CombinationRunner, store: RowStore, reporter: Reporter,
                 prompts: list[Prompt], options: MeasureOptions, clock: Callable[[], float] = time.perf_counter,
                 estimator: Estimator | None = None):
        self.config, self.runner, self.store, self.reporter = config, runner, store, reporter
        self.prompts, self.options, self.clock = prompts, options, clock
        self.budget_s = config.settings.budget_s
        self.noise_floor = config.settings.noise_floor
        self.failed_baselines: dict[str, str] = {}
        self.show_k = shows_k(config)
        self.sweep_started = clock()
        self.estimator = estimator
        self.call_started: float | None = None
        self.looks: dict[str, list[dict]] = {}     # name -> every look at it (race.looks: the report's history)

    # ------------------------------------------------------------------ the sweep
    def run(self, combos: list[Combination]) -> bool:
        """Measure what is pending; True when every candidate has a row (False: the budget ran out first)."""
        complete = True
        for target in self.config.targets:
            passes = target_passes(self.config, self.runner.backend, combos, target.label, self.prompts,
                                   self.options.runs, self.store.current())
            if passes is None:
                continue
            self.reporter.note(f"{target.label}: {passes.design.label} — {passes.why}")
            complete &= self._race(passes)
            rest = {n: c for g in passes.groups for n, c in g.combos.items() if c.role != Role.SPECULATIVE}
            for group in passes.groups:      # the A/A control and the ceiling runs: measured fully, after
                names = [n for n in group.combos if n in rest]
                if names:
                    steps = [s for s in group.steps if s.candidate is None or s.candidate in names]
                    self._steps(passes, {n: rest[n] for n in names}).run(steps)
        plain = [c for c in combos if not in_passes(c)]
        for index, combo in enumerate(plain, 1):
            if (row := self.store.current().row(combo.key)) is not None and row.ok:
                continue
            self.reporter.combination_started(index, len(plain), combo.title(self.show_k))
            self._save(self.runner.run(combo, index, self.failed_baselines, results=self.store.current()))
        return complete

    def _steps(self, passes: TargetPasses, combos: dict[str, Combination]) -> StepRunner:
        return StepRunner(self.runner, self.store, self.reporter, passes.design, self.prompts, self.options,
                          passes.block_pairs, passes.baseline, combos, self.failed_baselines, clock=self.clock,
                          show_k=self.show_k)

    def _save(self, row: Row) -> Row:
        recorded = self.store.record(row)
        self.reporter.row_recorded(recorded)
        return recorded

    # ------------------------------------------------------------------ one target's race
    def _race(self, passes: TargetPasses) -> bool:
        target = passes.baseline.target.label
        contenders = {n: c for n, c in passes.groups[0].combos.items() if c.role == Role.SPECULATIVE}
        if not contenders:
            self._steps(passes, {}).run(passes.groups[0].steps)
            return True
        steps = self._steps(passes, contenders)
        steps.at_most = True
        steps.step_number = steps_measured([steps.row(passes.baseline), *map(steps.row, contenders.values())],
                                           paired=passes.design is Design.INTERLEAVED)    # a resume numbers on
        for label, combo in contenders.items():      # a resumed race keeps the looks it recorded
            recorded = ((row.race or {}).get("looks") if (row := self.store.current().row(combo.key)) else None)
            self.looks[label] = [dict(lk) for lk in recorded or () if isinstance(lk, dict)]
        n_blocks = len(passes.block_pairs)
        rules = RaceRules(len(contenders), n_blocks, self.noise_floor)
        self.reporter.race(f"{target}: adaptive search over {len(contenders)} candidates — the probe is block 1 of "
                           f"{n_blocks} ({len(passes.block_pairs[0])} requests each), a look after every block, "
                           f"one-sided bounds at {rules.error:.3g} each (alpha spent over {len(contenders)} "
                           f"candidates × {n_blocks} looks: {rules.alpha:.0%} overall)"
                           + (f", budget {format_duration(self.budget_s)}" if self.budget_s else ""))
        if passes.design is Design.SEQUENTIAL:      # the baseline once, first (upstream's order)
            every = sorted(pair for block in passes.block_pairs for pair in block)
            steps.run([Step(Kind.BASELINE, None, None, tuple(_alone(every)))])
        look: Look | None = None
        unprobed = 0
        # the most steps the race may run: every block of every candidate, then the confirmation
        planned = len(sweep_steps(passes.design, passes.block_pairs, list(contenders))) + \
            len(confirmation_steps(passes.design, n_blocks, steps.confirmation, "selected"))
        for k in range(n_blocks):
            names = self._next(contenders, look, steps, k)
            if not names:
                break
            todo = [n for n in names if k not in steps.blocks_done(n)]
            self.call_started = self.clock()
            try:
                steps.run(self._pass(passes, k, todo), planned,
                          after_step=lambda _step, ran: self._progress(passes, contenders, steps) if ran else None,
                          stop=lambda: self._spent(target))
            finally:
                self.call_started = None
            if k == 0:
                unprobed = sum(1 for n in names if 0 not in steps.blocks_done(n) and n not in steps.dead)
            look = self._look(passes, contenders, rules, k + 1)
            self._progress(passes, contenders, steps)
            if self._spent(target):
                break
            if look.decided or self.failed_baselines.get(target):
                break
        winner = None
        if look is not None and look.decided and look.leader is not None and not self._spent(target):
            # the leader is the selection; fresh requests decide (analysis/decision.py)
            name = confirm(passes, steps, self.store, self.reporter, self.noise_floor, chosen=look.leader)
            row = analyze(self.store.current()).row(contenders[name].key) if name is not None else None
            if row is not None and confirmed_winner([row]) is not None:
                winner = name
        self._finish(target, passes, contenders, rules, look, unprobed, winner)
        return unprobed == 0

    def _progress(self, passes: TargetPasses, contenders: dict[str, Combination], steps: StepRunner) -> None:
        """Elapsed, and an upper bound on what is left: every candidate still in the race as if it went the
        distance (the ceiling and control runs after it included)."""
        left: float | None = None
        if self.estimator is not None:
            self.estimator.add(self.store.current())
            left = 0.0
            for group in passes.groups:
                for name, combo in group.combos.items():
                    if combo.role == Role.SPECULATIVE and (name in steps.dead or not self._in_race(combo)):
                        continue
                    done = steps.blocks_done(name) if name in steps.candidates else set()
                    for k in range(len(passes.block_pairs)):
                        if k not in done:
                            step = self._pass(passes, k, [name])[0 if passes.design is not Design.BRACKETED else 1]
                            left += step_seconds(self.estimator, group.combos, step, passes.baseline)
        self.reporter.progress(self.clock() - self.sweep_started, left or None, at_most=True)

    def _pass(self, passes: TargetPasses, k: int, names: list[str]) -> list[Step]:
        if passes.design is Design.SEQUENTIAL:
            return [Step(Kind.CANDIDATE, n, k, tuple(_alone(passes.block_pairs[k], Side.CANDIDATE))) for n in names]
        return pass_steps(passes.design, k, passes.block_pairs[k], names)

    def _next(self, contenders: dict[str, Combination], look: Look | None, steps: StepRunner, k: int) -> list[str]:
        """Who gets block k: everyone still in the race at the probe; then the open ones and the leader."""
        alive = [n for n, c in contenders.items() if n not in steps.dead and self._in_race(c)]
        if look is None:
            return alive
        keep = {n for n, s in look.standing.items() if s is Standing.OPEN}
        if look.leader is not None and look.winner is None:
            keep.add(look.leader)
        return [n for n in alive if n in keep]

    def _in_race(self, combo: Combination) -> bool:
        row = self.store.current().row(combo.key)
        return row is None or (row.status is not Status.ELIMINATED and row.speculation_active is not False
                               and row.status is not Status.SKIPPED)

    def _pairs(self, contenders: dict[str, Combination]) -> dict[str, list[Pair]]:
        results = self.store.current()
        out = {}
        for name, combo in contenders.items():
            row, baseline = results.row(combo.key), results.baseline_for(combo.target.label)
            if row is not None and baseline is not None and row.measured and row.speculation_active is not False:
                matched = [p for p in pairs(row, baseline) if p.category != SESSION_CATEGORY]
                bound = check_counters(matched, None)
                if matched and not (bound and bound["speed_changed"]):    # above its counters: not a speed-up
                    out[name] = matched
        return out

    def _look(self, passes: TargetPasses, contenders: dict[str, Combination], rules: RaceRules,
              looks_done: int) -> Look:
        measured = self._pairs(contenders)
        look = judge(measured, rules, looks_done)
        for name, matched in measured.items():
            self._note_look(name, len(matched), look)
        for name, why in look.eliminated.items():
            row = self.store.current().row(contenders[name].key)
            if row is not None and row.status != Status.ELIMINATED:
                race = dict(self._race_fields(name, row, rules, passes), decision="eliminated", bound=why.bound.to_dict())
                self._save(replace(row, status=Status.ELIMINATED, reason=why.reason, race=race))
        return look

    def _note_look(self, name: str, n: int, look: Look) -> None:
        """Remember one look at a candidate (once per sample size): its bounds and where it stood."""
        history = self.looks.setdefault(name, [])
        if history and history[-1]["requests"] == n:
            return
        bound = look.vs_base.get(name)
        standing = "eliminated" if name in look.eliminated else look.standing.get(name, Standing.OPEN).value
        history.append({"requests": n, "ratio": round(bound.ratio, 4) if bound else None,
                        "low": round(bound.low, 4) if bound else None,
                        "high": round(bound.high, 4) if bound and math.isfinite(bound.high) else None,
                        "standing": standing})

    def _race_fields(self, name: str, row: Row, rules: RaceRules, passes: TargetPasses) -> dict:
        planned = sum(len(b) for b in passes.block_pairs)
        looks = list(self.looks.get(name) or ())
        return {**(row.race or {}), "loads": len({r.session for r in row.requests if r.session}),
                "requests": len(row.requests), "planned": planned, "probe": len(passes.block_pairs[0]),
                "method": rules.method, **({"looks": looks} if looks else {})}

    def _spent(self, target: str) -> bool:
        """Measuring time of this target's rows (and of the pass in progress) against the budget."""
        if not self.budget_s:
            return False
        # a candidate row's wall time covers its steps (in the interleaved design, its baseline server too)
        spent = sum(r.wall_time or 0.0 for r in self.store.current().results
                    if r.target == target and r.role == Role.SPECULATIVE)
        if self.call_started is not None:
            spent += self.clock() - self.call_started
        return spent >= self.budget_s

    def _finish(self, target: str, passes: TargetPasses, contenders: dict[str, Combination], rules: RaceRules,
                look: Look | None, unprobed: int, winner: str | None) -> None:
        look = judge(self._pairs(contenders), rules, len(passes.block_pairs)) if look is None else look
        look = replace(look, leader_clears=winner is not None and winner == look.leader)
        results = self.store.current()
        measured = self._pairs(contenders)
        for name, combo in contenders.items():
            row = results.row(combo.key)
            if row is None or row.status == Status.ELIMINATED:
                continue
            decision = ("inactive" if row.speculation_active is False else
                        NOT_A_SPEEDUP if name not in measured else
                        decision_of(name, look))
            bound = look.vs_base.get(name)
            race = dict(self._race_fields(name, row, rules, passes), decision=decision,
                        **({"bound": bound.to_dict()} if bound else {}))
            if race != row.race:
                self.store.record(replace(row, race=race))
        spent = " (the budget ran out)" if self._spent(target) else ""
        outcome = look.outcome()
        # The outcome in the verdict's words: one decision, made with the verdict (analysis/race_outcome.py)
        entry: dict = next((e for e in (self.store.current().summary or {}).get("targets", [])
                            if e.get("target") == target), {})
        said = RaceOutcome.from_dict(entry["race"]) if isinstance(entry.get("race"), dict) else None
        if said is not None:
            self.reporter.race(said.sentence()[:-1] + spent)
        elif look.winner:
            extra = [f"tied with it (within the noise floor either way): {', '.join(outcome['tied'])}"
                     if outcome["tied"] else "",
                     f"within the noise floor of it: {', '.join(outcome['resolved'])}"
                     if outcome["resolved"] else "",
                     f"unresolved (the planned requests could not separate them): {', '.join(outcome['unresolved'])}"
                     if outcome["unresolved"] else ""]
            self.reporter.race(f"{target}: {look.winner} wins the race{spent}"
                               + "".join(f"; {e}" for e in extra if e))
        else:
            left = [n for n in look.standing]
            self.reporter.race(f"{target}: no winner{spent} — "
                               + (f"the leader {look.leader} was not confirmed faster than the baseline by the noise "
                                  f"floor on fresh requests; still in the race: {', '.join(left)}" if look.leader else
                                  "no candidate is left"))
        if unprobed:
            self.reporter.race(f"{target}: {unprobed} candidate(s) not probed: the budget of "
                               f"{format_duration(self.budget_s or 0)} was spent — raise settings.budget_s "
                               "(or --budget) and run the same command to continue")


def _alone(pairs: list[tuple[int, int]], side: Side = Side.BASELINE) -> list[Request]:
    return [Request(side, run, prompt) for run, prompt in pairs]
