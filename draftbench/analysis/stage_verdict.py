"""A staged target's verdict as a typed value, rendered from its :class:`~draftbench.analysis.decision.Decision`
(nothing here decides): what was decided, the figure quoted and what it is for, who left and why, who was
never probed, and — when unresolved — what more would settle it.

Every figure keeps its promise:

* the interval quoted for a candidate is its bound at the last look, both sides at that look's error:
  95% over every candidate and look *together*, so it holds for the pick whatever was selected and
  whenever the stages stopped (:mod:`spending`); it is about the average over prompts like these (or
  these prompts, when every stage measured the same ones);
* its upper end never passes what the server's counters allow (a verify step costs at least one target
  step): a measurement above the bound is quoted at the bound, and said to be above it;
* the next prompt's speed-up is a separate 95% prediction interval (one prompt's spread and one server
  pair's offset on top of the mean's uncertainty), its top end held at the most any measured prompt's
  counters allowed;
* "significantly slower" when the whole interval is below 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..common.percent import change_text as pct
from ..common.percent import percent
from ..results.file import Row
from ..results.speedup import UNBOUNDED_WHY, Speedup, interval_ends, interval_text, is_unbounded
from .decision import Decision, Elimination, Outcome
from .moments import ratio_of
from .pairing import most_per_prompt
from .replication import THESE_PROMPTS
from .settle import Projection
from .stage_evidence import StageSample, estimate_stages, predicted
from .stats import describe_subset


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
    significant: bool = False            # the decision's noise-floor test (Decision.significant)
    next_held: bool = False              # the next prompt's top end held at the most a measured prompt's counters allow

    @property
    def capped(self) -> bool:
        return self.bound is not None and self.measured > self.bound

    @property
    def slower(self) -> bool:
        return self.high < 1.0

    def interval(self) -> str:
        return f"{pct(self.ratio)} {interval_text(self.low, self.high)}"

    def speedup(self, noise_floor: float) -> Speedup:
        """The quote as a speed-up (its interval: 95% over every candidate and look together)."""
        return Speedup(ratio=round(self.ratio, 4), **interval_ends(self.low, self.high),
                       significant=self.significant, method="staged", percent=round((self.ratio - 1) * 100, 2),
                       noise_floor=noise_floor, question=self.question, interval=self.what())

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
                     else f"; your next prompt: {pct(low)} to {pct(high)}, 95%"
                     + (", its top end held at the most its counters allowed on a prompt measured"
                        if self.next_held else ""))
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
    verdict: Outcome
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
    rests_on: str | None = None           # a recommendation whose gain rests on one prompt type: the figure on the rest
    memory: str | None = None             # what the pick costs in memory over the target alone (memory_cost.cost_clause)

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
                                                            "about": self.settle.about, "half": self.settle.half,
                                                            "share": self.settle.share,
                                                            "text": self.settle.describe(self.stage_size or 1)},
                "stages": self.stages, "horizon": self.horizon, "per_stage": self.stage_size,
                "candidates": self.candidates, "power": self.power}

    def sentence(self, baseline_tps: float | None, row: Row | None) -> str:
        """The verdict in words. ``row``: the pick's row as analysed (its speeds, its diagnosis) — unresolved or a
        shortlist, the best's, whose figure may rest on looping output too (said before --more is suggested)."""
        head = self.target + ": "
        quote = self.quote.text() if self.quote else "n/a"
        if self.verdict is Outcome.RECOMMEND and row is not None:
            speeds = (f" ({baseline_tps:.1f} → {row.mean_tps:.1f} tok/s, {percent(row.acceptance_rate)} of drafted "
                      "tokens accepted)" if baseline_tps and row.mean_tps else "")
            among = f"chosen among {self.candidates} candidates " if self.candidates > 1 else ""
            stages = f"{self.stages} stage{'s' if self.stages != 1 else ''}"
            memory = f", {self.memory}" if self.memory else ""
            text = (f"{head}use {self.pick} — expect {quote}{_caveats(row, self.rests_on)}{speeds}{memory}; {among}after "
                    f"{stages} of fresh server pairs"
                    + (", no other shown more than 2% faster (95%)." if self.candidates > 1 else "."))
        elif self.verdict is Outcome.NOTHING_GAINS:
            text = (f"{head}speculative decoding not recommended — every candidate was shown to gain less than the "
                    f"noise floor (best: {self.best}, {quote}).")
            if self.equivalent:
                text += (f" Equal to the target alone within ± the floor (two one-sided tests): "
                         f"{', '.join(self.equivalent)}.")
        elif self.verdict is Outcome.SHORTLIST:
            text = (f"{head}speculative decoding pays — the fastest is one of {', '.join(self.shortlist)} (each shown "
                    f"faster than the target alone by more than the floor); which of them is fastest the stages could "
                    f"not tell. Leader: {self.best}, {quote}{_caveats(row, None, 'its figure')}.")
        else:
            text = (f"{head}unresolved — best so far {self.best or 'none'}" + (f", {quote}" if self.quote else "")
                    + f"{_caveats(row, None, 'its figure')}.")
        if self.not_probed:
            text += (f" Not probed (the budget ran out first): {', '.join(self.not_probed)} — run the same command with "
                     "a larger budget_s, or with --more, to continue.")
        others = {n: why for n, why in self.left_out.items() if n not in self.not_probed}   # (said just above)
        if others:
            text += " Not in the decision: " + "; ".join(f"{n} ({why})" for n, why in others.items()) + "."
        if self.settle is not None and self.verdict in (Outcome.UNRESOLVED, Outcome.SHORTLIST):
            more = self.settle.describe(self.stage_size or 1)
            text += f" {more[0].upper()}{more[1:]}."
        return text


