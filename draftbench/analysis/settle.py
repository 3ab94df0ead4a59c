"""How much more would settle an unresolved target: "about N more prompts × S more server pairs would settle it".

That sentence is a promise, measured like the verdict's three (docs/statistics.md): continued by exactly what it
names (``--more S``), the sweep should decide — recommend, or find that nothing gains — in at least four cases
in five. So it is forecast the way the looks will decide, not by a formula for one comparison:

* **the stages to come are simulated**, :data:`DRAWS` times: each candidate still in gets one stage mean per
  stage, around a true gain drawn from what was measured — shrunk towards the candidates' average by as much as
  their spread is noise (empirical Bayes: the leader's estimate is high *because* it leads, the winner's curse) —
  with a part shared by the stage's candidates (its baseline server, its prompts) and a part of each one's own,
  at the spreads measured so far, themselves uncertain (drawn from their degrees of freedom); and **two
  contenders may be equal** (:func:`equal_chance`: a spike and slab for the gap between neighbours, equal before
  measuring with probability :data:`PRIOR_EQUAL`, updated by their measured difference) — drawn apart by their
  uncertainty, two equal drafts looked a few percent apart in most futures, and the 2% margin separated them at
  once, where the real ones are told within 2% of each other only when their difference is known to about ±0.6%;
* **after each simulated stage the look is made as the sweep will make it** (the decision's own rule on the
  simulated bounds: the same spending, the same boundaries beyond the plan);
* **S is the number of stages by which** :data:`CONFIDENCE` of the simulated futures have decided (looked at
  after :data:`LOOKED_AT` stages: every one at first, then further apart); beyond :data:`MAX_EXTRA` it says
  "not sure within 60 …" with the share that do decide by then and the stages by which half do ("--more H
  settles it about half the time": a promise measured too), or "more than …" where fewer than half do. The
  simulation is seeded by what was measured, so a verdict replayed from its file forecasts the same.

It names what blocks now (:func:`blocker`): of the comparisons the leader must clear to be recommended, the one
farthest from clearing in standard errors — its gain over the floor, or its margin to a named contender; when no
candidate is above the floor, showing that none gains it.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..common.percent import change_text
from .machine_spread import Spread
from .replication import Estimate
from .spending import Spending
from .stage_evidence import Series, contrast, estimate_stages, quantile, within_spread

MAX_EXTRA = 60
# The stages after which a simulated future is looked at: every one at first, then further apart (a forecast of
# 33 may be one of 28: it errs long, never short; and looking at every one of 60 stages would take seconds).
LOOKED_AT = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 17, 20, 24, 28, 33, 39, 46, 53, 60)
CONFIDENCE = 0.9          # the share of simulated futures decided by the stages forecast
DRAWS = 200
POWER_Z = 0.8416          # the report's power line: shown four times in five if the estimate is the truth
PRIOR_EQUAL = 0.25        # two neighbouring contenders equal in truth, before measuring (the futures' spike)

# The decision's look on simulated estimates: (each candidate against the target alone, two against each other,
# the look's number) → whether that look decides (recommends, or finds that nothing gains), and who it eliminates.
Decides = Callable[[Mapping[str, Estimate], Callable[[str, str], "Estimate | None"], int], tuple[bool, tuple[str, ...]]]


@dataclass(frozen=True)
class Projection:
    """Stages (server pairs per candidate) and prompts per candidate still needed; None: more than the cap."""

    stages: int | None
    prompts: int | None
    gain: float               # the ratio the blocking comparison is about (a gain to show, or a margin to resolve)
    about: str                # what blocks now: "b10's gain over the +2.0% floor", "whether b10 is within 2% of b5a"
    half: int | None = None   # stages by which half the simulated futures decide (None: fewer than half by the cap)
    share: float | None = None  # of the simulated futures, those that decide within MAX_EXTRA stages
    near: bool = False        # what blocks is the margin to a contender measured within 2 se (they may be equal)

    def describe(self, stage_size: int) -> str:
        if self.stages is None and self.half is not None and self.share is not None:
            # the futures settle by the cap more often than not (half do by `half`): "not likely" would say the
            # opposite of "82% do" (make demo, 2026-11-29); what is missing is the 90% a named S promises
            return (f"not sure within {MAX_EXTRA} more server pairs per candidate: {self.share:.0%} of the futures "
                    f"simulated from what was measured settle by then (fewer than the {CONFIDENCE:.0%} a forecast of "
                    f"how much would settle it needs); half within about "
                    f"{self.half * stage_size} more prompts × {self.half} more server pair(s) (blocking now: {self.about}) "
                    f"— --more {self.half} settles it about half the time")
        if self.stages is None:
            share = ("fewer than half" if self.share is None else "none" if self.share < 0.005
                     else f"only {self.share:.0%}")
            # the futures draw the gap from what was measured: a gap measured low reads as a near-tie (clear grid,
            # docs/statistics.md: 23 of 23 such sweeps decided within the cap), so the premise is said
            near = ("; two drafts this close may be equal, and equal ones are shown within the margin of each other "
                    "only after many server pairs — if their gap is larger than measured, fewer server pairs settle it") \
                if self.near else ""
            return (f"more than {MAX_EXTRA * stage_size} more prompts × {MAX_EXTRA} more server pairs per candidate would "
                    f"likely be needed to settle it: {share} of the futures simulated from what was measured settle "
                    f"within them (blocking now: {self.about}{near})")
        return (f"about {self.prompts} more prompts × {self.stages} more server pair(s) per candidate would settle it "
                f"({CONFIDENCE:.0%} of the futures simulated from what was measured decide by then; blocking now: "
                f"{self.about}) — run the same command with --more {self.stages}")


@dataclass(frozen=True)
class _Now:
    """One comparison as measured: its estimate, the sum of its values and their number, and its prompts' part."""

    est: Estimate
    total: float              # Σ values so far
    prompts: int
    within: float             # the spread from prompt to prompt (its prompts' part is within × prompt_weight)

    def se_after(self, prompts: int, stages: int, scale: float, set_size: int | None) -> float:
        """Its standard error with ``prompts`` in ``stages`` measured: the session's part shrinks with the stages,
        the prompts' part with the prompts — never below what the prompt set allows (past it, prompts come back) —
        both towards their true size (``scale`` × as measured) as the stages add up."""
        done = self.est.sessions
        prompt_now = self.within * prompt_weight(self.prompts, set_size)
        session_now = max(self.est.se ** 2 - prompt_now, 0.0)
        learnt = (done + (stages - done) * scale) / stages
        return math.sqrt(learnt * (self.within * prompt_weight(prompts, set_size) + session_now * done / stages))


