"""Output truth at temperature > 0: does speculation leave the target's output *distribution* unchanged?

At temperature 0 a speculative answer must equal the target's own (``verdict.equivalence``). Above 0 no two
answers need match, so exact match cannot hold; what can be checked is what correct speculative sampling promises:
the answers are drawn from the same distribution as the target alone's (greedy drafting: the target samples and a
draft token is kept only when it matches; probabilistic drafting: rejection sampling with the residual). A wrong
sampler — one that keeps a draft token it should reject, resamples from the target instead of the residual, or
samples at another temperature — changes it.

The check is a two-sample test over repeated samples of a few prompts: ``n`` answers per prompt from a server of
the target alone and ``n`` from the candidate's server, on *disjoint* seeds (the same seed would let a greedy
drafter reproduce the target's answer token for token and flatter the test). Each answer is reduced to its first
one, two and three words; the statistic is the sum over prompts and prefixes of the total variation distance
between the two empirical distributions, and its p-value is exact under the null by permutation (the side labels
shuffled within each prompt, seeded). Any function of the answers has the same distribution under the null, so the
test is valid whatever the prefixes; they only decide its power. A p-value at or below :data:`ALPHA` says the
distribution differs.

What it can be fooled by, and how it is not: a stateful n-gram method (``ngram-mod``) learns from repeated prompts on
one server, so the repeats run on servers of their own, after the measurement, never counted as speed; a method that
drafted nothing during the check proves nothing (it sampled as the target alone), so the check is *not made* then,
and says why. It is reported as "output distribution: consistent with the target's (p = …)", "differs", or not made —
never implied.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

ALPHA = 0.01              # a correct sampler is called "differs" in 1% of checks
PREFIX_WORDS = (1, 2, 3)
PERMUTATIONS = 1000      # the p-value's resolution: 0.001


def prefixes(text: str) -> tuple[str, ...]:
    """The answer's first one, two and three words (whitespace normalised): what the statistic compares."""
    words = text.split()
    return tuple(" ".join(words[:k]) for k in PREFIX_WORDS)


class _Coded:
    """One prompt's pooled answers as integer codes per prefix length: a permutation's statistic is then counting."""

    def __init__(self, a: Sequence[tuple[str, ...]], b: Sequence[tuple[str, ...]]):
        pooled = [*a, *b]
        self.n_a, self.n_b = len(a), len(b)
        self.levels = []
        for k in range(len(PREFIX_WORDS)):
            index: dict[str, int] = {}
            codes = [index.setdefault(p[k], len(index)) for p in pooled]
            totals = [0] * len(index)
            for c in codes:
                totals[c] += 1
            self.levels.append((codes, totals))

    def statistic(self, order: Sequence[int]) -> float:
        """With the pooled answers in ``order``: the first ``n_a`` one side, the rest the other."""
        out = 0.0
        for codes, totals in self.levels:
            counts = [0] * len(totals)
            for i in order[:self.n_a]:
                counts[codes[i]] += 1
            out += 0.5 * sum(abs(c / self.n_a - (t - c) / self.n_b) for c, t in zip(counts, totals))
        return out


@dataclass(frozen=True)
class TwoSample:
    statistic: float
    p_value: float
    prompts: int
    samples: int            # per prompt and side (the smallest)


def two_sample(target: Mapping[str, Sequence[str]], candidate: Mapping[str, Sequence[str]], *,
               permutations: int = PERMUTATIONS, seed: int = 0) -> TwoSample:
    """The permutation test of "same distribution" over the prompts both sides answered."""
    shared = [p for p in target if p in candidate and target[p] and candidate[p]]
    groups = [([prefixes(t) for t in target[p]], [prefixes(t) for t in candidate[p]]) for p in shared]
    coded = [_Coded(a, b) for a, b in groups]
    orders = [list(range(c.n_a + c.n_b)) for c in coded]
    observed = sum(c.statistic(o) for c, o in zip(coded, orders))
    rng = random.Random(seed)
    at_least = 0
    for _ in range(permutations):
        total = 0.0
        for c, order in zip(coded, orders):
            rng.shuffle(order)
            total += c.statistic(order)
        at_least += total >= observed - 1e-9
    smallest = min((min(len(a), len(b)) for a, b in groups), default=0)
    return TwoSample(round(observed, 6), round((1 + at_least) / (1 + permutations), 6), len(groups), smallest)


def check(target: Mapping[str, Sequence[str]], candidate: Mapping[str, Sequence[str]], *, temperature: float,
          max_tokens: int, drafted: int | None, accepted: int | None, reproducible: bool | None,
          seed: int = 0) -> dict:
    """The row's ``output_distribution``: the test, or why it was not made."""
    common = {"temperature": temperature, "max_tokens": max_tokens, "drafted": drafted, "accepted": accepted,
              "reproducible": reproducible}
    if temperature <= 0:
        return {"checked": False, "reason": "at temperature 0 the answers must match exactly (the output check)",
                **common}
    if not drafted:
        return {"checked": False, "reason": "the candidate drafted nothing during the check, so its answers are the "
                "target's own sampling: nothing about speculative sampling was tested", **common}
    found = two_sample(target, candidate, seed=seed)
    if found.prompts == 0 or found.samples < 2:
        return {"checked": False, "reason": "too few answers on both sides", **common}
    return {"checked": True, "consistent": found.p_value > ALPHA, "p_value": found.p_value,
            "statistic": found.statistic, "prompts": found.prompts, "samples": found.samples, **common}


def describe(found: dict | None) -> str:
    """What the verdict says about it: consistent (p), differs (p), or not checked and why — never implied."""
    if not found:
        return "output distribution: not checked (not asked for: settings.distribution_samples)"
    if not found.get("checked"):
        return f"output distribution: not checked ({found.get('reason') or 'no reason recorded'})"
    size = f"{found.get('prompts')} prompts × {found.get('samples')} answers a side"
    if found.get("drafted") is not None:
        # a method that drafted a handful of tokens leaves its answers nearly the target's own: a weak test, so say so
        size += f"; it drafted {found['drafted']} tokens, {found.get('accepted') or 0} accepted"
    if found.get("consistent"):
        return f"output distribution: consistent with the target's (p = {found['p_value']:.2g}; {size})"
    return (f"output distribution: differs from the target's (p = {found['p_value']:.2g}; {size}) — its sampling does "
            "not reproduce the target alone's answers")
