"""Sampling at temperature > 0 on the real llama-server (b11434, the forged family): the draft's sampling reaches
the verifier and is read back from the server process, and the output-distribution check passes the real
speculative sampler and fails a wrong one. Mechanics and truth, never speed."""

from __future__ import annotations

import pytest
from draftbench.analysis.output_distribution import ALPHA, check
from draftbench.config.prompts import resolve_prompts
from draftbench.measure.sequential import MeasureOptions, measure_one
from draftbench.sweep.distribution_check import CANDIDATE_SEEDS, TARGET_SEEDS, TOKENS, check_prompts, sample_server

pytestmark = pytest.mark.llama

SAMPLES = 12          # answers per prompt and side: 3 prompts × 12 × 8 tokens


@pytest.fixture
def launch(start_llama):
    def start(target: str, draft: str | None = None, **params):
        return start_llama(target, draft, ctx_size=1024, params=params)
    return start


def acceptance(server, temperature: float) -> float:
    prompts = resolve_prompts(["prose", "chat", "list"])
    options = MeasureOptions(max_tokens=48, temperature=temperature)
    records = [measure_one(server, p, options, seed=7 + i, max_tokens=48) for i, p in enumerate(prompts)]
    drafted = sum(r.draft_n or 0 for r in records)
    assert drafted > 0
    return sum(r.draft_n_accepted or 0 for r in records) / drafted


def test_probabilistic_drafting_reaches_the_verifier_and_is_read_from_the_process(models, launch):
    # The draft is the target itself: rejection sampling with q ≈ p keeps most drafted tokens (the draft's sampler
    # chain is not quite the target's), while a greedy draft is kept only when the target's own sample happens to be
    # its argmax (measured here: 0.76 against 0.43 at temperature 1).
    greedy = launch(models["base"], models["base"])
    probabilistic = launch(models["base"], models["base"], draft_sampling="probabilistic")
    assert greedy.draft_sampling() == ("greedy", "the build's default (no flag, no variable)")
    assert probabilistic.draft_sampling() == ("probabilistic", "its command line (--spec-draft-sampling)")
    command = probabilistic.command
    assert command[command.index("--spec-draft-sampling") + 1] == "probabilistic"
    # /slots says nothing of it (what every method is proven by says only the types)
    greedy_rate, probabilistic_rate = acceptance(greedy, 1.0), acceptance(probabilistic, 1.0)
    assert probabilistic_rate > greedy_rate + 0.15, (greedy_rate, probabilistic_rate)


def test_the_distribution_check_passes_the_real_sampler_and_fails_a_wrong_one(models, launch):
    prompts = check_prompts(resolve_prompts(["prose", "chat", "list", "code"]))
    options = MeasureOptions(temperature=1.0, seed=42)
    alone = sample_server(launch(models["base"]), prompts, options, SAMPLES, TARGET_SEEDS, reproduce=True)
    assert alone.reproducible is True                      # a fixed seed: the target alone answers the same
    # the 8-block draft is poor: most of its tokens are rejected, so the residual is drawn from all the time
    spec = sample_server(launch(models["base"], models["draft-trunc"], draft_sampling="probabilistic"), prompts,
                         options, SAMPLES, CANDIDATE_SEEDS)
    found = check(alone.answers, spec.answers, temperature=1.0, max_tokens=TOKENS, drafted=spec.drafted,
                  accepted=spec.accepted, reproducible=alone.reproducible)
    assert spec.drafted and spec.accepted is not None and spec.accepted < spec.drafted
    assert found["checked"] and found["consistent"], found
    # a sampler that kept every drafted token would answer as the draft does: the draft alone is that sampler
    wrong = sample_server(launch(models["draft-trunc"]), prompts, options, SAMPLES, CANDIDATE_SEEDS)
    refused = check(alone.answers, wrong.answers, temperature=1.0, max_tokens=TOKENS, drafted=1, accepted=1,
                    reproducible=alone.reproducible)
    assert refused["checked"] and not refused["consistent"] and refused["p_value"] <= ALPHA, refused