def prompt_weight(prompts: int, set_size: int | None) -> float:
    """Σ_p (k_p / N)² for N prompts measured as evenly as the set allows: 1 / N while it lasts, then about 1 / set."""
    if not set_size or prompts <= set_size:
        return 1.0 / max(prompts, 1)
    q, r = divmod(prompts, set_size)
    return (r * (q + 1) ** 2 + (set_size - r) * q ** 2) / prompts ** 2


def _now(series: Series, est: Estimate) -> _Now:
    return _Now(est, sum(v for st in series for v in st.values), sum(st.n for st in series), within_spread(series)[0])


def _seed(now: Mapping[str, _Now]) -> int:
    text = ";".join(f"{n}:{x.est.mean:.6f}:{x.est.se:.6f}:{x.prompts}" for n, x in sorted(now.items()))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


@dataclass(frozen=True)
class _Truths:
    """What the simulated futures draw their true gains from: each survivor's mean and variance of its own (log
    scale), the variance of the part they share, and the adjacent contenders (by estimate) that may be equal, each
    pair with the chance that it is (:func:`equal_chance`)."""

    gains: Mapping[str, tuple[float, float]]
    common: float
    ties: tuple[tuple[str, str, float], ...] = ()

    def draw(self, shared_scale: float, own_scale: float, rng: random.Random) -> dict[str, float]:
        """One future's true gains: each drawn around its own, then each run of adjacent contenders drawn equal
        made equal (at their drawn gains' precision-weighted mean)."""
        level = rng.gauss(0.0, math.sqrt(shared_scale * self.common))
        gains = {n: level + rng.gauss(m, math.sqrt(own_scale * v)) for n, (m, v) in self.gains.items()}
        runs: list[list[str]] = []
        for a, b, chance in self.ties:
            if not runs or runs[-1][-1] != a:
                runs.append([a])
            if rng.random() < chance:
                runs[-1].append(b)
            else:
                runs.append([b])
        for run in (r for r in runs if len(r) > 1):
            weights = {n: 1.0 / max(self.gains[n][1], 1e-12) for n in run}
            equal = sum(weights[n] * gains[n] for n in run) / sum(weights.values())
            gains.update(dict.fromkeys(run, equal))
        return gains


