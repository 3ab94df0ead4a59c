"""Adaptive search: the racing rules, as pure functions of what was measured.

A race measures every candidate briefly (the *probe*), then spends the rest of its requests on
the candidates that could still win. It looks at the data many times, so a plain 95% interval
would eliminate a true winner far more often than 5% of the time. The rules here keep the
overall error rate at :data:`ALPHA`:

* Intervals are only computed at fixed sample sizes — after the probe, then at the end of every
  pass over the prompt set (:attr:`RaceRules.looks`) — on the first n requests of each
  candidate, which all candidates measure in the same order.
* Every bound is a one-sided paired Student-t bound on log tok/s ratios, at error
  ALPHA / (candidates × looks) (Bonferroni). The true best candidate can only be eliminated
  through one of its own bounds — against the baseline, or against the leader of the moment,
  at one of the looks — so the chance that this ever happens is at most ALPHA.
* A candidate is eliminated when its upper bound against the leader (paired by prompt and
  repetition, so the prompts' own difficulty cancels) is below 1 — it is slower than the leader
  — or its upper bound against the baseline is below 1 + noise floor (it cannot beat the
  target alone by the noise floor).
* The race is decided when no other candidate can beat the leader by more than the noise floor
  (:func:`separated_leader`): the leader is then within that margin of the best.

The sweep's driver (``sweep/race.py``) and the replay simulator (``benchmarks/adaptive.py``)
both decide with these functions, so the simulator measures the rules the sweep runs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from .prompts import Prompt
from .results import RequestRecord, ResultsFile
from .tdist import t_quantile

ALPHA = 0.05            # overall chance that the race eliminates a candidate it should have kept
METHOD = "bonferroni-over-looks"


@dataclass(frozen=True)
class RaceRules:
    """The shape of one target's race: how many candidates, requests per pass, passes."""

    n_candidates: int
    n_prompts: int
    runs: int
    n_categories: int = 1
    noise_floor: float = 0.02
    alpha: float = ALPHA

    @property
    def total_requests(self) -> int:
        """What an exhaustive sweep measures per candidate: every prompt, ``runs`` times."""
        return self.n_prompts * self.runs

    @property
    def probe_requests(self) -> int:
        """A few requests across the categories: one per category, at least 3 (a paired interval needs 2)."""
        return min(self.total_requests, max(3, self.n_categories))

    @property
    def looks(self) -> tuple[int, ...]:
        """The sample sizes at which intervals are computed: the probe, then the end of every pass."""
        passes = [k * self.n_prompts for k in range(1, self.runs + 1) if k * self.n_prompts > self.probe_requests]
        return (self.probe_requests, *passes)

    @property
    def error(self) -> float:
        """Error of each one-sided bound: alpha split over every candidate and every look (Bonferroni)."""
        return self.alpha / (max(1, self.n_candidates) * len(self.looks))

    def look_size(self, n_measured: int) -> int | None:
        """The largest look at or below ``n_measured`` requests (None before the probe is complete)."""
        done = [n for n in self.looks if n <= n_measured]
        return done[-1] if done else None


def request_order(prompts: Sequence[Prompt], runs: int) -> list[tuple[int, int]]:
    """(run, prompt index) in the order a candidate measures them: pass after pass, and within a pass
    one prompt of each category in turn, so the probe (a prefix) covers every category."""
    by_category: dict[str, list[int]] = {}
    for index, prompt in enumerate(prompts):
        by_category.setdefault(prompt.category, []).append(index)
    one_pass: list[int] = []
    queues = [list(q) for q in by_category.values()]
    while any(queues):
        one_pass += [q.pop(0) for q in queues if q]
    return [(run, index) for run in range(runs) for index in one_pass]


@dataclass(frozen=True)
class Bound:
    """A speed-up (geometric mean of paired ratios) and its race bounds, one-sided at ``error`` each."""

    ratio: float
    low: float
    high: float
    n_pairs: int
    error: float

    def to_dict(self) -> dict:
        return {"ratio": round(self.ratio, 4), "low": round(self.low, 4), "high": round(self.high, 4),
                "n_pairs": self.n_pairs, "error": float(f"{self.error:.4g}")}


