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
* The spread of the log ratios is pooled over the contenders at a look (as Dunnett's
  many-to-one comparison pools its error), so a probe of a few requests has many degrees of
  freedom; a contender noisier than the pool keeps its own, wider bound (``max`` of the two).
  Pooling assumes the other contenders' spread says something about this one's: it is an
  approximation, and ``RaceRules.pooled`` turns it off.
* A candidate is eliminated when its upper bound against the leader (paired by prompt and
  repetition, so the prompts' own difficulty cancels) is below 1 — it is slower than the leader
  — or its upper bound against the baseline is below 1 + noise floor (it cannot beat the
  target alone by the noise floor).
* A contender whose upper bound against the leader is at most 1 + noise floor is *resolved*: it
  cannot beat the leader by more than the floor. One that does not look better than the leader
  (even one standard error up) but that, if its estimate holds, every planned request would
  still not resolve is *tied* (futility): measuring it further cannot change the answer, so the
  race stops. Futility gives up the guarantee for that contender — a tied candidate could be the
  true best by a little; ``benchmarks/adaptive.py`` measures how often that costs more than 2%.
* The race is decided when no contender is still open against the leader (:meth:`Look.decided`);
  :func:`judge` makes every decision of one look.

The sweep's driver (``sweep/race.py``) and the replay simulator (``benchmarks/adaptive.py``)
both decide with these functions, so the simulator measures the rules the sweep runs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from ..common.percent import signed_change
from ..config.prompts import Prompt
from ..results.file import RequestRecord, ResultsFile
from .student_t import t_quantile

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
    pooled: bool = True       # pool the spread of log ratios over the contenders (Dunnett-style)
    futility: bool = True     # stop measuring a contender that even every planned request would not separate

    @property
    def method(self) -> str:
        """How the race decides, as recorded in its rows (``race.method``)."""
        return "+".join([METHOD] + (["pooled-spread"] if self.pooled else []) + (["futility"] if self.futility else []))

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
    """A speed-up (geometric mean of paired ratios) and its race bounds, one-sided at ``error`` each;
    ``sd`` and ``df``: the spread of the log ratios the bounds used (own or pooled) and its degrees of freedom."""

    ratio: float
    low: float
    high: float
    n_pairs: int
    error: float
    sd: float = 0.0
    df: int = 0

    def to_dict(self) -> dict:
        return {"ratio": round(self.ratio, 4), "low": round(self.low, 4), "high": round(self.high, 4),
                "n_pairs": self.n_pairs, "error": float(f"{self.error:.4g}")}


def tps_by_pair(records: Iterable[RequestRecord]) -> dict[tuple, float]:
    """(prompt_id, run) -> decode tok/s of the requests that measured one."""
    return {(r.prompt_id, r.run): r.decode_tps for r in records
            if r.error is None and isinstance(r.decode_tps, (int, float)) and r.decode_tps > 0}


@dataclass(frozen=True)
class Pooled:
    """A standard deviation of paired log ratios pooled over the contenders, and its degrees of freedom."""

    sd: float
    df: int


def log_ratios(reference: Mapping[tuple, float], candidate: Mapping[tuple, float]) -> list[float]:
    """log(candidate / reference), paired by (prompt, run)."""
    return [math.log(candidate[k] / reference[k]) for k in sorted(set(reference) & set(candidate))]


def _sd(logs: Sequence[float]) -> float:
    mean = statistics.fmean(logs)
    return math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))   # floats: a race computes many


def pooled(samples: Iterable[Sequence[float]]) -> Pooled | None:
    """The pooled sd of several sets of paired log ratios (each weighted by its degrees of freedom),
    as Dunnett's many-to-one comparison pools its error; None with fewer than two sets."""
    sets = [s for s in samples if len(s) >= 2]
    if len(sets) < 2:
        return None
    df = sum(len(s) - 1 for s in sets)
    return Pooled(math.sqrt(sum((len(s) - 1) * _sd(s) ** 2 for s in sets) / df), df)


def race_bound(reference: Mapping[tuple, float], candidate: Mapping[tuple, float], error: float,
               pool: Pooled | None = None) -> Bound | None:
    """``candidate`` against ``reference`` (the baseline, or the leader), paired by (prompt, run):
    lower and upper bounds each wrong with probability ``error``. With ``pool``, the larger of the
    candidate's own sd and the pooled one is used — the pooled one with its degrees of freedom — so
    a candidate noisier than the others keeps its own wider bound. None with fewer than two pairs."""
    logs = log_ratios(reference, candidate)
    if len(logs) < 2:
        return None
    sd, df = _sd(logs), len(logs) - 1
    if pool is not None and pool.sd >= sd:
        sd, df = pool.sd, pool.df
    mean = statistics.fmean(logs)
    half = t_quantile(1.0 - error, df) * sd / math.sqrt(len(logs))
    return Bound(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs), error, sd, df)


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
        head = (f"eliminated by the race after {self.bound.n_pairs} requests (speed-up "
                f"{signed_change(self.bound.ratio, digits=1)}, at most {signed_change(self.bound.high, digits=1)})")
        if self.why is Why.BELOW_LEADER and self.against_leader is not None:
            return (f"{head}: {_slower(self.against_leader.ratio)} slower than {self.leader} on the same prompts, "
                    f"at least {_slower(self.against_leader.high)} slower")
        floor = signed_change(1 + self.noise_floor, digits=1)
        return f"{head}: it cannot beat the target alone by the noise floor of {floor}"