def equal_chance(gap: Estimate, slab: float) -> float:
    """The chance that two contenders are equal in truth, given their measured difference ``gap`` (log scale):
    a spike and slab — before measuring, equal with probability :data:`PRIOR_EQUAL`, else apart by a gap drawn
    from N(0, ``slab``) (twice the contenders' spread of true gains) — updated by the difference's likelihood
    (Bayes' factor N(d; 0, se²) / N(d; 0, se² + slab)). The slab is never narrower than this pair's own gap
    asks (d² − se², the width that explains it best): a gap measured at three standard errors is not called
    equal merely because the other contenders are close. No slab (their spread no more than noise): equal."""
    if slab <= 0:
        return 1.0
    se2 = max(gap.se ** 2, 1e-12)
    slab = max(slab, gap.mean ** 2 - se2)
    log_factor = 0.5 * math.log1p(slab / se2) - 0.5 * gap.mean ** 2 * (1 / se2 - 1 / (se2 + slab))
    odds = PRIOR_EQUAL / (1 - PRIOR_EQUAL) * math.exp(min(log_factor, 50.0))
    return odds / (1 + odds)


def _ties(now: Mapping[str, _Now], pairs: Mapping[tuple[str, str], _Now], contenders: Sequence[str],
          among: float) -> tuple[tuple[str, str, float], ...]:
    """The contenders in order of their estimates, each with the next: the chance that the two are equal."""
    group = sorted((n for n in contenders if n in now), key=lambda n: -now[n].est.mean)
    return tuple((a, b, equal_chance(pairs[a, b].est, 2 * among)) for a, b in itertools.pairwise(group)
                 if (a, b) in pairs)


def _shrunk(now: Mapping[str, _Now], contenders: Sequence[str], shared: float
            ) -> tuple[dict[str, tuple[float, float]], float, float]:
    """Each survivor's true gain as a mean and a variance of its own (log scale), and the variance of the part they
    share (``shared``: their common stages). The ``contenders`` (not shown behind the leader) are shrunk towards
    their average by A / (A + V), A the spread of their true gains (their estimates' spread less their own noise):
    the leader's lead over them is high *because* it leads (the winner's curse), and where their spread is no more
    than noise they are taken as equal. The others keep their estimates (they are shown behind already)."""
    def noise(x: _Now) -> float:
        return max(x.est.se ** 2 - shared, 1e-12)

    out = {n: (x.est.mean, noise(x)) for n, x in now.items()}
    group = [n for n in contenders if n in now]
    if len(group) < 2:
        return out, shared, 0.0
    centre = statistics.fmean(now[n].est.mean for n in group)
    among = max(0.0, statistics.variance([now[n].est.mean for n in group]) - statistics.fmean(
        noise(now[n]) for n in group))
    for n in group:
        keep = among / (among + noise(now[n]))
        out[n] = (centre + keep * (now[n].est.mean - centre), keep * noise(now[n]))
    return out, shared + statistics.fmean(noise(now[n]) for n in group) / len(group), among


@dataclass(frozen=True)
class Futures:
    """When the simulated futures decide: the stages by which :data:`CONFIDENCE` of them have (None: not within
    :data:`MAX_EXTRA`), by which half have (None: fewer than half within it), and the share deciding within it."""

    stages: int | None
    half: int | None
    share: float


