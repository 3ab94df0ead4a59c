"""Critical values that hold over every look and every candidate together — from the design, not a union bound.

Two things the design knows, which a union bound (Bonferroni over looks and over candidates) throws away:

* **Looks are nested.** The estimate at look k is the one at look k − 1 plus one more stage, so successive
  z-statistics are correlated (√(t_j / t_k), t the information: stages measured over stages planned). The
  boundary at look k is the c_k for which, under the truth, P(no crossing before k, a crossing at k) is exactly
  the share of the error spent there (Lan & DeMets 1983), computed by the recursion of Armitage, McPherson and
  Rowe (1969) on a grid (Jennison & Turnbull 2000, ch. 19). Bounds at these values are *repeated confidence
  intervals* (Jennison & Turnbull 1989): they hold together at every look, so whatever look a sweep stops at,
  for whatever reason, its bounds there keep their promise. The spending never ends: a look beyond the plan
  (``--more``) spends from a reserve that shrinks slowly (:func:`spent`), and because the looks are nested the
  boundary there grows only slowly too — continuing is never weaker than stopping at the last planned look.
* **The candidates share a baseline.** Every candidate of a stage is compared with the same baseline server on
  the same prompts, so their errors against the target alone are positively correlated (ρ): the largest of C
  such |z| is smaller than the largest of C independent ones (Dunnett 1955). :func:`dunnett_level` is the
  per-candidate level at which C equicorrelated comparisons hold together at α; with ρ = 0 it is Šidák's,
  which holds for any correlation (the Gaussian correlation inequality; for one side, Slepian's).

Pure functions on numbers; no SciPy. Every value is cached: a sweep's looks share them.
"""

from __future__ import annotations

import math
from functools import lru_cache

RESERVE = 0.20          # the share of the error kept for looks beyond the plan (--more)
SHAPE = 2.0             # within the plan: cumulative share (t)^SHAPE — later looks, with more data, get more
BEYOND = 2.0            # beyond it: the reserve spent as 1 − t^−BEYOND (half of it by t = √2, …; never all)
_GRID_STEP = 0.25       # grid spacing, in standard deviations of one stage's increment
_MAX_GRID = 241
_REACH = 12.0         # in sd: a normal's tail beyond it (1e-33) is below what a double adds to a sum of order 1e-3


def spent(t: float, reserve: float = RESERVE) -> float:
    """The share of the error spent by information ``t`` (stages measured / stages planned): (1 − reserve)·t²
    up to the plan, then the reserve at a rate that slows but never stops (its looks never vanish)."""
    if t <= 0:
        return 0.0
    if t <= 1:
        return (1.0 - reserve) * t ** SHAPE
    return (1.0 - reserve) + reserve * (1.0 - t ** -BEYOND)


def z_tail(x: float) -> float:
    """P(Z > x) for a standard normal."""
    return 0.5 * math.erfc(x / math.sqrt(2.0))


