"""The staged decision — the one place its rule lives. :func:`decide` is the entry point: the sweep asks it after
every stage (what to measure next, whether to stop), the verdict on the saved file (what to say), the simulator
through the sweep; each gets a :class:`Decision` and reads it, never re-deriving it.

One look after every stage; at look l every bound is one-sided at ``Spending.error(l)`` (:mod:`spending`), built on
the stages so far (:mod:`stage_evidence`: fresh prompts on fresh servers each stage, the machine's session spread
pooled; :mod:`stage_records` reads them from a results file):

* **eliminated** (the race, ``settings.search`` "adaptive"; the exhaustive search keeps everyone): upper bound against
  the target alone below 1 + floor (it cannot gain the floor), or upper bound against the leader below 1 (slower);
* **recommended**: the candidate with the highest estimate whose lower bound against the target alone clears
  1 + floor and whose lower bound against every other survivor is above 1 / (1 + margin) — it is no more than the
  margin (2%) slower than any of them — once every candidate was probed;
* **nothing gains**: every candidate left is shown below 1 + floor, once each has a stage (one whose requests all
  met bursts is measured on); those within ± the floor of the target alone are *equivalent* to it (TOST);
* **shortlist**: every contender left clears 1 + floor and the planned stages cannot tell which is fastest (or they
  ran out before one was picked).

Otherwise the next stage measures the survivors (everyone, exhaustively); with no stage left the target is
*unresolved*, and :mod:`settle` says how much more would settle it. A recommendation or "nothing gains" is final; a
shortlist is final unless ``--more`` asks for more stages. The figure quoted is the best's bound at the last look,
capped at what its counters allow, and the noise-floor test is made on it (:attr:`Decision.significant`).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

from ..config.settings import Settings
from ..results.file import ResultsFile
from .comparison import Judgements
from .machine_spread import MachineSpread, Spread
from .moments import ratio_of
from .replication import Estimate
from .settle import Projection, blocker, forecast, power_line
from .spending import Spending
from .stage_evidence import Series, contrast, estimate_stages, one_sided, quantile, up_to
from .stage_records import StageRecords, TargetStages

MARGIN = 0.02          # the pick is within this of the best


class Outcome(str, Enum):
    """What a target's stages decided (the summary's ``stages.decision``)."""

    RECOMMEND = "recommend"
    NOTHING_GAINS = "nothing gains"
    SHORTLIST = "shortlist"        # every candidate left gains; which is fastest the planned stages cannot settle
    UNRESOLVED = "unresolved"      # not decided: the next stage measures on (at the end of a sweep: unresolved)


class Why(str, Enum):
    BELOW_FLOOR = "below the floor"        # cannot gain the noise floor over the target alone
    BELOW_LEADER = "below the leader"      # slower than the leader


@dataclass(frozen=True)
class Bound:
    """An estimate on the ratio scale and its bounds, each one-sided at ``error``."""

    ratio: float
    low: float
    high: float
    error: float
    estimate: Estimate

    @classmethod
    def of(cls, est: Estimate, error: float) -> Bound:
        low, high = one_sided(est, error)
        return cls(ratio_of(est.mean), ratio_of(low) if math.isfinite(low) else 0.0,
                   ratio_of(high) if math.isfinite(high) else math.inf, error, est)


@dataclass(frozen=True)
class Elimination:
    why: Why
    look: int
    bound: Bound                            # against the target alone
    leader: str | None = None
    against_leader: Bound | None = None


@dataclass(frozen=True)
class Rule:
    """How one target is decided: the spending plan, the floor, the margin, and whether to eliminate."""

    spending: Spending
    noise_floor: float
    margin: float = MARGIN
    eliminate: bool = True

    @classmethod
    def of(cls, settings: Settings, horizon: int, candidates: int) -> Rule:
        """The rule a sweep with ``settings`` decides by: its noise floor, and elimination for the race."""
        return cls(Spending(horizon, candidates), noise_floor=settings.noise_floor,
                   eliminate=settings.search == "adaptive")

    @property
    def floor(self) -> float:
        return 1.0 + self.noise_floor


@dataclass(frozen=True)
class Look:
    number: int
    error: float
    vs_base: dict[str, Bound]               # every candidate judged at this look
    leader: str | None
    eliminated: dict[str, Elimination]      # left at this look
    survivors: tuple[str, ...]
    outcome: Outcome
    pick: str | None = None
    clearing: tuple[str, ...] = ()          # contenders (survivors not shown behind the leader) clearing 1 + floor
    equivalent: tuple[str, ...] = ()        # survivors within ± the floor of the target alone (TOST)
    not_separated: dict[str, Bound] = field(default_factory=dict)   # leader − survivor, where not settled
    contenders: tuple[str, ...] = ()        # survivors not shown behind the leader (the race keeps only these)

    @property
    def decided(self) -> bool:
        """A recommendation or "nothing gains": the looks stop here."""
        return self.outcome in (Outcome.RECOMMEND, Outcome.NOTHING_GAINS)


Versus = Callable[[str, str], "Bound | None"]     # (a, b) → a against b at a look's error between candidates


def judge(series: Mapping[str, Series], machine: Spread, rule: Rule, look: int,
          waiting: bool = False) -> Look:
    """One look. ``series``: each candidate still in (not eliminated) against the target alone, its stages
    so far; ``waiting``: some planned candidate has no stage yet (no recommendation, nor "nothing gains", before)."""
    error = rule.spending.error(look, machine.correlation)
    apart = rule.spending.contrast_error(look, machine.correlation)
    vs_base = {n: Bound.of(e, error) for n, s in series.items() if (e := estimate_stages(s, machine.pair)) is not None}

    def versus(first: str, second: str) -> Bound | None:
        est = estimate_stages(contrast(series[first], series[second]), machine.between)
        return Bound.of(est, apart) if est is not None else None

    return judge_bounds(vs_base, tuple(series), versus, rule, look, error, waiting)


def judge_bounds(vs_base: Mapping[str, Bound], names: Sequence[str], versus: Versus, rule: Rule, look: int,
                 error: float, waiting: bool = False) -> Look:
    """One look on its bounds: ``vs_base``, each candidate in ``names`` with an estimate against the target alone;
    ``versus``, two of them against each other (:func:`judge` makes them from the stages; :mod:`settle` from
    stages it simulates, to forecast when the looks will decide)."""
    leader = max(vs_base, key=lambda n: vs_base[n].ratio, default=None)
    behind = _eliminations(vs_base, leader, versus, rule, look)        # the exhaustive search keeps them
    eliminated = behind if rule.eliminate else {}
    survivors = tuple(n for n in names if n not in eliminated)
    contenders = [n for n in survivors if n not in behind]                  # not shown behind the leader
    clearing = tuple(n for n in contenders if n in vs_base and vs_base[n].low > rule.floor)
    equivalent = tuple(n for n in survivors if n in vs_base and vs_base[n].high < rule.floor
                       and vs_base[n].low > 1.0 / rule.floor)
    if not waiting and (not survivors or all(n in vs_base and vs_base[n].high < rule.floor for n in survivors)):
        return Look(look, error, dict(vs_base), leader, eliminated, survivors, Outcome.NOTHING_GAINS, None, clearing,
                    equivalent, contenders=tuple(contenders))
    pick, open_ = (None, {}) if waiting else _pick(vs_base, clearing, survivors, versus, rule)
    futile = not waiting and clearing and len(clearing) == len(contenders) and \
        all(_futile(b, rule, look) for n, b in open_.items() if n in contenders)
    outcome = Outcome.RECOMMEND if pick is not None else Outcome.SHORTLIST if futile else Outcome.UNRESOLVED
    return Look(look, error, dict(vs_base), leader, eliminated, survivors, outcome, pick, clearing, equivalent, open_,
                tuple(contenders))


def _futile(versus: Bound, rule: Rule, look: int) -> bool:
    """Even if the best clearing candidate leads a survivor by one standard error more than measured, the planned
    stages left would not show it within the margin of that survivor (its spread shrinking, its df growing as the
    stages add up): the comparison cannot be settled before the horizon."""
    left = rule.spending.horizon - look
    est = versus.estimate
    if left <= 0 or est.sessions < 1:
        return True
    grown = (est.sessions + left) / est.sessions          # the spread is learnt from the stages to come too
    se_final = est.se / math.sqrt(grown)
    reach = quantile(rule.spending.contrast_error(rule.spending.horizon), est.df * grown) * se_final
    return est.mean + est.se - reach <= -math.log(1.0 + rule.margin)


def _eliminations(vs_base: Mapping[str, Bound], leader: str | None, versus: Versus, rule: Rule,
                  look: int) -> dict[str, Elimination]:
    out: dict[str, Elimination] = {}
    for name, bound in vs_base.items():
        if bound.high < rule.floor:
            out[name] = Elimination(Why.BELOW_FLOOR, look, bound)
        elif leader is not None and name != leader:
            against = versus(name, leader)
            if against is not None and against.high < 1.0:
                out[name] = Elimination(Why.BELOW_LEADER, look, bound, leader, against)
    return out


def _pick(vs_base: Mapping[str, Bound], clearing: Sequence[str], survivors: Sequence[str], versus: Versus,
          rule: Rule) -> tuple[str | None, dict[str, Bound]]:
    """The best-estimate clearing candidate that no survivor beats by more than the margin; else the leader's
    comparisons not settled yet."""
    unsettled: dict[str, Bound] = {}
    # the strongest rivals first: a candidate fails at its first unsettled comparison (only the first candidate's
    # are all needed: they say whether the stages left could settle it)
    rivals = sorted(survivors, key=lambda n: vs_base[n].ratio if n in vs_base else -math.inf, reverse=True)
    for rank, name in enumerate(sorted(clearing, key=lambda n: vs_base[n].ratio, reverse=True)):
        open_: dict[str, Bound | None] = {}
        for other in rivals:
            if other == name:
                continue
            against = versus(name, other)
            if against is None or against.low <= 1.0 / (1.0 + rule.margin):
                open_[other] = against
                if rank:
                    break
        if not open_:
            return name, {}
        if not rank:
            unsettled = {k: v for k, v in open_.items() if v is not None}
    return None, unsettled


def replay(series: Mapping[str, Series], spread: MachineSpread, rule: Rule, without: Sequence[str] = (),
           made: dict | None = None) -> tuple[tuple[Look, ...], dict[str, Elimination]]:
    """The looks of one target from its candidates' stages (``without``: others with none yet), and who left when:
    look l sees stages < l of the candidates still in, and the machine's spread as it stood when that stage's last
    server had started. Stops at the first look that recommends or finds that nothing gains. ``made``: the looks
    judged before, by everything they were judged on (a sweep's earlier looks are not judged again)."""
    eliminated: dict[str, Elimination] = {}
    looks: list[Look] = []
    stages = max((s[-1].stage + 1 for s in series.values() if s), default=0)
    for number in range(1, stages + 1):
        current = {n: kept for n, s in series.items() if n not in eliminated and (kept := up_to(s, number))}
        if not current:
            break
        order = max(s[-1].order for s in current.values())
        waiting = bool(without) or len(current) + len(eliminated) < len(series)
        key = (number, waiting, rule, spread.at(order), tuple(current.items()))
        look = (made or {}).get(key) or judge(current, key[3], rule, number, waiting=waiting)
        if made is not None:
            made[key] = look
        looks.append(look)
        eliminated.update(look.eliminated)
        if look.decided:
            break              # (a shortlist goes on where --more measured further stages)
    return tuple(looks), eliminated


@dataclass(frozen=True)
class Quoted:
    """The figure quoted for a candidate: its bound at the last look (both sides at that look's error: 95% over
    every candidate and look together, so it holds for the pick whatever the selection and stopping), its
    estimate and upper end capped at what its counters allow (a verify step costs at least one target step)."""

    ratio: float
    low: float
    high: float
    measured: float                      # the estimate as measured
    cap: float | None                    # the most the counters allow
    bound: Bound

    @classmethod
    def of(cls, bound: Bound, cap: float | None) -> Quoted:
        ratio, high = bound.ratio, bound.high
        if cap is not None:
            ratio, high = min(ratio, cap), min(high, cap)
        return cls(ratio, min(bound.low, high), high, bound.ratio, cap, bound)


@dataclass(frozen=True)
class Decision:
    """One target's staged decision: its looks, who left when, the outcome, the best and the figure quoted for it,
    and the evidence it was made on (for what renders it: the next prompt's interval, what would settle it)."""

    target: str
    rule: Rule
    evidence: TargetStages
    looks: tuple[Look, ...]
    eliminated: dict[str, Elimination]
    outcome: Outcome
    best: str | None = None                 # the pick, else the leader among those still in
    quoted: Quoted | None = None            # of ``best``
    shortlist: tuple[str, ...] = ()         # by estimate, best first
    live: bool = False                      # the sweep measures on: no forecast of what would settle it yet

    @property
    def last(self) -> Look | None:
        return self.looks[-1] if self.looks else None

    @property
    def pick(self) -> str | None:
        return self.last.pick if self.last is not None else None

    @property
    def equivalent(self) -> tuple[str, ...]:
        return self.last.equivalent if self.last is not None else ()

    @property
    def significant(self) -> bool:
        """The noise-floor test of the quoted figure: shown faster than the target alone by more than the floor
        (recommended or shortlisted), or shown slower by more than it."""
        if (q := self.quoted) is None:
            return False
        gains = self.outcome in (Outcome.RECOMMEND, Outcome.SHORTLIST) and q.low > self.rule.floor
        return gains or q.high < 1 / self.rule.floor

    def final(self, more: int = 0) -> bool:
        """No further stage for this target: recommended, nothing gains, or a shortlist ``--more`` did not go on."""
        return (last := self.last) is not None and (last.decided or (last.outcome is Outcome.SHORTLIST and not more))

    def members(self, names: Sequence[str], always: Sequence[str] = ()) -> list[str]:
        """Who the next stage measures, of ``names``: everyone before the first look; then every candidate taking
        part (exhaustively) or those the looks kept in (the race); ``always`` whatever the looks said."""
        names = [n for n in names if n not in self.evidence.ineligible]    # over the memory limit: measured once
        if not self.looks:
            return names
        alive = {*(self.last.survivors if self.last is not None and self.rule.eliminate else self.evidence.series),
                 *self.evidence.awaiting}       # (its requests so far all left out: measured on)
        return [n for n in names if n in alive or n in always]

    def versus(self, first: str, second: str) -> Bound | None:
        """``first`` against ``second`` on the stages both measured, at the last look's error (the comparison a pick
        is made on; above 1: ``first`` is faster); None when either has no stage."""
        last, series = self.last, self.evidence.series
        if last is None or not series.get(first) or not series.get(second):
            return None
        a, b = up_to(series[first], last.number), up_to(series[second], last.number)
        if not a or not b:
            return None
        spread = self.evidence.machine.at(max(a[-1].order, b[-1].order))
        est = estimate_stages(contrast(a, b), spread.between)      # at the error a pick's comparisons are made at
        return Bound.of(est, self.rule.spending.contrast_error(last.number, spread.correlation)) if est else None

    @cached_property
    def settle(self) -> Projection | None:
        """Unresolved or a shortlist at the end of a run: how much more would settle it — the stages by which the
        looks, continued on what was measured (:func:`settle.forecast`), decide in most simulated futures — and what
        blocks now."""
        last = self.last
        if self.outcome not in (Outcome.UNRESOLVED, Outcome.SHORTLIST) or last is None or self.live:
            return None
        ev, rule, spread = self.evidence, self.rule, self.evidence.spread
        series = {n: ev.series[n] for n in last.survivors if n in ev.series}
        names = tuple(series)

        def decides(vs_base: Mapping[str, Estimate], versus: Callable[[str, str], Estimate | None],
                    number: int) -> tuple[bool, tuple[str, ...]]:
            error = rule.spending.error(number, spread.correlation)
            apart = rule.spending.contrast_error(number, spread.correlation)

            def against(a: str, b: str) -> Bound | None:
                return Bound.of(found, apart) if (found := versus(a, b)) is not None else None

            look = judge_bounds({n: Bound.of(e, error) for n, e in vs_base.items()}, [n for n in names if n in vs_base],
                                against, rule, number, error)
            return look.decided, tuple(look.eliminated)

        futures = forecast(series, last.contenders, spread, decides, look=last.number, per_stage=ev.per_stage,
                           set_size=None if ev.fixed else ev.prompt_set)
        stages = futures.stages if futures is not None else None

        about, gain, near = blocker({n: b.estimate for n, b in last.vs_base.items() if n in series},
                                    lambda a, b: estimate_stages(contrast(series[a], series[b]), spread.between),
                                    self.best, floor=rule.floor, margin=rule.margin, error=last.error,
                                    apart=rule.spending.contrast_error(last.number, spread.correlation))
        return Projection(stages, stages * ev.per_stage if stages is not None else None, gain, about,
                          futures.half if futures is not None else None, futures.share if futures is not None else None,
                          near)

    @cached_property
    def power(self) -> str | None:
        """What the spread measured here would let the stages show (the report's line; none while the sweep measures
        on: its looks show no report)."""
        if not self.looks or self.live:
            return None
        ev = self.evidence
        return power_line(ev.series.get(self.best or ""), ev.spread, floor=self.rule.floor,
                          spending=self.rule.spending, per_stage=ev.per_stage)


def decide_target(evidence: TargetStages, rule: Rule, live: bool = False, made: dict | None = None) -> Decision:
    """``evidence``'s looks under ``rule`` and what they decided. ``live``: the sweep goes on measuring this target
    (at the end, every contender left clearing the floor is a shortlist even when the looks could not say so)."""
    looks, eliminated = replay(evidence.series, evidence.machine, rule, evidence.unprobed + evidence.awaiting, made)
    if not looks:
        return Decision(evidence.target, rule, evidence, looks, eliminated, Outcome.UNRESOLVED)
    last = looks[-1]
    alive = [n for n in last.survivors if n in last.vs_base] or list(last.vs_base)
    best = last.pick or max(alive, key=lambda n: last.vs_base[n].ratio, default=None)
    quoted = Quoted.of(last.vs_base[best], evidence.caps.get(best)) if best is not None else None
    outcome = last.outcome
    if outcome is Outcome.UNRESOLVED and not live and last.clearing and set(last.clearing) >= set(last.contenders):
        outcome = Outcome.SHORTLIST         # every contender left gains, the stages ran out before one was picked
    shortlist = tuple(sorted(last.clearing, key=lambda n: -last.vs_base[n].ratio)) \
        if outcome is Outcome.SHORTLIST else ()
    return Decision(evidence.target, rule, evidence, looks, eliminated, outcome, best, quoted, shortlist, live)


class Decider:
    """Decides results files as a sweep grows them: each row's pairs and the machine's spread are kept from one
    look to the next (:class:`stage_records.StageRecords`), so a look costs what changed since the last; and each
    row as last judged against its baseline (the sweep's analyses of rows share it: :class:`Judgements`)."""

    def __init__(self) -> None:
        self.records = StageRecords()
        self.looks: dict = {}         # each look judged once (replay's ``made``)
        self.judgements = Judgements()

    def decide(self, results: ResultsFile, *, before: Mapping[str, int] | None = None, live: bool = False,
               only: Sequence[str] | None = None) -> dict[str, Decision]:
        """Every target measured in stages (``only``: of these), decided under the rule its settings give
        (``before``: per target, on its stages before that one only — what the sweep knew when it planned it;
        ``live``: see :func:`decide_target`)."""
        settings = results.read_settings()
        return {target: decide_target(found, Rule.of(settings, found.horizon, found.candidates), live, self.looks)
                for target, found in self.records.targets(results, before, only).items()}


def decide(results: ResultsFile, *, before: Mapping[str, int] | None = None, live: bool = False
           ) -> dict[str, Decision]:
    """The staged decision of every target of ``results`` measured in stages (see :meth:`Decider.decide`)."""
    return Decider().decide(results, before=before, live=live)