def _caveats(row: Row | None, rests_on: str | None, what: str = "this gain") -> str:
    """What the recommendation's gain (or the best's figure so far: ``what``) rests on, in its own line: the target's
    looping output (the row's diagnosis, with its figure on the other requests), or one prompt type (with the figure
    on the rest)."""
    out = ""
    loops = (row.degenerate_output if row is not None else None) or {}
    if "speedup_without_loops" in loops:
        without = loops.get("speedup_without_loops")
        rest = Speedup.from_dict(without) if isinstance(without, dict) else None
        out += (f" — but {what} rests on looping output: the target alone repeats itself on "
                f"{loops.get('looping_requests')} of {loops.get('requests')} requests, which any draft predicts "
                "trivially; on the other requests: "
                + (f"{_figure(rest)} (95% for this candidate alone, on those requests)" if rest is not None
                   else "none to compare"))
    if rests_on:
        out += f" — but {rests_on}"
    return out


def _figure(speed: Speedup) -> str:
    if speed.ci95_low is None or speed.ci95_high is None:
        return describe_subset(speed)
    return f"{pct(speed.ratio)} [{pct(speed.ci95_low)}, {pct(speed.ci95_high)}]"


def one_prompt_type(decision: Decision) -> str | None:
    """A recommendation whose gain rests on one prompt category: without that category's prompts its estimate
    gains no more than the floor. Said with the figure on the rest (95% for this candidate alone)."""
    pick, ev = decision.pick, decision.evidence
    series, row = ev.series.get(pick or ""), ev.rows.get(pick or "")
    if series is None or row is None:
        return None
    category = {r.prompt_id: r.category for r in row.requests}
    values: dict[str, list[float]] = {}
    for stage in series:
        for prompt, value in zip(stage.prompts, stage.values):
            values.setdefault(category.get(prompt, ""), []).append(value)
    if len(values) < 2:
        return None
    top = max(values, key=lambda c: sum(values[c]) / len(values[c]))
    rest = tuple(StageSample(s.stage, kept, tuple(v for p, v in zip(s.prompts, s.values) if p in kept), s.order)
                 for s in series if (kept := tuple(p for p in s.prompts if category.get(p, "") != top)))
    est = estimate_stages(rest, ev.spread.pair)
    if est is None or ratio_of(est.mean) > decision.rule.floor:
        return None
    low, high = est.bounds(0.95)
    return (f"its gain rests on {top or 'uncategorised'} prompts: on the others, {pct(ratio_of(est.mean))} "
            f"[{pct(ratio_of(low))}, {pct(ratio_of(high))}] (95% for this candidate alone, on those prompts)")


def staged_verdict(decision: Decision) -> StagedVerdict:
    """The verdict of one staged target, in the words of its decision."""
    ev = decision.evidence
    return StagedVerdict(
        ev.target, decision.outcome, decision.pick, decision.best, _quote(decision), decision.shortlist,
        decision.equivalent, {n: _elimination_text(e) for n, e in decision.eliminated.items()},
        {n: absent.text for n, absent in ev.left_out.items()},
        ev.unprobed, decision.settle, ev.per_stage, ev.stages_done, decision.rule.spending.horizon,
        decision.rule.spending.candidates, decision.power,
        one_prompt_type(decision) if decision.outcome is Outcome.RECOMMEND else None)


def _end(ratio: float) -> float | None:
    """An interval's end as the summary keeps it: null where it bounds nothing (strict JSON has no infinity)."""
    return None if is_unbounded(ratio) else round(ratio, 4)


def _quote(decision: Decision) -> Quote | None:
    quoted, name, ev = decision.quoted, decision.best, decision.evidence
    if quoted is None or name is None or decision.last is None:
        return None
    series = ev.series.get(name)
    found = predicted(series, ev.spread.pair) if series else None
    next_prompt = (ratio_of(found[0]), ratio_of(found[1])) if found else None
    # one prompt gains no more than its counters allow either (make demo, 2026-11-29: "+1303%" at 1 df, beside
    # "its counters allow at most +51.6%"): the top end is held at the most any measured prompt's allowed
    cap, held = most_per_prompt(ev.rows[name]) if name in ev.rows else None, False
    if next_prompt is not None and cap is not None and next_prompt[1] > cap:
        next_prompt, held = (min(next_prompt[0], cap), cap), True
    return Quote(quoted.ratio, quoted.low, quoted.high, quoted.measured, quoted.cap, decision.rule.spending.candidates,
                 decision.last.number, THESE_PROMPTS if ev.fixed else quoted.bound.estimate.question, next_prompt,
                 decision.significant, held)


def _elimination_text(e: Elimination) -> str:
    if e.leader is not None and e.against_leader is not None:
        return (f"left at look {e.look}: slower than {e.leader} on the same prompts (by {pct(1 / e.against_leader.ratio)}"
                f", at least {pct(1 / e.against_leader.high)})")
    return (f"left at look {e.look}: it cannot gain the noise floor over the target alone (at most "
            f"{pct(e.bound.high)})")
