"""Which prompts each stage measures — a pure function of the prompt set, the plan and the seed.

A stage draws *fresh* prompts: the prompt set is put in a stratified order once (each category's prompts
shuffled with the seed, then the categories interleaved in proportion to their sizes, so any run of
consecutive prompts holds the categories about as the whole set does), and stage k takes the k-th run of
``size`` prompts. The turns of one conversation stay together (a second turn needs its first's answer).
No prompt is measured twice by one candidate, so a method that remembers earlier answers on its server
(``ngram-mod``) never sees a prompt it has answered, and the stages are independent samples of
"prompts like these".

A prompt set too small for two stages of fresh prompts is measured whole at every stage (on new
servers: the stages then replicate the machine, not the prompts), and the claim is about *these
prompts*. One that runs out before the planned stages plans fewer; stages beyond the set (``--more``)
start over from its beginning, each on fresh servers.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..analysis.decision import Decision
from ..analysis.stage_evidence import within_spread


@dataclass(frozen=True)
class StagePlan:
    horizon: int                          # stages planned
    size: int                             # prompts per stage (a conversation may add one more)
    fixed: bool                           # every stage measures every prompt: the claim is about these prompts
    chunks: tuple[tuple[int, ...], ...]   # prompt indexes of each stage of fresh prompts, in order
    prompts: int                          # prompts in the set
    units: tuple[tuple[int, ...], ...] = ()   # the set's units in the stratified order (chunks are cut from it)

    def stage(self, k: int) -> tuple[int, ...]:
        """The prompt indexes stage ``k`` (0-based) measures, in the order they are sent."""
        if self.fixed:
            return tuple(range(self.prompts))
        return self.chunks[k % len(self.chunks)]

    def run_of(self, k: int) -> int:
        """The repetition a stage's requests are numbered with (their seed): 0 for fresh prompts; the
        stage's number where every stage sends the same prompts."""
        return k if self.fixed else k // len(self.chunks)

    def resized(self, stage: int, size: int) -> StagePlan:
        """The plan with the fresh stages from ``stage`` on cut at ``size`` prompts (the earlier ones as they were) —
        no larger than leaves fresh prompts for every planned stage left, and never smaller than planned."""
        if self.fixed or not self.units or stage >= len(self.chunks):
            return self
        used = {i for chunk in self.chunks[:stage] for i in chunk}
        rest = [u for u in self.units if not used & set(u)]
        size = max(self.size, min(size, sum(len(u) for u in rest) // max(1, self.horizon - stage)))
        if len(self.chunks[stage]) == size:
            return self
        chunks = list(self.chunks[:stage]) + _cut(rest, size)
        return StagePlan(self.horizon, self.size, False, tuple(chunks), self.prompts, self.units)

    def sized(self, stage: int, known: Decision | None) -> StagePlan:
        """The fresh stages from ``stage`` on cut at the size the stages before it ask for (:func:`measured_size`;
        ``known``: the decision on them): a resumed run re-derives every stage's size as it goes, the same."""
        return self if known is None or not known.looks else self.resized(stage, measured_size(known, self.size, stage))

    def describe(self) -> str:
        if self.fixed:
            return (f"up to {self.horizon} stage(s), each measuring all {self.prompts} prompt(s) on fresh servers "
                    "(too few prompts for fresh ones at every stage: the claim is about these prompts)")
        return (f"up to {self.horizon} stage(s) of {self.size} fresh prompt(s) each, drawn from {self.prompts} without "
                "replacement, stratified by category (the claim is about prompts like these)")


def stratified_order(categories: Sequence[str], groups: Sequence[str], seed: int) -> list[tuple[int, ...]]:
    """The prompt set's units (a conversation's prompts together), shuffled within each category and the
    categories interleaved in proportion: unit i of a category of n sits at (i + u) / n, u a seeded offset."""
    units: dict[str, list[int]] = {}
    for index, group in enumerate(groups):
        units.setdefault(group, []).append(index)
    by_category: dict[str, list[tuple[int, ...]]] = {}
    for members in units.values():
        by_category.setdefault(categories[members[0]], []).append(tuple(members))
    keyed: list[tuple[float, str, tuple[int, ...]]] = []
    for category, units_of in by_category.items():
        rng = random.Random(f"{seed}:{category}")
        rng.shuffle(units_of)
        offset = rng.random()
        keyed += [((i + offset) / len(units_of), category, unit) for i, unit in enumerate(units_of)]
    return [unit for _, _, unit in sorted(keyed)]


def plan_stages(categories: Sequence[str], groups: Sequence[str], *, horizon: int, size: int, seed: int) -> StagePlan:
    """The stages for a prompt set (``categories`` and conversation ``groups`` per prompt, in order)."""
    n = len(categories)
    if n < 2 * size:
        return StagePlan(horizon, n, True, (tuple(range(n)),), n)
    units = stratified_order(categories, groups, seed)
    chunks = _cut(units, size)
    return StagePlan(min(horizon, len(chunks)), size, False, tuple(chunks), n, tuple(units))


def _cut(units: Sequence[tuple[int, ...]], size: int) -> list[tuple[int, ...]]:
    """Consecutive runs of at least ``size`` prompts (a conversation's turns together); a short rest is dropped."""
    chunks: list[tuple[int, ...]] = []
    current: list[int] = []
    for unit in units:
        current += unit
        if len(current) >= size:
            chunks.append(tuple(current))
            current = []
    return chunks


def stage_size(prompt_spread: float, session_spread: float, load_s: float, request_s: float, *, planned: int) -> int:
    """The prompts per server pair that buy the most precision per second of measuring. A stage costs each
    candidate a server load (``load_s``, its share of the baseline's included) and n prompts (``request_s`` each:
    its request and its baseline's), and leaves τ² + σ²_w / n in its mean: (τ² + σ²_w / n)·(load + n·request) is
    least at n* = √(σ²_w·load / (τ²·request)). Never below the planned size (the plan's looks keep at least the
    prompts planned) nor above twice it; the planned size where a spread or a cost is not measured."""
    if not (prompt_spread > 0 and load_s > 0 and request_s > 0) or session_spread < 0:
        return planned
    if session_spread == 0:
        return 2 * planned
    best = (prompt_spread * load_s / (session_spread * request_s)) ** 0.5
    return int(min(2 * planned, max(planned, round(best))))


def measured_size(known: Decision, planned: int, stage: int | None = None) -> int:
    """The size the next stage takes, from what the stages so far measured: the candidates' spread from prompt to
    prompt, the machine's pair spread (the planned size while it is only assumed), a server's load time and a
    request's, as the rows recorded them before ``stage`` (a prompt costs a candidate's request and its baseline's)."""
    ev = known.evidence
    spreads = [found[0] for s in ev.series.values() if s and (found := within_spread(s))[1] > 0]
    loads = [r.load_time_s for r in ev.rows.values() if r.load_time_s]
    requests = [q.total_s for r in ev.rows.values() for q in r.requests if q.total_s and q.error is None
                and (stage is None or (q.block is not None and q.block < stage))]
    if not spreads or not loads or not requests or ev.spread.pair.uncertainty is None:
        return planned
    share = 1.0 + 1.0 / max(1, len(ev.rows))             # a candidate's load, and its share of the baseline's
    # the pair spread one standard error up: a spread known poorly (early looks) does not grow the stages
    pair = ev.spread.pair.variance + ev.spread.pair.uncertainty ** 0.5
    return stage_size(statistics.fmean(spreads), pair, share * statistics.fmean(loads),
                      2.0 * statistics.fmean(requests), planned=planned)
