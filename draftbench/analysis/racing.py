"""Adaptive search: the racing rules, as pure functions of what was measured.

A race measures every candidate's first block (the *probe*: every prompt once, or with one run
half of them, categories interleaved), then spends the rest of its blocks only on the candidates
that could still win, looking after every pass (``sweep/schedule.py``). It looks at the data
many times and chooses among many candidates, so a plain 95% interval at every look would stop
on noise far more often than 5% of the time. The rules here keep the overall error at
:data:`ALPHA`:

* **A spent boundary.** Every bound is one-sided at error ALPHA / (candidates × looks): the
  alpha is spent in equal shares over every look of every candidate (Bonferroni; an
  alpha-spending plan that never spends more than ALPHA in total). The true best candidate can
  only be eliminated, and a useless one only declared the winner, through one of its own bounds
  being wrong at one of the looks, so either happens with probability at most ALPHA however
  often the race looks.
* **Prompts and sessions.** Bounds are built like every interval here (:mod:`replication`): on
  prompts, with the session-to-session spread pooled over the contenders; before two sessions
  of anything exist (the probe), a spread of :data:`ASSUMED_SESSION_SD` is assumed.
* **Elimination.** A contender leaves when its upper bound against the baseline is below
  1 + noise floor (it cannot beat the target alone by the floor), or its upper bound against the
  *leader* (paired prompt by prompt and repetition) is below 1 (it is slower than the leader).
* **Standing against the leader.** *Resolved* when the upper bound is at most 1 + floor (it
  cannot beat the leader by more than the floor); of those, *tied* when the lower bound is also
  at least 1 / (1 + floor) — an equivalence shown by two one-sided tests (TOST). A contender that
  does not look better than the leader and that, if its estimate holds, even every planned block
  would not resolve is *unresolved* (futility): it stops, and the race claims nothing about it.
  Otherwise it is *open*: measure it further.
  At the last look every contender still open is unresolved.
* **The winner** is the leader once no contender is open and its lower bound against the
  baseline clears 1 + floor at the spent level; the verdict uses that one decision.

The sweep's driver (``sweep/race.py``) and the simulators (``benchmarks/verdicts.py``,
``benchmarks/adaptive.py``) decide with :func:`judge`, so the simulators measure the rules the
sweep runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from ..common.percent import signed_change
from ..config.settings import DEFAULTS
from ..results.file import ResultsFile
from .pairing import Pair
from .replication import SessionVariance, Unit, estimate, pool_sessions, session_component
from .student_t import t_quantile

ALPHA = 0.05            # overall chance of a wrong elimination, or of a wrong winner
METHOD = "bonferroni-over-looks"
# Before any contender has two sessions, the session spread of a log ratio (both servers' share)
# is assumed to be 5%: the top of what the statistics issue reports for shared machines' sessions.
ASSUMED_SESSION_SD = 0.05


@dataclass(frozen=True)
class RaceRules:
    """The shape of one target's race: how many candidates, how many looks (blocks), the floor."""

    n_candidates: int
    n_looks: int
    noise_floor: float = DEFAULTS.noise_floor
    alpha: float = ALPHA
    futility: bool = True          # stop measuring a contender that even every planned block would not resolve

    @property
    def method(self) -> str:
        """How the race decides, as recorded in its rows (``race.method``)."""
        return "+".join([METHOD, "prompts-and-sessions"] + (["futility"] if self.futility else []))

    @property
    def error(self) -> float:
        """Error of each one-sided bound: alpha spent over every candidate and every look."""
        return self.alpha / (max(1, self.n_candidates) * max(1, self.n_looks))


@dataclass(frozen=True)
class Bound:
    """A speed-up (ratio of geometric means) and its race bounds, one-sided at ``error`` each."""

    ratio: float
    low: float
    high: float
    n_pairs: int
    error: float
    se: float = 0.0
    df: float = 0.0

    def to_dict(self) -> dict:
        return {"ratio": round(self.ratio, 4), "low": round(self.low, 4), "high": round(self.high, 4),
                "n_pairs": self.n_pairs, "error": float(f"{self.error:.4g}")}


def _units(pairs: Sequence[Pair]) -> list[Unit]:
    return [Unit(p.prompt_id, p.log_ratio, p.session, p.category) for p in pairs]


def race_bound(units: Sequence[Unit], error: float, sessions: SessionVariance | None) -> Bound | None:
    """Bounds on exp(mean log ratio), each wrong with probability ``error``; None with fewer than two units."""
    est = estimate(units, sessions)
    if est is None:
        return None
    low, high = est.one_sided(1.0 - error)
    return Bound(math.exp(est.mean), math.exp(low) if math.isfinite(low) else 0.0,
                 math.exp(high) if math.isfinite(high) else math.inf, len(units), error, est.se, est.df)


def against(leader: Sequence[Pair], other: Sequence[Pair]) -> list[Unit]:
    """log(other / leader), paired by (prompt, repetition); the session is the pair of sessions."""
    lead = {(p.prompt_id, p.run): p for p in leader}
    return [Unit(p.prompt_id, p.log_ratio - lead[(p.prompt_id, p.run)].log_ratio,
                 f"{p.session}|{lead[(p.prompt_id, p.run)].session}", p.category)
            for p in other if (p.prompt_id, p.run) in lead]


