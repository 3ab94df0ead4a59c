"""How the 5% error is spent over a target's candidates and looks (one look after every stage).

Every bound the stages decide with is one-sided at ``error(look)`` = α_look / (2·C): C candidates, two
sides, and α_look the share of α spent at that look. The shares over the planned looks add up to
(1 − reserve)·α (cumulative share (l / horizon)^shape: later looks, which hold more data, get more); the
reserve pays for looks beyond the horizon (``--more``): look horizon + m gets reserve·α / (m·(m + 1)), which
sums to the reserve over any number of extra looks. So, whatever the stopping time:

* every bound of every candidate at every look holds together with probability ≥ 1 − α — the quoted
  interval (both sides at the look's error) covers the pick's true gain, selection and stopping included;
* a candidate that gains no more than the floor is recommended with probability ≤ α/2 (its lower bounds);
* the pick is more than the margin slower than the true best with probability ≤ α (the bounds comparing
  the true best with the others, and the lower bounds against the baseline).
"""

from __future__ import annotations

from dataclasses import dataclass

ALPHA = 0.05
RESERVE = 0.10
SHAPE = 2.0


@dataclass(frozen=True)
class Spending:
    horizon: int                 # planned stages (looks)
    candidates: int              # C, fixed when the sweep is planned
    alpha: float = ALPHA
    reserve: float = RESERVE
    shape: float = SHAPE

    def __post_init__(self) -> None:
        if self.horizon < 1 or self.candidates < 1:
            raise ValueError("a spending plan needs at least one look and one candidate")

    def alpha_at(self, look: int) -> float:
        """The share of α spent at ``look`` (1-based)."""
        if look < 1:
            return 0.0
        if look <= self.horizon:
            planned = self.alpha * (1.0 - self.reserve)
            return planned * ((look / self.horizon) ** self.shape - ((look - 1) / self.horizon) ** self.shape)
        extra = look - self.horizon
        return self.alpha * self.reserve / (extra * (extra + 1))

    def error(self, look: int) -> float:
        """The error of each one-sided bound at ``look``."""
        return self.alpha_at(look) / (2 * self.candidates)

    def spent(self, look: int) -> float:
        """α spent up to and including ``look``."""
        return sum(self.alpha_at(k) for k in range(1, look + 1))

    def describe(self, look: int) -> str:
        """'each bound one-sided at 0.00021 (5% spent over 6 candidates × both sides × 6 planned looks)'."""
        return (f"each bound one-sided at {self.error(look):.2g} (5% shared over {self.candidates} candidate(s), both "
                f"sides and {self.horizon} planned look(s), {self.reserve:.0%} kept for more)")
