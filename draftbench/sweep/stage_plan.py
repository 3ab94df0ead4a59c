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
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class StagePlan:
    horizon: int                          # stages planned
    size: int                             # prompts per stage (a conversation may add one more)
    fixed: bool                           # every stage measures every prompt: the claim is about these prompts
    chunks: tuple[tuple[int, ...], ...]   # prompt indexes of each stage of fresh prompts, in order
    prompts: int                          # prompts in the set

    def stage(self, k: int) -> tuple[int, ...]:
        """The prompt indexes stage ``k`` (0-based) measures, in the order they are sent."""
        if self.fixed:
            return tuple(range(self.prompts))
        return self.chunks[k % len(self.chunks)]

    def run_of(self, k: int) -> int:
        """The repetition a stage's requests are numbered with (their seed): 0 for fresh prompts; the
        stage's number where every stage sends the same prompts."""
        return k if self.fixed else k // len(self.chunks)

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
    chunks: list[tuple[int, ...]] = []
    current: list[int] = []
    for unit in stratified_order(categories, groups, seed):
        current += unit
        if len(current) >= size:
            chunks.append(tuple(current))
            current = []
    return StagePlan(min(horizon, len(chunks)), size, False, tuple(chunks), n)


def stage_size(prompt_spread: float, session_spread: float, load_s: float, request_s: float, *, planned: int) -> int:
    """The prompts per server pair that buy the most precision per second of measuring. A stage costs each
    candidate a server load (``load_s``, the baseline's share of its own included) and n prompts (``request_s``
    each: its request and its baseline's), and leaves τ² + σ²_w / n in its mean: (τ² + σ²_w / n)·(load + n·request)
    is least at n* = √(σ²_w·load / (τ²·request)). Kept within [max(2, planned / 2), 2·planned]; the planned size
    where a spread or a cost is not measured (a spread of 0 has no optimum: the largest)."""
    low, high = max(2, planned // 2), max(2, 2 * planned)
    if not (prompt_spread > 0 and load_s > 0 and request_s > 0) or session_spread < 0:
        return planned
    if session_spread == 0:
        return high
    best = (prompt_spread * load_s / (session_spread * request_s)) ** 0.5
    return int(min(high, max(low, round(best))))
