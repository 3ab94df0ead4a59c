"""How much more would settle an unresolved target: "about N more prompts × S more server pairs".

The projection keeps the stage's size and the spread measured so far: after S stages in all a
comparison's standard error is about se · √(S_now / S) and its degrees of freedom about df · S / S_now (the
session spread is learnt from the stages: kept at today's df, a sweep of four stages at df 1.7 was told it
needed "more than 60 more server pairs" for a +6.5% gain that about 20 would settle), and the bound at that
look is one-sided at the spending plan's error for it (beyond the planned looks, the reserve's). A comparison is *settled* when,
four times in five if its estimate is the truth, the bound clears what it is compared with (the floor for
a gain, the margin between two candidates). Projections beyond :data:`MAX_EXTRA` stages are not made:
"more than …" is said instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .replication import Estimate
from .spending import Spending
from .stage_evidence import quantile

MAX_EXTRA = 60
POWER_Z = 0.8416          # 80%: settled four times in five if the estimate is the truth


@dataclass(frozen=True)
class Projection:
    """Stages (server pairs per candidate) and prompts per candidate still needed; None: more than the cap."""

    stages: int | None
    prompts: int | None
    gain: float               # the ratio the projection is about (a gain to show, or a margin to resolve)
    about: str                # "a gain of +8.0%", "a 2% difference between X and Y", "no gain of 2%"

    def describe(self, stage_size: int) -> str:
        if self.stages is None:
            return (f"more than {MAX_EXTRA * stage_size} more prompts × {MAX_EXTRA} more server pairs would be needed "
                    f"to settle {self.about}")
        return (f"about {self.prompts} more prompts × {self.stages} more server pair(s) per candidate would settle "
                f"{self.about}")


def stages_to_clear(est: Estimate, distance: float, spending: Spending, stage_size: int) -> int | None:
    """Extra stages until ``distance`` (log scale, > 0: what the estimate must clear by) exceeds the bound's
    reach plus 80% power; None beyond the cap, 0 when already there."""
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


def projection(est: Estimate, against: float, spending: Spending, stage_size: int, about: str) -> Projection:
    """Stages until ``est`` is shown away from ``against`` (a ratio: 1 + floor for a gain)."""
    distance = abs(est.mean - math.log(against))
    extra = stages_to_clear(est, distance, spending, stage_size)
    if extra is not None:
        extra = max(1, extra)
    return Projection(extra, extra * stage_size if extra is not None else None, math.exp(est.mean), about)