def forecast(series: Mapping[str, Series], contenders: Sequence[str], spread: Spread, decides: Decides, *,
             look: int, per_stage: int, set_size: int | None = None) -> Futures | None:
    """When the simulated futures of ``series`` (the candidates still in) decide, in stages after ``look`` (None:
    nothing to simulate). ``contenders``: those not shown behind the leader (shrunk together); ``set_size``: the
    prompt set's (past it, more stages narrow only the session's part)."""
    now = {n: _now(s, e) for n, s in series.items() if (e := estimate_stages(s, spread.pair)) is not None}
    if not now:
        return None
    names = sorted(now)
    pairs = {(a, b): _now(diff, e) for a in names for b in names if a != b
             and (e := estimate_stages(diff := contrast(series[a], series[b]), spread.between)) is not None}
    stages_now = max(x.est.sessions for x in now.values())
    # one more stage: each survivor's variance, and the part it shares with the stage's other candidates
    own_stage = {n: x.est.se ** 2 * stages_now for n, x in now.items()}
    shared = _shared_part(own_stage, {k: x.est.se ** 2 * stages_now for k, x in pairs.items()})
    gains, common, among = _shrunk(now, contenders, shared / stages_now)
    truth = _Truths(gains, common, _ties(now, pairs, contenders, among))
    # how well the spreads are known: against the target alone, and between candidates (often far fewer df)
    df = (statistics.median(x.est.df for x in now.values()),
          statistics.median(x.est.df for x in pairs.values()) if pairs else math.inf)
    rng = random.Random(_seed(now))
    future = _Future(now, pairs, own_stage, shared, stages_now, per_stage, set_size)
    settled: list[int] = []
    drawn = 0
    while drawn < DRAWS and drawn - len(settled) <= DRAWS // 2:     # past that, fewer than half can decide
        when = future.first_decision(truth, df, decides, look, rng)
        drawn += 1
        if when is not None:
            settled.append(when)
    settled.sort()
    most, half = math.ceil(CONFIDENCE * DRAWS), math.ceil(DRAWS / 2)
    return Futures(settled[most - 1] if len(settled) >= most else None,
                   settled[half - 1] if len(settled) >= half else None, len(settled) / drawn)


def _shared_part(own: Mapping[str, float], pairs: Mapping[tuple[str, str], float]) -> float:
    """What one stage's candidates share (per stage): Var(a) + Var(b) − Var(a − b) = 2·Cov, averaged over pairs."""
    if not pairs:
        return 0.0
    found = statistics.fmean((own[a] + own[b] - v) / 2 for (a, b), v in pairs.items())
    return min(max(0.0, found), min(own.values()))


@dataclass(frozen=True)
class _Future:
    """The stages to come for the comparisons as measured now (the simulation's fixed part)."""

    now: Mapping[str, _Now]
    pairs: Mapping[tuple[str, str], _Now]
    own_stage: Mapping[str, float]          # one more stage's variance, each survivor
    shared: float                           # … the part its candidates share
    stages_now: int
    per_stage: int
    set_size: int | None

    def first_decision(self, truth: _Truths, df: tuple[float, float], decides: Decides, look: int,
                       rng: random.Random) -> int | None:
        """The first simulated stage after which the look decides (None: not within MAX_EXTRA). The spreads' true
        sizes are drawn from their degrees of freedom: the shared part's from the comparisons with the target alone,
        each candidate's own part (what two candidates' difference carries) from the comparisons between them."""
        shared_scale, own_scale = (drawn_scale(d, rng) for d in df)
        gains = truth.draw(shared_scale, own_scale, rng)
        totals = {n: x.total for n, x in self.now.items()}
        count = {n: x.prompts for n, x in self.now.items()}
        alive = set(self.now)
        for extra in range(1, MAX_EXTRA + 1):
            common = rng.gauss(0.0, math.sqrt(shared_scale * self.shared))
            for n in sorted(alive):
                x, own = self.now[n], max(self.own_stage[n] - self.shared, 0.0)
                if self.set_size and count[n] + self.per_stage > self.set_size:
                    # past the set its prompts come back: around what they showed, with the session's spread only
                    centre, own = totals[n] / count[n], max(own - x.within / self.per_stage, 0.0)
                else:
                    centre = gains[n]
                totals[n] += self.per_stage * (centre + common + rng.gauss(0.0, math.sqrt(own_scale * own)))
                count[n] += self.per_stage
            if extra not in LOOKED_AT:
                continue
            stages = self.stages_now + extra
            means = {n: totals[n] / count[n] for n in alive}
            vs_base = {n: self._estimate(self.now[n], means[n], count[n], stages, self._mixed(n, shared_scale, own_scale))
                       for n in alive}
            decided, left = decides(vs_base, self._versus(means, count, stages, own_scale), look + extra)
            if decided:
                return extra
            alive -= set(left)
        return None

    def _mixed(self, name: str, shared_scale: float, own_scale: float) -> float:
        """A comparison with the target alone carries the shared part and its own: their scales, weighted."""
        total = self.own_stage[name]
        own = max(total - self.shared, 0.0)
        return (shared_scale * (total - own) + own_scale * own) / total if total > 0 else 1.0

    def _estimate(self, x: _Now, mean: float, prompts: int, stages: int, scale: float) -> Estimate:
        return Estimate(mean, x.se_after(prompts, stages, scale, self.set_size), x.est.df * stages / self.stages_now,
                        prompts, stages, x.est.question)

    def _versus(self, means: Mapping[str, float], count: Mapping[str, int], stages: int,
                scale: float) -> Callable[[str, str], Estimate | None]:
        def versus(a: str, b: str) -> Estimate | None:
            x = self.pairs.get((a, b))
            return None if x is None else self._estimate(x, means[a] - means[b], min(count[a], count[b]), stages,
                                                         scale)
        return versus


