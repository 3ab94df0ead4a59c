"""What the stages measured, as numbers: per stage, one log ratio per prompt; estimates built on them.

A *stage* (``sweep/stages.py``) sends fresh prompts to fresh server pairs: every surviving candidate
gets a server beside (or between) baseline servers of its own, and measures the stage's prompts once.
So for one candidate against the target alone, a stage's mean over its n prompts varies by

    σ²_w / n  +  τ²

— σ²_w the spread from prompt to prompt (and request to request) inside one stage, τ² the spread of
one server pair's offset (the machine's session effect, both servers' share). Stages are independent
(new prompts, new servers), so over S stages and N prompts in all the mean's variance is

    V = σ²_w / N  +  τ² · Σ_s (n_s / N)²

and between two candidates of one stage the spread of their difference, where what the stage shares (its
baseline server, its prompts) cancels. σ²_w comes from the spread inside the stages (df = Σ (n_s − 1));
the session spreads are the machine's, not a candidate's, so they are pooled over every comparison the
sweep measured before the look (:class:`MachineSpread`): with C candidates and S stages their degrees of
freedom are about C·(S − 1), not the 1–2 of one row's sessions.

When a prompt set is too small for fresh prompts at every stage, every stage measures the same prompts
(on fresh servers): the question becomes "on these prompts" and prompt effects are fixed, so the
spread that counts is the residual of a two-way table (prompts × stages).
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from .moments import variance
from .replication import PROMPTS_LIKE_THESE, THESE_PROMPTS, Estimate, SessionVariance, satterthwaite
from .student_t import t_quantile

# Before the machine's session spread can be measured (no comparison has two stages yet), a server pair's
# offset is taken to be 5% (log sd, both servers' share): the top of what shared machines show.
ASSUMED_PAIR_SD = 0.05
ASSUMED = SessionVariance(ASSUMED_PAIR_SD ** 2, math.inf)


@dataclass(frozen=True)
class StageSample:
    """One stage of one comparison: a log ratio per prompt (its requests' mean), in the stage's order."""

    stage: int
    prompts: tuple[str, ...]
    values: tuple[float, ...]
    order: int = 0               # the last server session it used (s<N>): what was measured before a look

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    def within_ss(self) -> float:
        m = self.mean
        return sum((v - m) ** 2 for v in self.values)


Series = tuple[StageSample, ...]     # one comparison's stages, in stage order


def series_from(values: Iterable[tuple[int, str, float, int]]) -> Series:
    """(stage, prompt, log ratio, session order) → stage samples; a prompt measured twice in a stage
    counts once, at its mean."""
    by_stage: dict[int, dict[str, list[float]]] = {}
    order: dict[int, int] = {}
    for stage, prompt, value, session in values:
        by_stage.setdefault(stage, {}).setdefault(prompt, []).append(value)
        order[stage] = max(order.get(stage, 0), session)
    return tuple(StageSample(s, tuple(by_stage[s]), tuple(statistics.fmean(v) for v in by_stage[s].values()),
                             order[s]) for s in sorted(by_stage))


def up_to(series: Series, stages: int) -> Series:
    """The stages before ``stages`` (what was known at look ``stages``)."""
    return tuple(s for s in series if s.stage < stages)


def contrast(first: Series, second: Series) -> Series:
    """``first`` − ``second``, prompt by prompt within each stage both measured (two candidates: the prompt
    and its shared effects cancel)."""
    other = {s.stage: dict(zip(s.prompts, s.values)) for s in second}
    out = []
    for s in first:
        theirs = other.get(s.stage)
        if not theirs:
            continue
        kept = [(p, v - theirs[p]) for p, v in zip(s.prompts, s.values) if p in theirs]
        if kept:
            out.append(StageSample(s.stage, tuple(p for p, _ in kept), tuple(v for _, v in kept), s.order))
    return tuple(out)


def crossed(series: Series) -> bool:
    """Whether some prompt was measured in two stages: then the claim is about these prompts."""
    seen: set[str] = set()
    for s in series:
        if seen & set(s.prompts):
            return True
        seen.update(s.prompts)
    return False


def _within(series: Series) -> tuple[float, int]:
    """σ²_w pooled inside the stages, and its degrees of freedom."""
    df = sum(s.n - 1 for s in series)
    return (sum(s.within_ss() for s in series) / df, df) if df > 0 else (0.0, 0)


def _two_way_residual(series: Series) -> tuple[float, int] | None:
    """Residual variance of prompts × stages over the prompts every stage measured (None: too few)."""
    common = set(series[0].prompts)
    for s in series[1:]:
        common &= set(s.prompts)
    p_n, s_n = len(common), len(series)
    if p_n < 2 or s_n < 2:
        return None
    cells = {(p, i): dict(zip(s.prompts, s.values))[p] for i, s in enumerate(series) for p in common}
    grand = statistics.fmean(cells.values())
    row = {p: statistics.fmean(cells[(p, i)] for i in range(s_n)) for p in common}
    col = {i: statistics.fmean(cells[(p, i)] for p in common) for i in range(s_n)}
    ss = sum((cells[(p, i)] - row[p] - col[i] + grand) ** 2 for p in common for i in range(s_n))
    df = (p_n - 1) * (s_n - 1)
    return ss / df, df


def estimate_stages(series: Series, session: SessionVariance) -> Estimate | None:
    """The mean log ratio over the series' prompts, its standard error and degrees of freedom.
    ``session``: the spread one stage's server sessions add to its mean (:class:`Spread`)."""
    values = [v for s in series for v in s.values]
    n_all = len(values)
    if n_all < 2:
        return None
    mean = statistics.fmean(values)
    fixed = crossed(series)
    within: tuple[float, int] | None = _two_way_residual(series) if fixed else None
    if within is None:
        within = _within(series)
    share = sum((s.n / n_all) ** 2 for s in series)
    if within[1] == 0:          # one prompt per stage: the stages' spread holds both parts
        spread = variance(values)
        est_var, df = spread / n_all, float(n_all - 1)
    else:
        prompt_term = within[0] / n_all
        session_term = session.variance * share
        est_var = prompt_term + session_term
        df = satterthwaite([(prompt_term, within[1]), (session_term, session.df)])
    prompts = len({p for s in series for p in s.prompts})
    question = THESE_PROMPTS if fixed or prompts < 2 else PROMPTS_LIKE_THESE
    return Estimate(mean, math.sqrt(max(0.0, est_var)), df, prompts, len(series), question)


def predicted(series: Series, session: SessionVariance, confidence: float = 0.95) -> tuple[float, float] | None:
    """Where the next prompt like these falls, on a server pair of its own (log scale, two-sided): the
    mean's uncertainty plus one prompt's spread and one pair's session offset."""
    est = estimate_stages(series, session)
    if est is None:
        return None
    within = _within(series)
    spread = within[0] if within[1] else variance([v for s in series for v in s.values])
    half = t_quantile(1 - (1 - confidence) / 2, min(max(est.df, 1.0), 1e6)) * math.sqrt(
        est.se ** 2 + spread + session.variance)
    return est.mean - half, est.mean + half


def one_sided(est: Estimate, error: float) -> tuple[float, float]:
    """(lower, upper) bounds on the log scale, each wrong with probability ``error``."""
    if est.se == 0.0:
        return est.mean, est.mean
    half = quantile(error, est.df) * est.se if est.df >= 1 else math.inf
    return est.mean - half, est.mean + half


# --------------------------------------------------------------------------- the machine's session spread

@dataclass(frozen=True)
class _Moments:
    """A variance component by the method of moments, not truncated (pooled before truncating)."""

    component: float
    df: int
    variance: float       # of the component (for Satterthwaite's degrees of freedom)


def _moments(series: Series) -> _Moments | None:
    """One comparison's one-way analysis of variance over its stages: τ² of one server pair."""
    if len(series) < 2:
        return None
    if crossed(series):
        return _crossed_moments(series)
    within, df_w = _within(series)
    n = sum(s.n for s in series)
    k = len(series)
    grand = statistics.fmean(v for s in series for v in s.values)
    ms_b = sum(s.n * (s.mean - grand) ** 2 for s in series) / (k - 1)
    n0 = (n - sum(s.n ** 2 for s in series) / n) / (k - 1)
    if n0 <= 0 or df_w == 0:          # one prompt per stage: σ²_w cannot be told from τ²
        return None
    variance = (2 * ms_b ** 2 / (k - 1) + 2 * within ** 2 / df_w) / n0 ** 2
    return _Moments((ms_b - within) / n0, k - 1, variance)


def _crossed_moments(series: Series) -> _Moments | None:
    residual = _two_way_residual(series)
    if residual is None:
        return None
    common = set(series[0].prompts)
    for s in series[1:]:
        common &= set(s.prompts)
    means = [statistics.fmean(dict(zip(s.prompts, s.values))[p] for p in common) for s in series]
    k, p_n = len(series), len(common)
    ms_stage = p_n * variance(means)
    spread = (2 * ms_stage ** 2 / (k - 1) + 2 * residual[0] ** 2 / residual[1]) / p_n ** 2
    return _Moments((ms_stage - residual[0]) / p_n, k - 1, spread)


def _between_moments(table: Sequence[Series]) -> _Moments | None:
    """The session spread of a candidate − candidate stage contrast, from one target's table of stage means
    (candidates × stages, two-way: what the stage shares — its baseline server, its prompts — cancels):
    residual mean square less the prompts' share of it, times two. The largest complete table is used."""
    best: tuple[int, list[Series]] | None = None
    for k in range(2, max((len(s) for s in table), default=0) + 1):
        rows = [s[:k] for s in table if len(s) >= k]
        df = (len(rows) - 1) * (k - 1)
        if len(rows) >= 2 and df > (best[0] if best else 0) and \
                all(tuple(x.stage for x in r) == tuple(x.stage for x in rows[0]) for r in rows):
            best = (df, rows)
    if best is None:
        return None
    df, rows = best
    means = [[x.mean for x in r] for r in rows]
    c_n, s_n = len(rows), len(rows[0])
    grand = statistics.fmean(m for r in means for m in r)
    row_m = [statistics.fmean(r) for r in means]
    col_m = [statistics.fmean(means[c][j] for c in range(c_n)) for j in range(s_n)]
    ms = sum((means[c][j] - row_m[c] - col_m[j] + grand) ** 2 for c in range(c_n) for j in range(s_n)) / df
    noise = []
    for r in rows:
        within, df_w = _within(r)
        if df_w == 0:
            return None
        noise += [within / x.n for x in r]
    component = 2 * (ms - statistics.fmean(noise))
    return _Moments(component, df, 4 * 2 * ms ** 2 / df)


@dataclass(frozen=True)
class Spread:
    """The machine's session spread at a look: of one candidate's stage mean against the target alone
    (``pair``), and of one stage's difference between two candidates (``between``)."""

    pair: SessionVariance
    between: SessionVariance


ASSUMED_SPREAD = Spread(ASSUMED, SessionVariance(2 * ASSUMED.variance, math.inf))


class MachineSpread:
    """The session spread pooled over every comparison a sweep measured, as it stood after any server
    session: ``at(order)`` uses only stages whose servers started by session ``order`` — what the sweep knew
    at that look — so a look replayed from the file decides as it did live. ``comparisons``: each
    (target, candidate)'s stages against the target alone. A sweep grows it look by look (:meth:`grown`)."""

    def __init__(self, comparisons: Mapping[tuple[str, str], Series]):
        self._comparisons: dict[tuple[str, str], Series] = dict(comparisons)
        self._grown = {key: 0 for key in self._comparisons}
        self._by_target: dict[str, list[tuple[str, str]]] = {}
        for key in self._comparisons:
            self._by_target.setdefault(key[0], []).append(key)
        self._pairs, self._betweens = _Pool(), _Pool()
        self._orders: list[int] = []
        self._values: list[Spread] = []
        keys = list(self._comparisons)
        self._take(sorted((s.order, i, j) for i, key in enumerate(keys) for j, s in enumerate(self._comparisons[key])),
                   keys)

    def _take(self, events: Iterable[tuple[int, int, int]], keys: Sequence[tuple[str, str]]) -> None:
        """Each stage in session order: its comparison's moments, its target's table, the pool after it."""
        comparisons, grown, by_target = self._comparisons, self._grown, self._by_target
        for order, i, j in events:
            key = keys[i]
            grown[key] = j + 1
            self._pairs.set(key, _moments(comparisons[key][: j + 1]))
            table = [comparisons[k][: grown[k]] for k in by_target[key[0]] if grown[k]]
            self._betweens.set(key[0], _between_moments(table))
            pair, between = self._pairs.pooled(), self._betweens.pooled()
            value = Spread(pair, between if between is not ASSUMED else
                           SessionVariance(2 * pair.variance, pair.df))
            if self._orders and self._orders[-1] == order:
                self._values[-1] = value
            else:
                self._orders.append(order)
                self._values.append(value)

    def grown(self, comparisons: Mapping[tuple[str, str], Series]) -> MachineSpread:
        """The spread over ``comparisons``, which a sweep grew from this one's by stages measured after it (the
        sweep's next look): only the new stages are taken, in the order a spread built at once would take them,
        so the numbers are the same; this one grows in place (what :meth:`at` said of the sessions it knew, it
        still says). Anything else (a stage changed or measured earlier, a comparison gone or placed before its
        target's others): a new spread, built at once."""
        old, last = self._comparisons, (self._orders[-1] if self._orders else None)
        keys = list(comparisons)
        changed = [i for i, key in enumerate(keys) if comparisons[key] is not old.get(key)]
        added = [keys[i] for i in changed if keys[i] not in old]
        if len(keys) - len(added) != len(old) or [k for k in keys if k in old] != list(old) or \
                any(comparisons[keys[i]][: len(old[keys[i]])] != old[keys[i]] for i in changed if keys[i] in old) or \
                any(key[0] == k[0] for key in added for k in keys[keys.index(key) + 1:] if k in old):
            return MachineSpread(comparisons)
        events = sorted((s.order, i, j) for i in changed for j, s in enumerate(comparisons[keys[i]])
                        if j >= len(old.get(keys[i], ())))
        if events and last is not None and events[0][0] <= last:
            return MachineSpread(comparisons)
        self._comparisons = dict(comparisons)
        for key in added:
            self._grown[key] = 0
            self._by_target.setdefault(key[0], []).append(key)
        self._take(events, keys)
        return self

    def at(self, order: int | None = None) -> Spread:
        """The pooled spread from the stages measured by session ``order`` (None: all); the assumed one while
        no comparison has two stages."""
        if not self._orders:
            return ASSUMED_SPREAD
        index = len(self._orders) - 1 if order is None else bisect.bisect_right(self._orders, order) - 1
        return self._values[index] if index >= 0 else ASSUMED_SPREAD


class _Pool:
    """Moment estimates by key, pooled as :func:`pool` pools them, with exact running sums: replacing one part
    costs that part, not every part, and the result is the same as pooling them all afresh."""

    def __init__(self) -> None:
        self.parts: dict = {}
        self._df = 0
        self._weighted, self._spread = Fraction(0), Fraction(0)
        self._odd = 0          # parts whose numbers are not finite: pooled afresh (math.fsum) while any is in

    def set(self, key, moments: _Moments | None) -> None:
        old = self.parts.pop(key, None)
        if old is not None:
            self._add(old, -1)
        if moments is not None:
            self.parts[key] = moments
            self._add(moments, 1)

    def _add(self, m: _Moments, sign: int) -> None:
        self._df += sign * m.df
        terms = (m.component * m.df, m.variance * m.df ** 2)
        if not all(math.isfinite(t) for t in terms):
            self._odd += sign
            return
        self._weighted += sign * Fraction(terms[0])
        self._spread += sign * Fraction(terms[1])

    def pooled(self) -> SessionVariance:
        if self._odd:
            return pool(self.parts.values())
        return _pooled(self._df, float(self._weighted), float(self._spread))


def pool(parts: Iterable[_Moments]) -> SessionVariance:
    """Moment estimates pooled by their degrees of freedom, truncated at 0; Satterthwaite's df for the pool
    (never more than the stages' count). Fewer than two stages' worth: the assumed spread. The sums are exact
    (``math.fsum``), so they do not depend on the order of the parts."""
    items = list(parts)
    return _pooled(sum(m.df for m in items), math.fsum(m.component * m.df for m in items),
                   math.fsum(m.variance * m.df ** 2 for m in items))


def _pooled(total_df: int, weighted: float, spread: float) -> SessionVariance:
    if total_df < 2:
        return ASSUMED
    value = weighted / total_df
    variance = spread / total_df ** 2
    if value <= 0:
        return SessionVariance(0.0, float(total_df))
    df = 2 * value ** 2 / variance if variance > 0 else math.inf
    return SessionVariance(value, max(1.0, min(float(total_df), df)))


def quantile(error: float, df: float) -> float:
    """The one-sided t quantile for ``error`` (the normal one for a known spread). Satterthwaite's degrees of
    freedom are continuous: they are rounded (to 0.1 below 30, to a whole number above) so that the looks of a
    sweep share their quantiles — it moves a quantile by less than 0.1%."""
    return t_quantile(1.0 - error, _rounded_df(df))


def _rounded_df(df: float) -> float:
    return 1e6 if df >= 1e4 else float(round(df)) if df >= 30 else max(1.0, round(df, 1)) if df >= 1 else df
