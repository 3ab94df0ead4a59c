"""The output-distribution check at temperature > 0 (analysis/output_distribution.py): the two-sample test passes a
correct speculative sampler and fails a deliberately wrong one, on a toy language model whose truth is known."""

from __future__ import annotations

import random

from draftbench.analysis.output_distribution import ALPHA, check, describe, prefixes, two_sample

WORDS = ("the", "a", "cat", "dog", "sat", "ran", "home", "away")


def _dist(seed: int, word: str, sharp: float) -> dict[str, float]:
    rng = random.Random(f"{seed}:{word}")
    weights = [rng.random() ** sharp for _ in WORDS]
    total = sum(weights)
    return {w: x / total for w, x in zip(WORDS, weights)}


def target(word: str) -> dict[str, float]:         # the target's next-word distribution after ``word``
    return _dist(1, word, 3.0)


def draft(word: str) -> dict[str, float]:          # a draft that predicts it poorly
    return _dist(2, word, 3.0)


def _draw(dist: dict[str, float], rng: random.Random) -> str:
    x, acc = rng.random(), 0.0
    for w, p in dist.items():
        acc += p
        if x < acc:
            return w
    return w


def speculative(start: str, rng: random.Random, *, correct: bool, length: int = 3) -> tuple[str, int, int]:
    """One answer by speculative sampling, a token at a time: the draft proposes x ~ q, the target keeps it with
    probability min(1, p(x)/q(x)); on a rejection the correct sampler draws from the residual (p − q)+, the wrong one
    from p itself (a classic bug: it over-weights what the draft likes)."""
    words, drafted, accepted = [start], 0, 0
    for _ in range(length):
        p, q = target(words[-1]), draft(words[-1])
        x = _draw(q, rng)
        drafted += 1
        if rng.random() < min(1.0, p[x] / q[x]):
            accepted += 1
            words.append(x)
            continue
        residual = {w: max(0.0, p[w] - q[w]) for w in WORDS}
        total = sum(residual.values())
        words.append(_draw({w: r / total for w, r in residual.items()} if correct else p, rng))
    return " ".join(words[1:]), drafted, accepted


def plain(start: str, rng: random.Random, length: int = 3) -> str:
    words = [start]
    for _ in range(length):
        words.append(_draw(target(words[-1]), rng))
    return " ".join(words[1:])


def answers(make, n: int = 150, seed: int = 0) -> dict[str, list[str]]:
    rng = random.Random(seed)
    return {start: [make(start, rng) for _ in range(n)] for start in ("the", "cat", "home")}


def test_a_correct_speculative_sampler_passes_and_a_wrong_one_fails():
    alone = answers(plain, seed=1)
    right = answers(lambda s, rng: speculative(s, rng, correct=True)[0], seed=2)
    wrong = answers(lambda s, rng: speculative(s, rng, correct=False)[0], seed=3)
    assert two_sample(alone, right).p_value > ALPHA
    found = two_sample(alone, wrong)
    assert found.p_value <= ALPHA and found.prompts == 3 and found.samples == 150
    # the target alone against itself, on other seeds: consistent too
    assert two_sample(alone, answers(plain, seed=4)).p_value > ALPHA


def test_the_check_says_what_it_found_or_why_it_was_not_made():
    alone, right = answers(plain, seed=1), answers(lambda s, rng: speculative(s, rng, correct=True)[0], seed=2)
    found = check(alone, right, temperature=1.0, max_tokens=12, drafted=450, accepted=200, reproducible=True)
    assert found["checked"] and found["consistent"] and found["p_value"] > ALPHA
    assert describe(found).startswith("output distribution: consistent with the target's (p = ")
    wrong = check(alone, answers(lambda s, rng: speculative(s, rng, correct=False)[0], seed=3), temperature=1.0,
                  max_tokens=12, drafted=450, accepted=200, reproducible=True)
    assert wrong["checked"] and not wrong["consistent"]
    assert describe(wrong).startswith("output distribution: differs from the target's (p = ")
    # a method that drafted nothing during the check sampled as the target alone: nothing was tested
    idle = check(alone, right, temperature=1.0, max_tokens=12, drafted=0, accepted=0, reproducible=True)
    assert not idle["checked"] and "drafted nothing" in describe(idle)
    assert not check(alone, right, temperature=0.0, max_tokens=12, drafted=5, accepted=5, reproducible=True)["checked"]
    assert describe(None) == "output distribution: not checked (not asked for: settings.distribution_samples)"


def test_prefixes_are_the_first_words_whitespace_normalised():
    assert prefixes("  Sure,\nhere  is it") == ("Sure,", "Sure, here", "Sure, here is")
    assert prefixes("") == ("", "", "")
