"""How the 5% error is spent over a target's candidates and looks — jointly, as the design allows (:mod:`boundaries`).

Two families of bounds, each holding together with probability ≥ 1 − α over every candidate and every look,
whatever look the stages stop at and for whatever reason (repeated confidence intervals):

* **Against the target alone** (both sides, every candidate). The candidates of a stage share its baseline
  server and its prompts, so their errors are positively correlated: they are held together by Dunnett's rule
  at the correlation the stages measured (rounded down: :func:`machine_spread.conservative`; 0 is Šidák's), and
  each candidate's bounds over the looks by a group-sequential boundary that spends its level as t² over the
  planned looks, then a reserve (a fifth) beyond them that never runs out (:func:`boundaries.spent`). These make
  guarantee (1) (a recommendation gains more than the floor: the pick's lower bound), (2) (the quoted interval,
  both sides at the last look, covers the pick's true gain), "nothing gains" and the equivalence claims.
* **Between candidates** (one side of each ordered pair). Guarantee (3) — the pick is within the margin of the
  true best — fails only if one of the C − 1 comparisons of the true best with another candidate is wrong on its
  side (the pick shown within the margin of it, or it shown slower than a leader), or the true best's own bound
  against the target alone is (it left below the floor). So those C − 1 one-sided comparisons share α less that
  one bound's level, by Šidák's rule (their correlation is never negative), over the looks likewise.

So, whatever the stopping time:

* every bound against the target alone of every candidate at every look holds together with probability ≥ 1 − α
  — the quoted interval covers the pick's true gain, selection and stopping included;
* a candidate that gains no more than the floor is recommended with probability ≤ α/2 (its lower bounds);
* the pick is more than the margin slower than the true best with probability ≤ α.
"""

from __future__ import annotations

from dataclasses import dataclass

from .boundaries import RESERVE, boundary, dunnett_level, spent, z_tail

ALPHA = 0.05


@dataclass(frozen=True)
class Spending:
    horizon: int                 # planned stages (looks)
    candidates: int              # C, fixed when the sweep is planned
    alpha: float = ALPHA

    def __post_init__(self) -> None:
        if self.horizon < 1 or self.candidates < 1:
            raise ValueError("a spending plan needs at least one look and one candidate")

    def level(self, correlation: float = 0.0) -> float:
        """Each candidate's two-sided level against the target alone, over all its looks."""
        return dunnett_level(self.alpha, self.candidates, correlation, True)

    def contrast_level(self, correlation: float = 0.0) -> float:
        """Each comparison of two candidates, one-sided, over all its looks."""
        rest = self.alpha - self.level(correlation) / 2
        return dunnett_level(rest, self.candidates - 1, 0.0, False)

    def error(self, look: int, correlation: float = 0.0) -> float:
        """The error of each one-sided bound against the target alone at ``look`` (its boundary's tail)."""
        return z_tail(boundary(self.level(correlation), self.horizon, look))

    def contrast_error(self, look: int, correlation: float = 0.0) -> float:
        """The error of each one-sided bound between two candidates at ``look``."""
        return z_tail(boundary(self.contrast_level(correlation), self.horizon, look, two_sided=False))

    def spent(self, look: int) -> float:
        """α spent by the bounds against the target alone up to and including ``look``."""
        return self.alpha * spent(look / self.horizon)

    def describe(self, look: int, correlation: float = 0.0) -> str:
        """'each bound one-sided at 0.0012 at look 6 (95% over 6 candidates — correlation 0.5 — and every look,
        the first 6 planned, a fifth of the error kept for more)'."""
        shared = f" — correlation {correlation:.1f} —" if correlation > 0 else ""
        return (f"each bound one-sided at {self.error(look, correlation):.2g} at look {look} (95% over "
                f"{self.candidates} candidate(s){shared} and every look, the first {self.horizon} planned, "
                f"{RESERVE:.0%} of the error kept for more)")
