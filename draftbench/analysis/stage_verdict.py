"""A staged target's verdict as a typed value: what was decided, the figure quoted and what it is for,
who left and why, who was never probed, and — when unresolved — what more would settle it.

Every figure keeps its promise:

* the interval quoted for a candidate is its bound at the last look, both sides at that look's error:
  95% over every candidate and look *together*, so it holds for the pick whatever was selected and
  whenever the stages stopped (:mod:`spending`); it is about the average over prompts like these (or
  these prompts, when every stage measured the same ones);
* its upper end never passes what the server's counters allow (a verify step costs at least one target
  step): a measurement above the bound is quoted at the bound, and said to be above it;
* the next prompt's speed-up is a separate 95% prediction interval (one prompt's spread and one server
  pair's offset on top of the mean's uncertainty);
* "significantly slower" when the whole interval is below 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum

from ..common.percent import percent
from ..results.file import Row
from ..results.speedup import UNBOUNDED_WHY, change_text, interval_text, is_unbounded
from .moments import ratio_of
from .replication import THESE_PROMPTS, Estimate
from .settle import Projection, projection
from .stage_evidence import contrast, estimate, predicted
from .stage_records import TargetStages
from .stage_rule import Bound, Elimination, Outcome


class Verdict(str, Enum):
    RECOMMEND = "recommend"
    NOTHING_GAINS = "nothing gains"
    SHORTLIST = "shortlist"              # it pays; which of the shortlist is fastest is not settled
    UNRESOLVED = "unresolved"


def pct(ratio: float) -> str:
    return change_text(ratio)      # 'unbounded' where an interval's end bounds nothing (results/speedup.py)


@dataclass(frozen=True)
class Quote:
    """A candidate's speed-up as the verdict says it."""

    ratio: float                         # the estimate, or the counters' bound where the estimate exceeds it
    low: float
    high: float
    measured: float                      # the estimate as measured
    bound: float | None                  # the most the counters allow
    candidates: int
    looks: int
    question: str
    next_prompt: tuple[float, float] | None = None

    @property
    def capped(self) -> bool:
        return self.bound is not None and self.measured > self.bound

    @property
    def slower(self) -> bool:
        return self.high < 1.0

    def interval(self) -> str:
        return f"{pct(self.ratio)} {interval_text(self.low, self.high)}"

    def what(self) -> str:
        """What the interval is: '95% over 6 candidates and 3 looks together, for the average on prompts like
        these'."""
        looks = f"{self.looks} look{'s' if self.looks != 1 else ''}"
        together = (f" over {self.candidates} candidates and {looks} together" if self.candidates > 1
                    else f" over {looks} together" if self.looks > 1 else "")
        return f"95%{together}, for the average on {self.question}"

    def text(self) -> str:
        """'+12.3% [+4.1%, +21.0%] (95% over 6 candidates and 3 looks together, for the average on prompts like
        these; your next prompt: −2.0% to +27.5%, 95%)'."""
        text = f"{self.interval()} ({self.what()}"
        if self.next_prompt is not None:
            low, high = self.next_prompt
            text += (f"; your next prompt: {pct(low)} or more, with no upper bound at 95%" if is_unbounded(high)
                     else f"; your next prompt: {pct(low)} to {pct(high)}, 95%")
        text += ")"
        if self.capped and self.bound is not None:
            text += (f" — measured {pct(self.measured)}, above the {pct(self.bound)} its counters allow, so quoted at "
                     "that bound")
        elif self.bound is not None:
            text += f"; its counters allow at most {pct(self.bound)}"
        if self.slower:
            text += " (significantly slower)"
        return text