def _slower(ratio: float) -> str:
    return f"{(1 - ratio) * 100:.1f}%"


class Standing(str, Enum):
    """Where a contender that was not eliminated stands against the leader at a look."""

    LEADER = "leader"
    OPEN = "open"            # could still beat the leader by more than the noise floor: measure further
    RESOLVED = "resolved"    # cannot beat the leader by more than the noise floor
    TIED = "tied"            # could, but even every planned request would not tell (futility): stop measuring


@dataclass(frozen=True)
class Look:
    """What the race knows at one look: the leader, who leaves, and where the others stand."""

    leader: str | None
    vs_base: dict[str, Bound]
    vs_leader: dict[str, Bound]
    eliminated: dict[str, Elimination]
    standing: dict[str, Standing]          # every contender not eliminated

    @property
    def decided(self) -> bool:
        """Nothing left to measure for the choice: no contender is still open against the leader."""
        return self.leader in self.standing and all(s is not Standing.OPEN for s in self.standing.values())

    def separated(self) -> bool:
        """Decided, and every other contender was shown not to beat the leader by the noise floor."""
        return self.decided and all(s in (Standing.LEADER, Standing.RESOLVED) for s in self.standing.values())


def unresolvable(against_leader: Bound, rules: RaceRules) -> bool:
    """Futility: the contender does not look better than the leader by the noise floor (even one
    standard error above its estimate), yet if its estimate and spread hold, every planned request
    would still leave its upper bound above 1 + noise floor — more requests cannot settle it."""
    floor = math.log(1.0 + rules.noise_floor)
    estimate = math.log(against_leader.ratio)
    if estimate + against_leader.sd / math.sqrt(against_leader.n_pairs) > floor:
        return False                      # it may well be better: keep measuring it
    remaining = max(0, rules.total_requests - against_leader.n_pairs)
    if remaining == 0:
        return True
    half = (t_quantile(1.0 - against_leader.error, against_leader.df + remaining) * against_leader.sd
            / math.sqrt(rules.total_requests))
    return estimate + half > floor


def judge(tps: Mapping[str, Mapping[tuple, float]], baseline: Mapping[tuple, float], rules: RaceRules) -> Look:
    """One look. ``tps``: each contender's tok/s by (prompt, run), cut to its latest look
    (:meth:`RaceRules.look_size`); contenders not probed yet are left out."""
    base_pool = pooled(log_ratios(baseline, t) for t in tps.values()) if rules.pooled else None
    vs_base = {name: b for name, t in tps.items() if (b := race_bound(baseline, t, rules.error, base_pool)) is not None}
    if not vs_base:
        return Look(None, {}, {}, {}, {name: Standing.OPEN for name in tps})
    leader = max(vs_base, key=lambda name: vs_base[name].ratio)
    others = [name for name in tps if name != leader]
    lead_pool = pooled(log_ratios(tps[leader], tps[n]) for n in others) if rules.pooled else None
    vs_leader = {n: b for n in others if (b := race_bound(tps[leader], tps[n], rules.error, lead_pool)) is not None}
    eliminated: dict[str, Elimination] = {}
    standing: dict[str, Standing] = {}
    for name in tps:
        bound, against = vs_base.get(name), vs_leader.get(name)
        if bound is not None and bound.high < 1.0 + rules.noise_floor:
            eliminated[name] = Elimination(Why.BELOW_FLOOR, bound, noise_floor=rules.noise_floor)
        elif bound is not None and against is not None and against.high < 1.0:
            eliminated[name] = Elimination(Why.BELOW_LEADER, bound, leader, against)
        elif name == leader:
            standing[name] = Standing.LEADER
        elif against is None:
            standing[name] = Standing.OPEN
        elif against.high <= 1.0 + rules.noise_floor:
            standing[name] = Standing.RESOLVED
        elif rules.futility and unresolvable(against, rules):
            standing[name] = Standing.TIED
        else:
            standing[name] = Standing.OPEN
    return Look(leader, vs_base, vs_leader, eliminated, standing)


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
