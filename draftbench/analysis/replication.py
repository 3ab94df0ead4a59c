"""Intervals from the unit that replicates the claim: prompts, and server sessions.

A speed-up is claimed about *prompts like these* on *this machine*. Runs of one prompt are not
independent evidence about other prompts, and every request of one server session shares that
session's speed (memory placement, clocks, what else ran): neither averages out by repeating
requests. So a comparison's log ratios are grouped into :class:`Unit` s (one prompt, one
session) and its variance is

    V = s²(prompt means) / P  +  σ²_session · Σ_s w_s²

* ``s²(prompt means) / P``: the spread of the P prompts' own means (each the mean of its runs):
  prompts are the replication unit (df = P − 1). With one prompt the question becomes "this
  prompt" and the runs are the unit.
* ``σ²_session · Σ w_s²``: the part of the session-to-session spread that the design leaves in
  the mean (``w_s``: the share of session s in it; 1/S when every session measured every prompt).
  Two sessions give one degree of freedom, so σ²_session is pooled over the comparisons of a
  target (:func:`pool_sessions`): it is a property of the machine, not of a candidate.

Where sessions are crossed with prompts (every repetition on a new server, each measuring every
prompt) V is the two-way random-effects variance of the mean, (MS_prompt + MS_session −
MS_residual) / (P·S); where they split the prompts (one run per prompt, two halves) the session
spread also sits inside s²(prompt means), which only widens the interval. Degrees of freedom:
Welch–Satterthwaite over the two terms. Pure functions on numbers; no SciPy.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .moments import variance
from .student_t import t_quantile

PROMPTS_LIKE_THESE = "prompts like these"
THESE_PROMPTS = "these prompts"


@dataclass(frozen=True)
class Unit:
    """One measured comparison: a log ratio for one prompt (and repetition) in one session."""

    prompt: str
    value: float
    session: str | None = None        # the candidate's server session (None: not recorded, one session)
    category: str = ""


@dataclass(frozen=True)
class SessionVariance:
    """σ²_session (of log ratios) and its degrees of freedom; ``df == 0``: nothing to estimate it from.
    ``uncertainty``: the variance of the estimate itself where it is known directly (a component estimated by
    difference, kept at 0 when the difference is negative, still carries its uncertainty; None: 2·σ⁴ / df)."""

    variance: float
    df: float
    uncertainty: float | None = None


NO_SESSIONS = SessionVariance(0.0, 0.0)


@dataclass(frozen=True)
class Estimate:
    """The mean of log ratios, its standard error and degrees of freedom, and what it is about."""

    mean: float
    se: float
    df: float
    prompts: int
    sessions: int
    question: str

    def bounds(self, confidence: float = 0.95) -> tuple[float, float]:
        """Two-sided interval (log scale) at ``confidence``."""
        return self.one_sided(1 - (1 - confidence) / 2)

    def one_sided(self, level: float) -> tuple[float, float]:
        """(lower, upper) bounds, each wrong with probability 1 − ``level``."""
        if self.se == 0.0:
            return self.mean, self.mean
        df = min(self.df, 1e6)      # a spread treated as known (df = inf): the normal quantile
        half = t_quantile(level, df) * self.se if df >= 1 else math.inf
        return self.mean - half, self.mean + half


def _var(values: Sequence[float]) -> float:
    return variance(values)


def _by(units: Iterable[Unit], key) -> dict:
    out: dict = {}
    for u in units:
        out.setdefault(key(u), []).append(u)
    return out


def session_component(units: Sequence[Unit]) -> SessionVariance:
    """σ²_session estimated from one comparison (method of moments, truncated at 0), or nothing
    when it has fewer than two sessions. Crossed (prompts measured in several sessions): two-way
    ANOVA on the prompts measured in every session; nested (each prompt in one session): one-way
    ANOVA of the prompt means between sessions."""
    sessions = sorted({u.session for u in units if u.session is not None})
    if len(sessions) < 2:
        return NO_SESSIONS
    cells = {(p, s): statistics.fmean(u.value for u in us) for (p, s), us in _by(units, lambda u: (u.prompt, u.session)).items()
             if s is not None}
    prompts = sorted({p for p, _ in cells})
    complete = [p for p in prompts if all((p, s) in cells for s in sessions)]
    s_n = len(sessions)
    if len(complete) >= 2:
        p_n = len(complete)
        grand = statistics.fmean(cells[(p, s)] for p in complete for s in sessions)
        row = {p: statistics.fmean(cells[(p, s)] for s in sessions) for p in complete}
        col = {s: statistics.fmean(cells[(p, s)] for p in complete) for s in sessions}
        ms_session = p_n * sum((col[s] - grand) ** 2 for s in sessions) / (s_n - 1)
        ms_error = sum((cells[(p, s)] - row[p] - col[s] + grand) ** 2 for p in complete for s in sessions) / \
            ((p_n - 1) * (s_n - 1))
        return SessionVariance(max(0.0, (ms_session - ms_error) / p_n), s_n - 1)
    # nested: each prompt's mean belongs to the session(s) it was measured in; use single-session prompts
    groups: dict[str, list[float]] = {}
    for p in prompts:
        own = [s for s in sessions if (p, s) in cells]
        if len(own) == 1:
            groups.setdefault(own[0], []).append(cells[(p, own[0])])
    groups = {s: g for s, g in groups.items() if g}
    if len(groups) < 2:
        return NO_SESSIONS
    n = sum(len(g) for g in groups.values())
    k = len(groups)
    grand = statistics.fmean(v for g in groups.values() for v in g)
    ms_between = sum(len(g) * (statistics.fmean(g) - grand) ** 2 for g in groups.values()) / (k - 1)
    within_df = n - k
    ms_within = (sum((v - statistics.fmean(g)) ** 2 for g in groups.values() for v in g) / within_df
                 if within_df > 0 else 0.0)
    n0 = (n - sum(len(g) ** 2 for g in groups.values()) / n) / (k - 1)
    return SessionVariance(max(0.0, (ms_between - ms_within) / n0) if n0 > 0 else 0.0, k - 1)


def pool_sessions(components: Iterable[SessionVariance]) -> SessionVariance:
    """The machine's σ²_session pooled over several comparisons (weighted by degrees of freedom)."""
    parts = [c for c in components if c.df > 0]
    df = sum(c.df for c in parts)
    if not df:
        return NO_SESSIONS
    return SessionVariance(sum(c.variance * c.df for c in parts) / df, df)


