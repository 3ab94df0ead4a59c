"""Student's t distribution at any confidence level, without SciPy.

The one Student-t of the package: ``stats`` asks for 95% intervals, the race (``racing.py``) for
intervals far wider — its error rate is split over every look at the data. The CDF comes from the
regularized incomplete beta function (continued fraction, modified Lentz), the quantile from
bisection on it; both are accurate to ~1e-10, far beyond what an interval needs.
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

_EPS = 1e-14
_TINY = 1e-300


def _beta_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (converges fast for x < (a+1)/(a+b+2))."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) for a, b > 0 and 0 ≤ x ≤ 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T ≤ t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_pdf(t: float, df: float) -> float:
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_c - (df + 1) / 2 * math.log1p(t * t / df))


def _cornish_fisher(z: float, df: float) -> float:
    """The t quantile from the normal one (Abramowitz & Stegun 26.7.5): close for df ≥ 3."""
    z2 = z * z
    g1 = (z2 + 1) * z / 4
    g2 = ((5 * z2 + 16) * z2 + 3) * z / 96
    g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384
    g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160
    return z + g1 / df + g2 / df ** 2 + g3 / df ** 3 + g4 / df ** 4


@lru_cache(maxsize=4096)     # a sweep's looks ask for the same few quantiles again and again
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (0.5 < p < 1), e.g. ``t_quantile(0.975, 5)`` ≈ 2.571: Newton's
    method from the Cornish–Fisher expansion, kept inside a bracket that bisection shrinks where Newton would
    leave it (heavy tails at few degrees of freedom)."""
    if not 0.5 < p < 1.0:
        raise ValueError(f"p must be in (0.5, 1), not {p}")
    if df < 1:
        return math.inf
    z = NormalDist().inv_cdf(p)
    if df >= 3:
        t = _cornish_fisher(z, df)
        for _ in range(8):
            step = (t_cdf(t, df) - p) / max(t_pdf(t, df), _TINY)
            t -= step
            if abs(step) < 1e-12 * max(1.0, abs(t)):
                return t
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        low, high = high, high * 2.0
        if high > 1e12:
            return math.inf
    t = min(max(z, low), high)
    for _ in range(200):
        error = t_cdf(t, df) - p
        if error < 0:
            low = t
        else:
            high = t
        step = error / max(t_pdf(t, df), _TINY)
        t = t - step if low < t - step < high else (low + high) / 2.0
        if abs(step) < 1e-12 * max(1.0, t) or high - low < 1e-12 * max(1.0, high):
            break
    return t
