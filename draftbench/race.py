"""Adaptive search: the racing rules, as pure functions of what was measured.

A race measures every candidate briefly (the *probe*), then spends the rest of its requests on
the candidates that could still win. It looks at the data many times, so a plain 95% interval
would eliminate a true winner far more often than 5% of the time. The rules here keep the
overall error rate at :data:`ALPHA`:

* Intervals are only ever computed at fixed sample sizes — after the probe, then at the end
  of every pass over the prompt set (:attr:`RaceRules.looks`).
* Each is a paired Student-t interval on log(tps_candidate / tps_baseline), at confidence
  1 − ALPHA / (candidates × looks) (Bonferroni over every interval the race can compute). With
  probability ≥ 1 − ALPHA every interval of the race covers its true speed-up at once.
* A candidate is eliminated when its upper bound is below the leader's lower bound (it cannot be
  the fastest), or below 1 + noise floor (it cannot beat the target alone by the noise floor).
  When every interval covers, neither rule can remove the true winner.

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
    def confidence(self) -> float:
        """Confidence of each interval, so that all of them hold at once with probability 1 − alpha."""
        return 1.0 - self.alpha / (max(1, self.n_candidates) * len(self.looks))

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
    """A speed-up (geometric mean of paired ratios) and its race interval."""

    ratio: float
    low: float
    high: float
    n_pairs: int
    confidence: float

    def to_dict(self) -> dict:
        return {"ratio": round(self.ratio, 4), "low": round(self.low, 4), "high": round(self.high, 4),
                "n_pairs": self.n_pairs, "confidence": round(self.confidence, 6)}


def tps_by_pair(records: Iterable[RequestRecord]) -> dict[tuple, float]:
    """(prompt_id, run) -> decode tok/s of the requests that measured one."""
    return {(r.prompt_id, r.run): r.decode_tps for r in records
            if r.error is None and isinstance(r.decode_tps, (int, float)) and r.decode_tps > 0}


def race_bound(baseline: Mapping[tuple, float], candidate: Mapping[tuple, float], confidence: float) -> Bound | None:
    """The paired interval on log ratios at ``confidence``; None with fewer than two pairs."""
    keys = sorted(set(baseline) & set(candidate))
    if len(keys) < 2:
        return None
    logs = [math.log(candidate[k] / baseline[k]) for k in keys]
    mean = statistics.fmean(logs)
    half = t_quantile(1.0 - (1.0 - confidence) / 2.0, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return Bound(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs), confidence)


class Why(str, Enum):
    BELOW_LEADER = "below_leader"        # cannot be the fastest
    BELOW_FLOOR = "below_floor"          # cannot beat the target alone by the noise floor


@dataclass(frozen=True)
class Elimination:
    why: Why
    bound: Bound
    leader: str | None = None
    leader_bound: Bound | None = None
    noise_floor: float = 0.0

    @property
    def reason(self) -> str:
        head = (f"eliminated by the race after {self.bound.n_pairs} requests: its speed-up is at most "
                f"{_pct(self.bound.high)} ({self.bound.confidence:.2%} interval {_pct(self.bound.low)} .. "
                f"{_pct(self.bound.high)}, estimate {_pct(self.bound.ratio)})")
        if self.why is Why.BELOW_LEADER and self.leader_bound is not None:
            return f"{head}, below {self.leader}'s lower bound of {_pct(self.leader_bound.low)}"
        return f"{head}, below the noise floor of {_pct(1 + self.noise_floor)}"


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%"


def eliminations(bounds: Mapping[str, Bound | None], noise_floor: float) -> dict[str, Elimination]:
    """Who leaves the race now, given every contender's current interval (None: not probed yet)."""
    known = {label: b for label, b in bounds.items() if b is not None}
    if not known:
        return {}
    leader = max(known, key=lambda label: (known[label].low, known[label].ratio))
    out: dict[str, Elimination] = {}
    for label, bound in known.items():
        if bound.high < 1.0 + noise_floor:
            out[label] = Elimination(Why.BELOW_FLOOR, bound, noise_floor=noise_floor)
        elif label != leader and bound.high < known[leader].low:
            out[label] = Elimination(Why.BELOW_LEADER, bound, leader, known[leader])
    return out


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
