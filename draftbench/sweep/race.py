"""Adaptive search (``settings.search: "adaptive"``): race each target's candidates.

Per target: the baseline is measured fully (every candidate is paired with it); then every
candidate gets a probe (a few requests across the categories) on its own server; after each
probe the rules of :mod:`draftbench.analysis.racing` eliminate the candidates that cannot win. The
survivors, most promising first, get the rest of their requests on one more server each,
looking again at the end of every pass and stopping as soon as they are eliminated — or, for
the last one standing, as soon as its speed-up is significant. ``settings.budget_s`` caps the
measuring time per target.

Resume: rows carry everything the race knows (their requests, ``race.loads``, eliminated rows
their status and reason), so a resumed race rebuilds its state from the results file: eliminated
candidates stay out, probed survivors continue where they stopped, unprobed ones are probed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from ..analysis.race_outcome import RaceOutcome
from ..analysis.racing import Look, RaceRules, Standing, judge, race_bound, request_order, tps_by_pair
from ..analysis.stats import speedup
from ..analysis.verdict import analyze
from ..config.prompts import Prompt
from ..measure.sequential import MeasureOptions, Schedule
from ..results.file import RequestRecord, ResultsFile, Row
from ..results.kinds import Role, Status
from ..results.speedup import Speedup
from .config_file import SweepConfig
from .console import Reporter, format_duration
from .estimate import Estimator, estimate_of
from .plan import Combination, shows_k
from .runner import CombinationRunner


class RowStore(Protocol):
    """Where rows go: the session analyses and saves the file after every row."""

    def current(self) -> ResultsFile: ...
    def record(self, row: Row) -> Row: ...


class MemoryStore:
    """A :class:`RowStore` without the file: it re-analyses after every row as the session does (the
    race reads the analysis), for tests and the simulator (``benchmarks/verdicts.py``)."""

    def __init__(self, results: ResultsFile):
        self.results = results

    def current(self) -> ResultsFile:
        return self.results

    def record(self, row: Row) -> Row:
        self.results = analyze(self.results.with_row(row))
        return self.results.row(row.key) or row


def name_of(combo: Combination) -> str:
    """A candidate's name in the race (unique per target: the row key's label and k)."""
    label = combo.candidate.label if combo.candidate else combo.target.label
    return label + (f" (k={combo.draft_max})" if combo.draft_max is not None else "")


def decision_of(name: str, look: Look) -> str:
    """What the race decided about a contender, as the results file says it (``race.decision``)."""
    standing = look.standing.get(name)
    if not look.decided or standing is None or standing is Standing.OPEN:
        return "not separated"
    return {Standing.LEADER: "winner", Standing.RESOLVED: "within the noise floor of the winner",
            Standing.TIED: "tied with the winner"}[standing]


def _significantly_faster(speed: Speedup | None) -> bool:
    return speed is not None and speed.significant is True and speed.ratio > 1


def may_continue(row: Row) -> bool:
    """Can a resumed race measure this row further? It was raced, has fewer requests than planned, and the
    race left it open (still running, not separated, or a winner not yet significantly faster)."""
    race = row.race or {}
    if not row.ok or not race or len(row.requests) >= (race.get("planned") or 0):
        return False
    decision = race.get("decision")
    return decision in ("running", "not separated") or (decision == "winner" and not _significantly_faster(row.speedup))


class AdaptiveSearch:
    def __init__(self, config: SweepConfig, runner: CombinationRunner, store: RowStore, reporter: Reporter,
                 prompts: list[Prompt], options: MeasureOptions, clock: Callable[[], float] = time.perf_counter,
                 estimator: Estimator | None = None):
        self.config, self.runner, self.store, self.reporter = config, runner, store, reporter
        self.prompts, self.options, self.clock = prompts, options, clock
        self.budget_s: float | None = config.settings.get("budget_s")
        floor = config.settings.get("noise_floor")
        self.noise_floor = floor if isinstance(floor, (int, float)) else 0.02
        self.order = request_order(prompts, options.runs)
        self.failed_baselines: dict[str, str] = {}
        self.index: dict[tuple, int] = {}
        self.total = 0
        self.show_k = shows_k(config)
        self.call_started: float | None = None
        self.sweep_started = clock()
        self.estimator = estimator
        self.combos: list[Combination] = []
        self.looks: dict[str, list[dict]] = {}    # name -> every look at it (race.looks; the report's history)
        self.step = 0                              # servers started so far: the console numbers them in order

    # ------------------------------------------------------------------ the sweep
    def run(self, combos: list[Combination]) -> bool:
        """Measure what is pending; True when every candidate has a row (False: the budget ran out first)."""
        self.index = {c.key: i for i, c in enumerate(combos, 1)}
        self.combos = combos
        # the most servers the race may start: a candidate's probe and, surviving it, one more server
        self.total = len(combos) + sum(1 for c in combos if c.role == Role.SPECULATIVE)
        complete = True
        for target in self.config.targets:
            group = [c for c in combos if c.target.label == target.label and c.role is not Role.DRAFT_ALONE]
            for combo in (c for c in group if c.role is Role.BASELINE):
                self._plain(combo)
            complete &= self._race(target.label, [c for c in group if c.role is Role.SPECULATIVE])
            for combo in (c for c in group if c.role is Role.CEILING):   # after the drafts they read
                self._plain(combo)
            for combo in (c for c in group if c.role is Role.CONTROL):
                self._plain(combo)
        for combo in (c for c in combos if c.role is Role.DRAFT_ALONE):
            self._plain(combo)
        return complete

    def _row(self, combo: Combination) -> Row | None:
        return self.store.current().row(combo.key)

    def _note_look(self, name: str, n: int, look: Look) -> None:
        """Remember one look at a candidate (once per sample size): its bounds and where it stood."""
        history = self.looks.setdefault(name, [])
        if history and history[-1]["requests"] == n:
            return
        bound = look.vs_base.get(name)
        standing = "eliminated" if name in look.eliminated else look.standing.get(name, Standing.OPEN).value
        history.append({"requests": n, "ratio": round(bound.ratio, 4) if bound else None,
                        "low": round(bound.low, 4) if bound else None, "high": round(bound.high, 4) if bound else None,
                        "standing": standing})

    def _with_looks(self, name: str, race: dict) -> dict:
        return {**race, "looks": list(self.looks[name])} if self.looks.get(name) else race

    def _plain(self, combo: Combination) -> None:
        """A combination measured as in an exhaustive sweep (baselines, controls, drafts alone)."""
        existing = self._row(combo)
        if existing is not None and existing.ok:
            return
        self._started(combo.title(self.show_k))
        row = self.runner.run(combo, self.index[combo.key], self.failed_baselines, results=self.store.current())
        if combo.role is Role.BASELINE and not row.ok:
            self.failed_baselines[combo.target.label] = row.reason or row.status
        self._save(row)

    def _started(self, title: str) -> None:
        """Numbered in the order servers start (a survivor's second server comes after every probe)."""
        self.step += 1
        self.reporter.combination_started(self.step, self.total, title, at_most=True)

    def _save(self, row: Row) -> Row:
        recorded = self.store.record(row)
        self.reporter.row_recorded(recorded)
        self.reporter.progress(self.clock() - self.sweep_started, self._at_most_left(), at_most=True)
        return recorded

    def _at_most_left(self) -> float | None:
        """An upper bound on the time left (the estimate of ``--dry-run``): every combination not yet
        decided as if it went the distance — the unprobed fully, a contender its remaining requests."""
        if self.estimator is None:
            return None
        results = self.store.current()
        self.estimator.add(results)
        seconds, known = 0.0, False
        for combo in self.combos:
            row = results.row(combo.key)
            estimate = estimate_of(self.estimator, combo)
            known |= estimate.source != "unknown"
            if row is None:
                seconds += estimate.seconds
            elif combo.role is Role.SPECULATIVE and row.ok and (row.race or {}).get("decision") == "running":
                left = max(0, self.options.runs * len(self.prompts) - len(row.requests))
                seconds += estimate.seconds * left / max(1, self.options.runs * len(self.prompts))
        return seconds if known else None

    # ------------------------------------------------------------------ one target's race
    def _race(self, target: str, combos: list[Combination]) -> bool:
        baseline = self.store.current().baseline_for(target)
        if baseline is None or not combos:     # no baseline: the runner records every candidate as skipped
            for combo in combos:
                self._plain(combo)
            return True
        categories = len({p.category for p in self.prompts})
        rules = RaceRules(len(combos), len(self.prompts), self.options.runs, categories, self.noise_floor)
        base_tps = tps_by_pair(baseline.requests)
        self.reporter.race(f"{target}: adaptive search over {len(combos)} candidates — probe of "
                           f"{rules.probe_requests} requests each, looks after {', '.join(map(str, rules.looks))} "
                           f"requests, one-sided bounds at {rules.error:.3g} each (Bonferroni over {len(combos)} "
                           f"candidates × {len(rules.looks)} looks: {rules.alpha:.0%} overall; spread pooled over the "
                           "contenders; one the planned requests cannot separate from the leader is called tied)"
                           + (f", budget {format_duration(self.budget_s)}" if self.budget_s else ""))
        unprobed = 0
        for combo in combos:      # a resumed race keeps the looks it recorded
            looks = ((row.race or {}).get("looks") if (row := self._row(combo)) is not None else None) or []
            self.looks.setdefault(name_of(combo), [dict(lk) for lk in looks if isinstance(lk, dict)])
        for combo in combos:
            row = self._row(combo)
            if row is not None and row.measured:
                continue
            if self._spent(target):
                unprobed += 1
                continue
            self._measure(combo, rules, None, None)
            self._look(combos, rules, base_tps)
        while not self._spent(target):
            contenders = {name_of(c): (c, r) for c, r in self._contenders(combos)}
            if not contenders:
                break
            look = judge(self._look_tps(contenders, rules), base_tps, rules)
            if look.decided and look.leader is not None:
                if self._settled(contenders[look.leader][1], rules):
                    break
                pick = contenders[look.leader]
            else:
                open_ = [(c, r) for name, (c, r) in contenders.items() if len(r.requests) < rules.total_requests
                         and look.standing.get(name, Standing.OPEN) in (Standing.LEADER, Standing.OPEN)]
                if not open_:
                    break
                pick = max(open_, key=lambda cr: self._estimate(cr[1], rules, base_tps))
            before = len(pick[1].requests)
            after = self._measure(pick[0], rules, pick[1], self._keep_going(pick[0], combos, rules, base_tps, target))
            self._look(combos, rules, base_tps)
            if len(after.requests) <= before:
                break       # no progress (the server failed): that row is an error now, never loop
        self._finish(target, combos, rules, base_tps, unprobed)
        return unprobed == 0

    def _spent(self, target: str) -> bool:
        """Measuring time of this target's rows (and of the request in progress) against the budget."""
        if not self.budget_s:
            return False
        spent = sum(r.wall_time or 0.0 for r in self.store.current().results
                    if r.target == target and r.role in (Role.BASELINE, Role.SPECULATIVE))
        if self.call_started is not None:
            spent += self.clock() - self.call_started
        return spent >= self.budget_s

    def _contenders(self, combos: list[Combination]) -> list[tuple[Combination, Row]]:
        out = []
        for combo in combos:
            row = self._row(combo)
            if row is not None and row.ok and row.speculation_active is not False and row.requests:
                out.append((combo, row))
        return out

    def _tps(self, records, rules: RaceRules) -> dict[tuple, float] | None:
        """tok/s by (prompt, run) of the first requests up to the latest look (None before the probe ends)."""
        n = rules.look_size(len(records))
        return tps_by_pair(records[:n]) if n else None

    def _look_tps(self, contenders: dict[str, tuple[Combination, Row]], rules: RaceRules) -> dict[str, dict]:
        return {name: t for name, (_, row) in contenders.items() if (t := self._tps(row.requests, rules)) is not None}

    def _estimate(self, row: Row, rules: RaceRules, base_tps: dict) -> float:
        tps = self._tps(row.requests, rules)
        bound = race_bound(base_tps, tps, rules.error) if tps else None
        return bound.ratio if bound else float("inf")     # not looked at yet: measure it first

    def _settled(self, row: Row, rules: RaceRules) -> bool:
        """The last candidate standing is done when complete or significantly faster than the baseline."""
        return len(row.requests) >= rules.total_requests or _significantly_faster(row.speedup)

    def _keep_going(self, combo: Combination, combos: list[Combination], rules: RaceRules, base_tps: dict,
                    target: str) -> Callable[[list[RequestRecord]], bool]:
        """Whether the candidate being measured goes on: decided at the looks only."""
        name = name_of(combo)

        def keep_going(records: list[RequestRecord]) -> bool:
            if self._spent(target):
                return False
            if len(records) not in rules.looks:
                return True
            others = {n: cr for n, cr in ((name_of(c), (c, r)) for c, r in self._contenders(combos)) if n != name}
            tps = {**self._look_tps(others, rules), name: tps_by_pair(records)}
            look = judge(tps, base_tps, rules)
            self._note_look(name, len(records), look)
            standing = look.standing.get(name)
            if name in look.eliminated or standing in (Standing.RESOLVED, Standing.TIED):
                return False          # out, or nothing more to learn from it
            if standing is not Standing.LEADER or not look.decided:
                return True
            return not _significantly_faster(speedup(base_tps, tps[name], noise_floor=self.noise_floor))
        return keep_going

    def _measure(self, combo: Combination, rules: RaceRules, prior: Row | None,
                 keep_going: Callable[[list[RequestRecord]], bool] | None) -> Row:
        start = len(prior.requests) if prior else 0
        end = rules.total_requests if prior else rules.probe_requests
        title = combo.title(self.show_k) + (f" (race: requests {start + 1}-{end} or until decided)" if prior
                                            else f" (race: probe of {end} requests)")
        self._started(title)
        earlier = prior.requests if prior else ()
        self.call_started = self.clock()
        try:
            row = self.runner.run(combo, self.index[combo.key], self.failed_baselines,
                                  Schedule(tuple(self.order[start:end]), earlier, keep_going))
        finally:
            self.call_started = None
        if earlier and len(row.requests) < len(earlier):
            row = replace(row, requests=earlier)   # never lose what an earlier server measured
        loads = ((prior.race or {}).get("loads") or 0 if prior else 0) + (1 if (row.server or {}).get("command") else 0)
        wall = (prior.wall_time or 0.0 if prior else 0.0) + (row.wall_time or 0.0)
        race = {"loads": loads, "requests": len(row.requests), "planned": rules.total_requests,
                "probe": rules.probe_requests, "method": rules.method, "decision": "running"}
        return self._save(replace(row, wall_time=round(wall, 3), race=self._with_looks(name_of(combo), race)))

    def _look(self, combos: list[Combination], rules: RaceRules, base_tps: dict) -> None:
        contenders = {name_of(c): (c, r) for c, r in self._contenders(combos)}
        look = judge(self._look_tps(contenders, rules), base_tps, rules)
        for name, (_combo, row) in contenders.items():
            n = rules.look_size(len(row.requests))
            if n is not None:
                self._note_look(name, n, look)
        for name, why in look.eliminated.items():
            row = contenders[name][1]
            race = dict(row.race or {}, decision="eliminated", bound=why.bound.to_dict())
            self._save(replace(row, status=Status.ELIMINATED, reason=why.reason, race=self._with_looks(name, race)))

    def _finish(self, target: str, combos: list[Combination], rules: RaceRules, base_tps: dict,
                unprobed: int) -> None:
        contenders = {name_of(c): (c, r) for c, r in self._contenders(combos)}
        look = judge(self._look_tps(contenders, rules), base_tps, rules)
        leader = look.leader if look.decided else None
        for name, (_, row) in contenders.items():
            bound = look.vs_base.get(name)
            race = self._with_looks(name, dict(row.race or {}, decision=decision_of(name, look),
                                               **({"bound": bound.to_dict()} if bound else {})))
            if race != row.race:
                self.store.record(replace(row, race=race))
        for combo in combos:     # measured, but never raced: the server did not speculate
            raced = self._row(combo)
            if raced is not None and (raced.race or {}).get("decision") == "running" \
                    and name_of(combo) not in contenders:
                self.store.record(replace(raced, race=dict(raced.race or {}, decision="inactive")))
        spent = " (the budget ran out)" if self._spent(target) else ""
        resolved = [n for n, s in look.standing.items() if s is Standing.RESOLVED]
        tied = [n for n, s in look.standing.items() if s is Standing.TIED]
        # The outcome in the verdict's words: one decision, made with the verdict (analysis/race_outcome.py)
        entry: dict = next((e for e in (self.store.current().summary or {}).get("targets", [])
                            if e.get("target") == target), {})
        outcome = RaceOutcome.from_dict(entry["race"]) if isinstance(entry.get("race"), dict) else None
        if outcome is not None:
            self.reporter.race(outcome.sentence()[:-1] + spent)
        elif leader:
            self.reporter.race(f"{target}: {leader} wins the race{spent}"
                               + (f"; within the noise floor of it: {', '.join(resolved)}" if resolved else "")
                               + (f"; tied with it (the planned requests could not separate them): {', '.join(tied)}"
                                  if tied else ""))
        else:
            self.reporter.race(f"{target}: {len(contenders)} candidate(s) left, not separated{spent}"
                               + (f": {', '.join(contenders)}" if contenders else ""))
        if unprobed:
            self.reporter.race(f"{target}: {unprobed} candidate(s) not probed: the budget of "
                               f"{format_duration(self.budget_s or 0)} was spent — raise settings.budget_s "
                               "(or --budget) and run the same command to continue")
