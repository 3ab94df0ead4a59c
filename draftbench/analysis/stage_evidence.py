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
the session spreads are the machine's, measured on the table of every candidate's stages
(:mod:`machine_spread`, with the degrees of freedom that table really has: about 2·(S − 1)). V's degrees of
freedom are Satterthwaite's over its two terms, each with the variance of its own estimate.

When a prompt set is too small for fresh prompts at every stage, every stage measures the same prompts
(on fresh servers): the question becomes "on these prompts" and prompt effects are fixed, so the
spread that counts is the residual of a two-way table (prompts × stages). Past a prompt set's fresh stages
(``--more``) prompts come back: a prompt's effect then counts with its weight in the mean (Σ_p (k_p / N)²
instead of 1 / N), so more stages narrow the session's part, never the prompts' beyond what the set allows.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from .moments import variance
from .replication import PROMPTS_LIKE_THESE, THESE_PROMPTS, Estimate, SessionVariance
from .student_t import t_quantile


@dataclass(frozen=True)
class StageSample:
    """One stage of one comparison: a log ratio per prompt (its requests' mean), in the stage's order."""

    stage: int
    prompts: tuple[str, ...]
    values: tuple[float, ...]
    order: int = 0               # the last server session it used (s<N>): what was measured before a look
    categories: tuple[str, ...] = ()     # each prompt's category, where known (the stages are stratified by it)

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


def series_from(values: Iterable[tuple[int, str, float, int] | tuple[int, str, float, int, str]]) -> Series:
    """(stage, prompt, log ratio, session order[, category]) → stage samples; a prompt measured twice in a stage
    counts once, at its mean."""
    by_stage: dict[int, dict[str, list[float]]] = {}
    order: dict[int, int] = {}
    category: dict[str, str] = {}
    for stage, prompt, value, session, *rest in values:
        by_stage.setdefault(stage, {}).setdefault(prompt, []).append(value)
        order[stage] = max(order.get(stage, 0), session)
        if rest:
            category[prompt] = rest[0]
    return tuple(StageSample(s, tuple(by_stage[s]), tuple(statistics.fmean(v) for v in by_stage[s].values()),
                             order[s], tuple(category[p] for p in by_stage[s]) if category else ())
                 for s in sorted(by_stage))


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
        cats = dict(zip(s.prompts, s.categories))
        kept = [(p, v - theirs[p]) for p, v in zip(s.prompts, s.values) if p in theirs]
        if kept:
            out.append(StageSample(s.stage, tuple(p for p, _ in kept), tuple(v for _, v in kept), s.order,
                                   tuple(cats[p] for p, _ in kept) if cats else ()))
    return tuple(out)


def crossed(series: Series) -> bool:
    """Whether some prompt was measured in two stages: then the claim is about these prompts."""
    seen: set[str] = set()
    for s in series:
        if seen & set(s.prompts):
            return True
        seen.update(s.prompts)
    return False


def fresh(series: Series) -> Series:
    """The stages none of whose prompts an earlier stage of the series measured."""
    seen: set[str] = set()
    out = []
    for s in series:
        if not seen & set(s.prompts):
            out.append(s)
        seen.update(s.prompts)
    return tuple(out)


def fixed_prompts(series: Series) -> bool:
    """Every stage measured the prompts of the first (a set too small for fresh ones): "these prompts"."""
    return crossed(series) and len(fresh(series)) < 2


def within_spread(series: Series, stratified: bool = True) -> tuple[float, int]:
    """σ²_w pooled inside the stages, and its degrees of freedom. Stages are drawn stratified by category (each
    holds the categories about as the set does), so a category's effect does not move a stage's mean: where the
    categories are known (``stratified``), the spread is the one within categories — residuals of stage +
    category — whose share a stage's mean carries."""
    df = sum(s.n - 1 for s in series)
    if df <= 0:
        return 0.0, 0
    if not stratified or not all(s.categories for s in series):
        return sum(s.within_ss() for s in series) / df, df
    centred = [(c, v - s.mean) for s in series for c, v in zip(s.categories, s.values)]
    by: dict[str, list[float]] = {}
    for c, d in centred:
        by.setdefault(c, []).append(d)
    effect = {c: statistics.fmean(ds) for c, ds in by.items()}
    df -= len(by) - 1
    if len(by) < 2 or df <= 0:
        return sum(s.within_ss() for s in series) / sum(s.n - 1 for s in series), sum(s.n - 1 for s in series)
    return sum((d - effect[c]) ** 2 for c, d in centred) / df, df


