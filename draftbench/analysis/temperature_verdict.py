"""The temperature axis of a target's verdict, typed: each temperature's verdict, each candidate's speed-up and
acceptance there, up to which temperature each candidate pays, how probabilistic drafting compares with greedy, and
what the output-distribution check found (built by :mod:`temperature_axis`; kept in ``TargetVerdict.temperature``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..common.numbers import temperature_text
from ..common.percent import signed_change
from ..results.speedup import Speedup
from .crossover import LevelOutcome
from .stage_verdict import StagedVerdict

heat = temperature_text          # a temperature as the verdict writes it: 0, 0.7, 1.0


@dataclass(frozen=True)
class HeatPoint:
    """One candidate at one temperature, against the target alone at that temperature."""

    candidate: str
    outcome: LevelOutcome
    speedup: Speedup | None                 # the row's own (95% for this candidate alone)
    acceptance_rate: float | None
    draft_sampling: str | None              # as its server ran it (read from the process), for a draft model
    output_distribution: dict | None = None   # the row's check at temperature > 0 (analysis.output_distribution)

    def to_dict(self) -> dict[str, Any]:
        return {"candidate": self.candidate, "outcome": self.outcome.value,
                "speedup": self.speedup.to_dict() if self.speedup else None, "acceptance_rate": self.acceptance_rate,
                "draft_sampling": self.draft_sampling, "output_distribution": self.output_distribution}


@dataclass(frozen=True)
class TemperatureVerdict:
    """The verdict at one temperature (the staged decision on that temperature's rows alone)."""

    temperature: float
    verdict: str
    recommended_draft: str | None
    speedup: Speedup | None
    baseline_tps: float | None
    candidates: tuple[HeatPoint, ...]
    stages: StagedVerdict | None = None     # measured in stages: the staged decision at this temperature (not written)

    def to_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "verdict": self.verdict, "recommended_draft": self.recommended_draft,
                "speedup": self.speedup.to_dict() if self.speedup else None, "baseline_tps": self.baseline_tps,
                "candidates": [c.to_dict() for c in self.candidates]}


@dataclass(frozen=True)
class SamplingComparison:
    """Probabilistic drafting against greedy for one draft at one temperature: the two candidates' contrast on the
    stages both measured, at the decision's last look's error (the comparison a pick is made on)."""

    temperature: float
    probabilistic: str
    greedy: str
    ratio: float                            # probabilistic / greedy
    low: float
    high: float

    @property
    def shown(self) -> bool:
        """The interval excludes 1: one of the two is faster."""
        return self.low > 1.0 or self.high < 1.0

    def text(self) -> str:
        """At one temperature, which drafts faster: "at 1.0, probabilistic beats greedy by +6% [+2%, +10%]"."""
        span = f"{signed_change(self.ratio)} [{signed_change(self.low)}, {signed_change(self.high)}]"
        at = f"at {heat(self.temperature)}"
        if self.low > 1.0:
            return f"{at}, probabilistic beats greedy by {span}"
        if self.high < 1.0:
            return (f"{at}, greedy beats probabilistic by {signed_change(1 / self.ratio)} "
                    f"[{signed_change(1 / self.high)}, {signed_change(1 / self.low)}]")
        return f"{at}, they cannot be told apart ({span} for probabilistic)"

    def to_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "probabilistic": self.probabilistic, "greedy": self.greedy,
                "ratio": round(self.ratio, 4), "low": round(self.low, 4), "high": round(self.high, 4),
                "shown": self.shown, "text": self.text()}


@dataclass(frozen=True)
class HeatReach:
    """Per candidate, the hottest temperature up to which it pays there and at every cooler one (None: not even at
    the coolest); per temperature, the candidates that pay there."""

    reach: dict[str, float | None]
    paying: dict[float, list[str]]

    def to_dict(self) -> dict[str, Any]:
        return {"reach": dict(self.reach), "paying": {heat(t): list(found) for t, found in self.paying.items()}}


@dataclass(frozen=True)
class TemperatureAxis:
    """A target measured at several temperatures: every temperature's verdict; with more than one, each candidate's
    reach, the sampling comparisons and the sentence that reads across them."""

    temperatures: tuple[float, ...]
    per_temperature: tuple[TemperatureVerdict, ...]
    reach: HeatReach | None = None
    sampling: tuple[SamplingComparison, ...] = ()
    sentence: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"temperatures": list(self.temperatures),
                               "per_temperature": [p.to_dict() for p in self.per_temperature]}
        if self.reach is not None:
            out.update(self.reach.to_dict())
        out.update(sampling=[s.to_dict() for s in self.sampling], sentence=self.sentence)
        return out


def sampling_sentence(found: tuple[SamplingComparison, ...]) -> str:
    """Every draft measured both ways, in one sentence: "Probabilistic against greedy drafting (small): at 0.7,
    probabilistic beats greedy by +10% [+4%, +16%]; at 1.0, …" (at the decision's own error, on the stages both
    measured)."""
    pairs: dict[tuple[str, str], list[SamplingComparison]] = {}
    for item in found:
        pairs.setdefault((item.probabilistic, item.greedy), []).append(item)
    return " ".join(f"Probabilistic against greedy drafting ({p} against {g}): " + "; ".join(i.text() for i in items)
                    + "." for (p, g), items in pairs.items())