def z_quantile(p: float) -> float:
    """The x with P(Z > x) = p (bisection on erfc: exact to 1e-12, no table)."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if z_tail(mid) > p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2


class _Recursion:
    """One boundary sequence: its level (two-sided, or one-sided upper), the plan's looks, and the density of the
    score on the continuation region after the last look computed (so later looks extend it)."""

    def __init__(self, level: float, horizon: int, two_sided: bool):
        self.level, self.horizon, self.two_sided = level, horizon, two_sided
        self.z: list[float] = []
        self._grid: tuple[list[float], list[float]] | None = None     # points, weight × density
        self._t = 0.0

    def at(self, look: int) -> float:
        while len(self.z) < look:
            self._extend()
        return self.z[look - 1]

    def _crossing(self, b: float, sd: float) -> tuple[float, float]:
        """P(no crossing before, a crossing now) at boundary ``b`` (score scale), and its slope in ``b``."""
        if self._grid is None:
            sides = 2.0 if self.two_sided else 1.0
            return z_tail(b / sd) * sides, -sides * _phi(b / sd) / sd
        xs, ws = self._grid
        # grid points more than _REACH sd below b add nothing a double can hold (their tails are below 1e-31)
        near = [(x, w) for x, w in zip(xs, ws) if b - x < _REACH * sd]
        p = sum(w * z_tail((b - x) / sd) for x, w in near)
        slope = sum(w * _phi((b - x) / sd) for x, w in near)
        if self.two_sided:
            far = [(x, w) for x, w in zip(xs, ws) if b + x < _REACH * sd]
            p += sum(w * z_tail((b + x) / sd) for x, w in far)
            slope += sum(w * _phi((b + x) / sd) for x, w in far)
        return p, -slope / sd

    def _extend(self) -> None:
        k = len(self.z) + 1
        t = k / self.horizon
        sd = math.sqrt(t - self._t)
        target = self.level * (spent(t) - spent(self._t))
        # the crossing probability falls as the boundary rises: Newton's steps inside a bracket that keeps
        # [lo, hi] around the root (a bisection step where Newton's would leave it), to the last bits a double holds
        lo, hi = 0.0, 60.0 * math.sqrt(t)
        b = (lo + hi) / 2 if not self.z else min(self.z[-1] * math.sqrt(t), hi / 2)
        for _ in range(200):
            p, slope = self._crossing(b, sd)
            if p > target:
                lo = b
            else:
                hi = b
            guess = b - (p - target) / slope if slope < 0 else math.nan    # (far out, the slope underflows)
            if lo <= guess <= hi and abs(guess - b) <= 1e-15 * b:
                b = guess
                break
            b = guess if lo < guess < hi else (lo + hi) / 2
            if hi - lo <= 1e-15 * hi:
                b = hi
                break
        self.z.append(b / math.sqrt(t))
        self._continue(b, sd, t)

    def _continue(self, b: float, sd: float, t: float) -> None:
        """The score's density at this look on (−b, b) (one-sided: down to 8 sd below 0), on a Simpson grid."""
        low = -b if self.two_sided else -b - 8.0 * math.sqrt(t)
        points = min(_MAX_GRID, max(41, int((b - low) / (_GRID_STEP * sd)) | 1))
        h = (b - low) / (points - 1)
        ys = [low + h * i for i in range(points)]
        simpson = [h / 3 * (1 if i in (0, points - 1) else 4 if i % 2 else 2) for i in range(points)]
        norm = 1.0 / (sd * math.sqrt(2 * math.pi))
        if self._grid is None:
            dens = [norm * math.exp(-0.5 * (y / sd) ** 2) for y in ys]
        else:
            xs, ws = self._grid
            # the earlier grid is even: each point reaches only those within _REACH sd of it (the rest add < 1e-31)
            first, step, reach = xs[0], xs[1] - xs[0], _REACH * sd
            dens = []
            for y in ys:
                i, j = max(0, math.ceil((y - reach - first) / step)), min(len(xs), math.floor((y + reach - first) / step) + 1)
                dens.append(norm * sum(w * math.exp(-0.5 * ((y - x) / sd) ** 2) for x, w in zip(xs[i:j], ws[i:j])))
        self._grid = (ys, [d * s for d, s in zip(dens, simpson)])
        self._t = t


def _phi(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


@lru_cache(maxsize=256)
def _recursion(level: float, horizon: int, two_sided: bool) -> _Recursion:
    return _Recursion(level, horizon, two_sided)


def boundary(level: float, horizon: int, look: int, *, two_sided: bool = True) -> float:
    """The z-boundary at ``look`` of a sequence whose bounds hold together at ``level`` over every look (both sides
    together, or the upper one alone), spending as :func:`spent` says over ``horizon`` planned looks."""
    if look < 1 or horizon < 1:
        raise ValueError("a boundary needs a look and a plan of at least one")
    return _recursion(_rounded(level), horizon, two_sided).at(look)


def _rounded(level: float) -> float:
    """Four significant digits: sweeps with nearly the same level share one cached sequence."""
    return float(f"{level:.4g}")


def _all_within(c: float, m: int, rho: float, two_sided: bool) -> float:
    """P(every one of m standard normals with pairwise correlation ρ ≥ 0 lies below c (in |·| when two-sided)):
    one integral over their common part (Simpson, 161 points on ±8)."""
    s, q = math.sqrt(rho), math.sqrt(1.0 - rho)
    n, total = 161, 0.0
    h = 16.0 / (n - 1)
    for i in range(n):
        z = -8.0 + i * h
        inside = 1.0 - z_tail((c + s * z) / q) - (z_tail((c - s * z) / q) if two_sided else 0.0)
        weight = h / 3 * (1 if i in (0, n - 1) else 4 if i % 2 else 2)
        total += weight * math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi) * max(0.0, inside) ** m
    return total


@lru_cache(maxsize=512)
def dunnett_level(alpha: float, m: int, rho: float = 0.0, two_sided: bool = True) -> float:
    """The level each of ``m`` comparisons with pairwise correlation ``rho`` is held at so that all hold together
    at ``alpha`` (two-sided: |z|; else the upper side). ``rho`` = 0: Šidák's 1 − (1 − α)^(1/m)."""
    if m <= 1:
        return alpha
    rho = min(max(rho, 0.0), 0.95)
    if rho == 0.0:
        return 1.0 - (1.0 - alpha) ** (1.0 / m)
    lo, hi = 0.0, 12.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if 1.0 - _all_within(mid, m, rho, two_sided) > alpha:
            lo = mid
        else:
            hi = mid
    return z_tail(hi) * (2.0 if two_sided else 1.0)