def tps_by_pair(records: Iterable[RequestRecord]) -> dict[tuple, float]:
    """(prompt_id, run) -> decode tok/s of the requests that measured one."""
    return {(r.prompt_id, r.run): r.decode_tps for r in records
            if r.error is None and isinstance(r.decode_tps, (int, float)) and r.decode_tps > 0}


def race_bound(reference: Mapping[tuple, float], candidate: Mapping[tuple, float], error: float) -> Bound | None:
    """``candidate`` against ``reference`` (the baseline, or the leader), paired by (prompt, run):
    lower and upper bounds each wrong with probability ``error``. None with fewer than two pairs."""
    keys = sorted(set(reference) & set(candidate))
    if len(keys) < 2:
        return None
    logs = [math.log(candidate[k] / reference[k]) for k in keys]
    mean = statistics.fmean(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))   # floats: a race computes many
    half = t_quantile(1.0 - error, len(logs) - 1) * sd / math.sqrt(len(logs))
    return Bound(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs), error)


class Why(str, Enum):
    BELOW_LEADER = "below_leader"        # slower than the leader
    BELOW_FLOOR = "below_floor"          # cannot beat the target alone by the noise floor


@dataclass(frozen=True)
class Elimination:
    why: Why
    bound: Bound                         # against the baseline (the probe numbers people read)
    leader: str | None = None
    against_leader: Bound | None = None
    noise_floor: float = 0.0

    @property
    def reason(self) -> str:
        head = (f"eliminated by the race after {self.bound.n_pairs} requests (speed-up {_pct(self.bound.ratio)}, "
                f"at most {_pct(self.bound.high)})")
        if self.why is Why.BELOW_LEADER and self.against_leader is not None:
            return (f"{head}: {_slower(self.against_leader.ratio)} slower than {self.leader} on the same prompts, "
                    f"at least {_slower(self.against_leader.high)} slower")
        return f"{head}: it cannot beat the target alone by the noise floor of {_pct(1 + self.noise_floor)}"


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%"


def _slower(ratio: float) -> str:
    return f"{(1 - ratio) * 100:.1f}%"


def _vs_baseline(tps: Mapping[str, Mapping[tuple, float]], baseline: Mapping[tuple, float],
                 error: float) -> dict[str, Bound]:
    return {name: b for name, t in tps.items() if (b := race_bound(baseline, t, error)) is not None}


def eliminations(tps: Mapping[str, Mapping[tuple, float]], baseline: Mapping[tuple, float],
                 rules: RaceRules) -> dict[str, Elimination]:
    """Who leaves the race now. ``tps``: each contender's tok/s by (prompt, run), cut to its
    latest look (:meth:`RaceRules.look_size`); contenders not probed yet are left out."""
    vs_base = _vs_baseline(tps, baseline, rules.error)
    if not vs_base:
        return {}
    leader = max(vs_base, key=lambda name: vs_base[name].ratio)
    out: dict[str, Elimination] = {}
    for name, bound in vs_base.items():
        if bound.high < 1.0 + rules.noise_floor:
            out[name] = Elimination(Why.BELOW_FLOOR, bound, noise_floor=rules.noise_floor)
            continue
        against = race_bound(tps[leader], tps[name], rules.error) if name != leader else None
        if against is not None and against.high < 1.0:
            out[name] = Elimination(Why.BELOW_LEADER, bound, leader, against)
    return out


def separated_leader(tps: Mapping[str, Mapping[tuple, float]], baseline: Mapping[tuple, float],
                     rules: RaceRules) -> str | None:
    """The leader, once no other contender can beat it by more than the noise floor; else None."""
    vs_base = _vs_baseline(tps, baseline, rules.error)
    if not vs_base or len(vs_base) < len(tps):
        return None
    leader = max(vs_base, key=lambda name: vs_base[name].ratio)
    for name in tps:
        if name != leader:
            against = race_bound(tps[leader], tps[name], rules.error)
            if against is None or against.high > 1.0 + rules.noise_floor:
                return None
    return leader


def server_loads(results: ResultsFile) -> int:
    """Servers the sweep started: one per row that reached a server, more for rows a race measured
    over several loads (``race.loads``)."""
    total = 0
    for row in results.results:
        loads = (row.race or {}).get("loads")
        if isinstance(loads, int):
            total += loads
        elif row.server and row.server.get("command"):
            total += 1
    return total