def blocker(est: Mapping[str, Estimate], versus: Callable[[str, str], Estimate | None], leader: str | None, *,
            floor: float, margin: float, error: float, apart: float) -> tuple[str, float, bool]:
    """What blocks the leader's recommendation now, the ratio the first of it is about, and whether it is the margin
    to a contender measured close enough to be equal (within two standard errors): of its gain over the floor and
    its margin to each contender, those not cleared at this look, the farthest from clearing (in standard errors)
    first; when no candidate is above the floor, showing that none gains it. ``error``, ``apart``: this look's
    one-sided errors (against the target alone, between candidates)."""
    if leader is None or leader not in est:
        return "which candidate gains", 1.0, False
    lead = est[leader]
    if math.exp(lead.mean) <= floor:
        return f"whether any candidate gains the {change_text(floor)} floor (best: {leader})", math.exp(lead.mean), False
    found = [(quantile(error, lead.df) - (lead.mean - math.log(floor)) / max(lead.se, 1e-12),
              f"{leader}'s gain over the {change_text(floor)} floor", math.exp(lead.mean), False)]
    for other in est:
        against = versus(leader, other) if other != leader else None
        if against is not None:
            found.append((quantile(apart, against.df) - (against.mean + math.log(1 + margin)) / max(against.se, 1e-12),
                          f"whether {leader} is within {margin:.0%} of {other}", math.exp(against.mean),
                          abs(against.mean) <= 2 * against.se))     # far apart, blocked only by few df: not "close"
    found.sort(key=lambda f: -f[0])
    blocking = [f for f in found if f[0] > 0] or found[:1]
    return "; ".join(f[1] for f in blocking[:3]), blocking[0][2], any(f[3] for f in blocking[:3])


def stages_to_clear(est: Estimate, distance: float, spending: Spending, stage_size: int) -> int | None:
    """Extra stages until ``distance`` (log scale, > 0: what the estimate must clear by) exceeds the bound's
    reach plus 80% power, the spread learnt from the stages to come; None beyond the cap, 0 when already there."""
    if distance <= 0:
        return None
    done = max(1, est.sessions)
    for extra in range(0, MAX_EXTRA + 1):
        total = done + extra
        se = est.se * math.sqrt(done / total)
        df = est.df * total / done
        if (quantile(spending.error(total), df) + POWER_Z) * se < distance:
            return extra
    return None


POWER_GAIN = 1.10


def power_line(series: Series | None, spread: Spread, *, floor: float, spending: Spending, per_stage: int
               ) -> str | None:
    """With the spread a sweep measured: after how many stages a candidate +10% faster than the target alone
    would be shown faster by the floor, four times in five (the power curve, at this machine's noise)."""
    est = estimate_stages(series, spread.pair) if series else None
    if est is None:
        return None
    extra = stages_to_clear(est, math.log(POWER_GAIN) - math.log(floor), spending, per_stage)
    planned = spending.horizon
    if extra is None:
        return (f"With the spread measured here, a candidate {change_text(POWER_GAIN)} faster than the target alone "
                f"would not be shown so within {est.sessions + MAX_EXTRA} stages.")
    return (f"With the spread measured here, a candidate {change_text(POWER_GAIN)} faster than the target alone "
            f"would be shown so four times in five after about {max(1, est.sessions + extra)} stage(s) ({planned} "
            "planned).")


MAX_SCALE = 1e4      # a drawn variance at most this many times the measured one (100 times its spread)


def drawn_scale(df: float, rng: random.Random) -> float:
    """A variance's true size over its estimate, drawn from its degrees of freedom (df / chi²_df); 1 without df.
    At a df near 0 the chi² draw can underflow to 0: the draw is held at :data:`MAX_SCALE`."""
    if not (math.isfinite(df) and df > 0):
        return 1.0
    chi2 = 2 * rng.gammavariate(df / 2, 1.0)
    return min(df / chi2, MAX_SCALE) if chi2 > 0 else MAX_SCALE
