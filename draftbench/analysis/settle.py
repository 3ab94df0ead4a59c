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

from ..common.percent import change_text
from .replication import Estimate
from .spending import Spending
from .stage_evidence import Series, Spread, contrast, estimate_stages, quantile

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


def to_settle(series: dict[str, Series], spread: Spread, best: str | None, shortlist: tuple[str, ...], *,
              floor: float, margin: float, spending: Spending, per_stage: int) -> Projection | None:
    """How much more would settle a staged target: separating the shortlist's top two (by more than ``margin``),
    or showing ``best``'s gain over ``floor`` (or that it gains less)."""
    if best is None or best not in series:
        return None
    if len(shortlist) >= 2:
        second = shortlist[1] if shortlist[0] == best else shortlist[0]
        est = estimate_stages(contrast(series[best], series[second]), spread.between)
        if est is not None:
            return projection(est, 1.0 + margin, spending, per_stage, f"whether {best} beats {second} by more than 2%")
    est = estimate_stages(series[best], spread.pair)
    if est is None:
        return None
    about = (f"a gain of {change_text(math.exp(est.mean))} for {best}" if math.exp(est.mean) > floor else
             f"that {best} gains less than the {change_text(floor)} floor")
    return projection(est, floor, spending, per_stage, about)


POWER_GAIN = 1.10


def power_line(series: Series | None, spread: Spread, *, floor: float, spending: Spending, per_stage: int
               ) -> str | None:
    """With the spread a sweep measured: after how many stages a candidate +10% faster than the target alone
    would be shown faster by the floor, four times in five (the power curve, at this machine's noise)."""
    est = estimate_stages(series, spread.pair) if series else None
    if est is None:
        return None
    hypothetical = Estimate(math.log(POWER_GAIN), est.se, est.df, est.prompts, est.sessions, est.question)
    more = projection(hypothetical, floor, spending, per_stage, "")
    total = est.sessions + (more.stages or 0) if more.stages is not None else None
    planned = spending.horizon
    if total is None:
        return (f"With the spread measured here, a candidate {change_text(POWER_GAIN)} faster than the target alone "
                f"would not be shown so within {planned + 60} stages.")
    return (f"With the spread measured here, a candidate {change_text(POWER_GAIN)} faster than the target alone "
            f"would be shown so four times in five after about {max(1, total)} stage(s) ({planned} planned).")