@dataclass(frozen=True)
class StagedVerdict:
    target: str
    verdict: Verdict
    pick: str | None                      # recommended
    best: str | None                      # the pick, else the leader among those still in
    quote: Quote | None                   # of ``best``
    shortlist: tuple[str, ...] = ()
    equivalent: tuple[str, ...] = ()      # shown equal to the target alone within ± the floor
    eliminated: dict[str, str] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)
    not_probed: tuple[str, ...] = ()
    settle: Projection | None = None
    stage_size: int = 0
    stages: int = 0
    horizon: int = 0
    candidates: int = 1
    power: str | None = None              # what this sweep's spread would let the stages show (the report's line)

    def to_dict(self) -> dict:
        """As the summary entry keeps it (``stages``): what the report and the exports show."""
        q = self.quote
        return {"decision": self.verdict.value, "pick": self.pick, "best": self.best,
                "quote": None if q is None else {"ratio": round(q.ratio, 4), "low": round(q.low, 4),
                                                 "high": _end(q.high), "measured": round(q.measured, 4),
                                                 "bound": q.bound, "interval": q.what(),
                                                 "next_prompt": [_end(x) for x in q.next_prompt]
                                                 if q.next_prompt else None,
                                                 **({"unbounded": UNBOUNDED_WHY} if is_unbounded(q.high) else {})},
                "shortlist": list(self.shortlist), "equivalent": list(self.equivalent),
                "eliminated": dict(self.eliminated), "left_out": dict(self.left_out),
                "not_probed": list(self.not_probed),
                "settle": None if self.settle is None else {"stages": self.settle.stages, "prompts": self.settle.prompts,
                                                            "about": self.settle.about,
                                                            "text": self.settle.describe(self.stage_size or 1)},
                "stages": self.stages, "horizon": self.horizon, "per_stage": self.stage_size,
                "candidates": self.candidates, "power": self.power}

    def sentence(self, baseline_tps: float | None, row: Row | None) -> str:
        head = self.target + ": "
        quote = self.quote.text() if self.quote else "n/a"
        if self.verdict is Verdict.RECOMMEND and row is not None:
            speeds = (f" ({baseline_tps:.1f} → {row.mean_tps:.1f} tok/s, {percent(row.acceptance_rate)} of drafted "
                      "tokens accepted)" if baseline_tps and row.mean_tps else "")
            among = f"chosen among {self.candidates} candidates " if self.candidates > 1 else ""
            stages = f"{self.stages} stage{'s' if self.stages != 1 else ''}"
            text = (f"{head}use {self.pick} — expect {quote}{speeds}; {among}after {stages} of fresh server pairs"
                    + (", no other shown more than 2% faster (95%)." if self.candidates > 1 else "."))
        elif self.verdict is Verdict.NOTHING_GAINS:
            text = (f"{head}speculative decoding not recommended — every candidate was shown to gain less than the "
                    f"noise floor (best: {self.best}, {quote}).")
            if self.equivalent:
                text += (f" Equal to the target alone within ± the floor (two one-sided tests): "
                         f"{', '.join(self.equivalent)}.")
        elif self.verdict is Verdict.SHORTLIST:
            text = (f"{head}speculative decoding pays — the fastest is one of {', '.join(self.shortlist)} (each shown "
                    f"faster than the target alone by more than the floor); which of them is fastest the stages could "
                    f"not tell. Leader: {self.best}, {quote}.")
        else:
            text = f"{head}unresolved — best so far {self.best or 'none'}" + (f", {quote}" if self.quote else "") + "."
        if self.not_probed:
            text += (f" Not probed (the budget ran out first): {', '.join(self.not_probed)} — run the same command with "
                     "a larger budget_s, or with --more, to continue.")
        others = {n: why for n, why in self.left_out.items() if why != "not probed"}
        if others:
            text += " Not in the decision: " + "; ".join(f"{n} ({why})" for n, why in others.items()) + "."
        if self.settle is not None and self.verdict in (Verdict.UNRESOLVED, Verdict.SHORTLIST):
            more = self.settle.describe(self.stage_size or 1)
            text += f" {more[0].upper()}{more[1:]}."
        return text


def _end(ratio: float) -> float | None:
    """An interval's end as the summary keeps it: null where it bounds nothing (strict JSON has no infinity)."""
    return None if is_unbounded(ratio) else round(ratio, 4)


def _quote(stages: TargetStages, name: str, bound: Bound, looks: int) -> Quote:
    row = stages.rows.get(name)
    cap = (row.counter_bound or {}).get("ratio") if row is not None else None
    cap = float(cap) if isinstance(cap, (int, float)) else None
    ratio, high = bound.ratio, bound.high
    if cap is not None:
        ratio, high = min(ratio, cap), min(high, cap)
    low = min(bound.low, high)
    series = stages.series.get(name)
    next_prompt = predicted(series, stages.spread.pair) if series else None
    return Quote(ratio, low, high, bound.ratio, cap, stages.rule.spending.candidates, looks,
                 THESE_PROMPTS if stages.fixed else bound.estimate.question,
                 (ratio_of(next_prompt[0]), ratio_of(next_prompt[1])) if next_prompt else None)