def estimate(units: Sequence[Unit], sessions: SessionVariance | None = None) -> Estimate | None:
    """The mean log ratio over prompts and its uncertainty for "prompts like these" (or, with one
    prompt, for "this prompt"). ``sessions``: σ²_session pooled over the target's comparisons
    (default: from these units alone). None without two values to spread."""
    if len(units) < 2:
        return None
    by_prompt = _by(units, lambda u: u.prompt)
    means = {p: statistics.fmean(u.value for u in us) for p, us in by_prompt.items()}
    p_n = len(means)
    mean = statistics.fmean(means.values())
    session_ids = sorted({u.session for u in units if u.session is not None})
    if p_n >= 2:
        term, term_df, question = _var(list(means.values())) / p_n, float(p_n - 1), PROMPTS_LIKE_THESE
    else:
        values = [u.value for u in units]
        term, term_df, question = _var(values) / len(values), float(len(values) - 1), THESE_PROMPTS
    component = sessions if sessions is not None else session_component(units)
    weights = _session_weights(by_prompt)
    session_term = component.variance * sum(w * w for w in weights.values())
    variance = term + session_term
    df = satterthwaite([(term, term_df), (session_term, component.df)])
    return Estimate(mean, math.sqrt(variance), df, p_n, len(session_ids), question)


def _session_weights(by_prompt: dict[str, list[Unit]]) -> dict[str | None, float]:
    """Share of each session in the mean over prompts (each prompt weighs 1/P, split over its units)."""
    weights: dict[str | None, float] = {}
    p_n = len(by_prompt)
    for us in by_prompt.values():
        for u in us:
            weights[u.session] = weights.get(u.session, 0.0) + 1.0 / (p_n * len(us))
    return weights


def satterthwaite(terms: Sequence[tuple[float, float]]) -> float:
    """Welch–Satterthwaite degrees of freedom of a sum of variance terms (variance, its df)."""
    total = sum(v for v, _ in terms)
    if total <= 0:
        return max((d for _, d in terms), default=0.0)
    if any(v > 0 and d <= 0 for v, d in terms):
        return 0.0              # a variance term with no degrees of freedom: no finite interval
    denominator = sum(v * v / d for v, d in terms if v > 0 and d > 0)
    return total * total / denominator if denominator else math.inf     # every term known exactly