def two_way_residual(series: Series) -> tuple[float, int] | None:
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
    ``session``: the spread one stage's server sessions add to its mean (:class:`machine_spread.Spread`)."""
    values = [v for s in series for v in s.values]
    n_all = len(values)
    if n_all < 2:
        return None
    mean = statistics.fmean(values)
    fixed = fixed_prompts(series)
    within: tuple[float, int] | None = two_way_residual(series) if fixed else None
    if within is None:
        within = within_spread(series)
    share = sum((s.n / n_all) ** 2 for s in series)
    if within[1] == 0:          # one prompt per stage: the stages' spread holds both parts
        spread = variance(values)
        est_var, df = spread / n_all, float(n_all - 1)
    else:
        prompt_term = within[0] * (1.0 / n_all if fixed else _prompt_weight(series, n_all))
        session_term = session.variance * share
        est_var = prompt_term + session_term
        df = _degrees(prompt_term, within[1], session_term, share, session)
    prompts = len({p for s in series for p in s.prompts})
    question = THESE_PROMPTS if fixed or prompts < 2 else PROMPTS_LIKE_THESE
    return Estimate(mean, math.sqrt(max(0.0, est_var)), df, prompts, len(series), question)


def _prompt_weight(series: Series, n_all: int) -> float:
    """Σ_p (k_p / N)²: 1 / N when every prompt was measured once, more when stages past the set repeated some."""
    counts: dict[str, int] = {}
    for s in series:
        for p in s.prompts:
            counts[p] = counts.get(p, 0) + 1
    return sum((k / n_all) ** 2 for k in counts.values())


def _degrees(prompt_term: float, prompt_df: float, session_term: float, share: float,
             session: SessionVariance) -> float:
    """Satterthwaite's degrees of freedom of prompt_term + session_term: 2·V² over the variance of V's estimate,
    the session's from its own uncertainty where known (a spread kept at 0 still carries it)."""
    total = prompt_term + session_term
    spread = 2 * prompt_term ** 2 / prompt_df
    if session.uncertainty is not None:
        spread += share ** 2 * session.uncertainty
    elif session_term > 0:
        if session.df <= 0:
            return 0.0          # a variance term with no degrees of freedom: no finite interval
        spread += 2 * session_term ** 2 / session.df if math.isfinite(session.df) else 0.0
    if total <= 0:
        return float(prompt_df)
    return 2 * total ** 2 / spread if spread > 0 else math.inf


def predicted(series: Series, session: SessionVariance, confidence: float = 0.95) -> tuple[float, float] | None:
    """Where the next prompt like these falls, on a server pair of its own (log scale, two-sided): the
    mean's uncertainty plus one prompt's spread and one pair's session offset."""
    est = estimate_stages(series, session)
    if est is None:
        return None
    within = within_spread(series, stratified=False)        # the next prompt may be of any category
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


def quantile(error: float, df: float) -> float:
    """The one-sided t quantile for ``error`` (the normal one for a known spread). Satterthwaite's degrees of
    freedom are continuous: they are rounded (to 0.1 below 30, to a whole number above) so that the looks of a
    sweep share their quantiles — it moves a quantile by less than 0.1%."""
    return t_quantile(1.0 - error, _rounded_df(df))


def _rounded_df(df: float) -> float:
    return 1e6 if df >= 1e4 else float(round(df)) if df >= 30 else max(1.0, round(df, 1)) if df >= 1 else df