def spread(units_by_name: Mapping[str, Sequence[Unit]], servers: int = 2) -> SessionVariance:
    """The session spread pooled over the contenders, or, while it cannot be measured, the assumed one
    (for a log ratio of ``servers`` sessions: 2 against the baseline, 4 between two candidates)."""
    pooled = pool_sessions(session_component(u) for u in units_by_name.values())
    if pooled.df >= 2:
        return pooled
    return SessionVariance(ASSUMED_SESSION_SD ** 2 * servers / 2, math.inf)


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
    return signed_change(ratio, digits=1) if math.isfinite(ratio) else "unbounded"


def _slower(ratio: float) -> str:
    return f"{(1 - ratio) * 100:.1f}%"


class Standing(str, Enum):
    """Where a contender that was not eliminated stands against the leader at a look."""

    LEADER = "leader"
    OPEN = "open"                # could still beat the leader by more than the floor: measure further
    RESOLVED = "resolved"        # cannot beat the leader by more than the floor
    TIED = "tied"                # resolved, and not worse by more than the floor either (TOST)
    UNRESOLVED = "unresolved"    # futility: even every planned block would not tell, so it stops


@dataclass(frozen=True)
class Look:
    """What the race knows at one look: the leader, who leaves, where the others stand, and whether
    the leader has won (its lower bound against the baseline clears 1 + floor)."""

    leader: str | None
    vs_base: dict[str, Bound]
    vs_leader: dict[str, Bound]
    eliminated: dict[str, Elimination]
    standing: dict[str, Standing]          # every contender not eliminated
    leader_clears: bool = False

    @property
    def decided(self) -> bool:
        """Nothing left to measure for the choice: no contender is still open against the leader."""
        return self.leader in self.standing and all(s is not Standing.OPEN for s in self.standing.values())

    @property
    def winner(self) -> str | None:
        return self.leader if self.decided and self.leader_clears else None

    def outcome(self) -> dict:
        """The decision as data (``race`` in the summary): winner, tied, resolved, unresolved, eliminated, why."""
        by = {s: sorted(n for n, st in self.standing.items() if st is s) for s in Standing}
        return {"winner": self.winner, "leader": self.leader, "tied": by[Standing.TIED],
                "resolved": by[Standing.RESOLVED], "unresolved": by[Standing.UNRESOLVED], "open": by[Standing.OPEN],
                "eliminated": {n: e.reason for n, e in sorted(self.eliminated.items())}}


def unresolvable(against_leader: Bound, rules: RaceRules, looks_done: int) -> bool:
    """Futility: the contender does not look better than the leader (even one standard error up), yet if
    its estimate and spread hold, every planned block would still leave its upper bound above 1 + floor."""
    floor = math.log(1.0 + rules.noise_floor)
    estimate_ = math.log(against_leader.ratio)
    if estimate_ + against_leader.se > floor:
        return False                      # it may well be better: keep measuring it
    if looks_done >= rules.n_looks:
        return True
    se_final = against_leader.se * math.sqrt(looks_done / rules.n_looks)
    df = against_leader.df if math.isfinite(against_leader.df) else 1e6
    return estimate_ + t_quantile(1.0 - rules.error, max(1.0, df)) * se_final > floor


def judge(pairs: Mapping[str, Sequence[Pair]], rules: RaceRules, looks_done: int = 1) -> Look:
    """One look. ``pairs``: each contender's paired log ratios against the baseline (from the blocks
    measured so far); ``looks_done``: how many blocks the most measured contender has."""
    units = {name: _units(p) for name, p in pairs.items()}
    base_spread = spread(units)
    vs_base = {name: b for name, u in units.items() if (b := race_bound(u, rules.error, base_spread)) is not None}
    if not vs_base:
        return Look(None, {}, {}, {}, {name: Standing.OPEN for name in pairs})
    leader = max(vs_base, key=lambda name: vs_base[name].ratio)
    others = {n: against(pairs[leader], pairs[n]) for n in pairs if n != leader}
    lead_spread = spread(others, servers=4) if others else base_spread
    vs_leader = {n: b for n, u in others.items() if (b := race_bound(u, rules.error, lead_spread)) is not None}
    eliminated: dict[str, Elimination] = {}
    standing: dict[str, Standing] = {}
    floor = 1.0 + rules.noise_floor
    for name in pairs:
        bound, versus = vs_base.get(name), vs_leader.get(name)
        if bound is not None and bound.high < floor:
            eliminated[name] = Elimination(Why.BELOW_FLOOR, bound, noise_floor=rules.noise_floor)
        elif bound is not None and versus is not None and versus.high < 1.0:
            eliminated[name] = Elimination(Why.BELOW_LEADER, bound, leader, versus)
        elif name == leader:
            standing[name] = Standing.LEADER
        elif versus is None:
            standing[name] = Standing.OPEN
        elif versus.high <= floor:
            standing[name] = Standing.TIED if versus.low >= 1.0 / floor else Standing.RESOLVED
        elif looks_done >= rules.n_looks or (rules.futility and unresolvable(versus, rules, looks_done)):
            standing[name] = Standing.UNRESOLVED       # nothing left to measure, or nothing it could settle
        else:
            standing[name] = Standing.OPEN
    clears = leader in vs_base and vs_base[leader].low > floor
    return Look(leader, vs_base, vs_leader, eliminated, standing, clears)


def server_loads(results: ResultsFile) -> int:
    """Servers the sweep started: every server session its requests record (schema 4), else one per
    row that reached a server, more for rows a race measured over several loads (``race.loads``)."""
    sessions = {r.session for row in results.results for r in row.requests if r.session}
    total = len(sessions)
    for row in results.results:
        if any(r.session for r in row.requests):
            continue
        loads = (row.race or {}).get("loads")
        if isinstance(loads, int):
            total += loads
        elif row.server and row.server.get("command"):
            total += 1
    return total