def staged_verdict(stages: TargetStages, *, finished: bool = True) -> StagedVerdict:
    """The verdict of one staged target (``finished``: no stage of it is still to run in this sweep)."""
    played = stages.replay
    last = played.last
    eliminated = {n: _elimination_text(n, e) for n, e in played.eliminated.items()}
    empty = StagedVerdict(stages.target, Verdict.UNRESOLVED, None, None, None, eliminated=eliminated,
                          left_out=dict(stages.left_out), not_probed=stages.unprobed, stage_size=stages.per_stage,
                          stages=stages.stages_done, horizon=stages.rule.spending.horizon,
                          candidates=stages.rule.spending.candidates)
    if last is None:
        return empty
    alive = [n for n in last.survivors if n in last.vs_base] or list(last.vs_base)
    best = last.pick or max(alive, key=lambda n: last.vs_base[n].ratio, default=None)
    quote = _quote(stages, best, last.vs_base[best], last.number) if best is not None else None
    outcome = played.outcome
    verdict = {Outcome.RECOMMEND: Verdict.RECOMMEND, Outcome.NOTHING_GAINS: Verdict.NOTHING_GAINS,
               Outcome.SHORTLIST: Verdict.SHORTLIST}.get(outcome, Verdict.UNRESOLVED)
    if verdict is Verdict.UNRESOLVED and finished and last.clearing and set(last.clearing) >= set(last.contenders):
        verdict = Verdict.SHORTLIST         # every contender left gains, the stages ran out before one was picked
    shortlist = tuple(sorted(last.clearing, key=lambda n: -last.vs_base[n].ratio)) if verdict is Verdict.SHORTLIST \
        else ()
    settle = _settle(stages, best, shortlist) if verdict in (Verdict.UNRESOLVED, Verdict.SHORTLIST) else None
    return replace(empty, verdict=verdict, pick=last.pick, best=best, quote=quote, shortlist=shortlist,
                   equivalent=last.equivalent, settle=settle, power=_power(stages, best))


POWER_GAIN = 1.10


def _power(stages: TargetStages, best: str | None) -> str | None:
    """With the spread this sweep measured: after how many stages a candidate +10% faster than the target
    alone would be shown faster by the floor, four times in five (the power curve, at this machine's noise)."""
    series = stages.series.get(best or "")
    est = estimate(series, stages.spread.pair) if series else None
    if est is None:
        return None
    hypothetical = Estimate(math.log(POWER_GAIN), est.se, est.df, est.prompts, est.sessions, est.question)
    more = projection(hypothetical, stages.rule.floor, stages.rule.spending, stages.per_stage, "")
    total = est.sessions + (more.stages or 0) if more.stages is not None else None
    planned = stages.rule.spending.horizon
    if total is None:
        return (f"With the spread measured here, a candidate {pct(POWER_GAIN)} faster than the target alone would "
                f"not be shown so within {planned + 60} stages.")
    return (f"With the spread measured here, a candidate {pct(POWER_GAIN)} faster than the target alone would be "
            f"shown so four times in five after about {max(1, total)} stage(s) ({planned} planned).")


def _elimination_text(name: str, e: Elimination) -> str:
    if e.leader is not None and e.against_leader is not None:
        return (f"left at look {e.look}: slower than {e.leader} on the same prompts (by {pct(1 / e.against_leader.ratio)}"
                f", at least {pct(1 / e.against_leader.high)})")
    return (f"left at look {e.look}: it cannot gain the noise floor over the target alone (at most "
            f"{pct(e.bound.high)})")


def _settle(stages: TargetStages, best: str | None, shortlist: tuple[str, ...]) -> Projection | None:
    """How much more would settle it: separating the shortlist's top two, or showing the leader's gain (or
    that it gains less than the floor)."""
    if best is None or best not in stages.series:
        return None
    spending = stages.rule.spending
    if len(shortlist) >= 2:
        second = shortlist[1] if shortlist[0] == best else shortlist[0]
        est = estimate(contrast(stages.series[best], stages.series[second]), stages.spread.between)
        if est is not None:
            return projection(est, 1.0 + stages.rule.margin, spending, stages.per_stage,
                              f"whether {best} beats {second} by more than 2%")
    est = estimate(stages.series[best], stages.spread.pair)
    if est is None:
        return None
    floor = stages.rule.floor
    about = (f"a gain of {pct(math.exp(est.mean))} for {best}" if math.exp(est.mean) > floor else
             f"that {best} gains less than the {pct(floor)} floor")
    return projection(est, floor, spending, stages.per_stage, about)
