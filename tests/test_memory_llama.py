"""Issue 47 on the real llama-server (the forged SmolLM2 family, CPU): what each server held, per device, from its
own log (at -lv 4, which the sweep passes), and the --dry-run estimate from the GGUF headers against it.

Measured here on build 11434 (2 cores, -c 1024): the 241M Q4_1 target alone holds 155.5 MiB of weights, 45 MiB of
KV cache and 15.6 MiB of compute buffers on the CPU; with the 135M Q8_0 draft 136.4 + 22.5 + 15.6 MiB more. The
estimate (weights and KV cache; compute buffers on top) comes within 10% of what the log says.
"""

from __future__ import annotations

import pytest
from draftbench.analysis.memory_cost import cost_of
from draftbench.backends.llamacpp.memory import estimate_memory
from draftbench.results.file import Row
from draftbench.results.kinds import Role

pytestmark = pytest.mark.llama
CTX = 1024


@pytest.fixture(scope="module")
def q8_draft(models) -> str:
    """The requantised Q8_0 draft (the demo set's: `make setup` forged it; forged here otherwise)."""
    from forge import ensure_family
    return str(ensure_family(which="demo", quiet=True)["draft-q8"])


def _held(start_llama, target: str, draft: str | None = None, ctx_size: int = CTX):
    server = start_llama(target, draft, ctx_size=ctx_size, method_stats=True)   # -lv 4: the buffer lines
    memory = server.memory_use()
    server.stop()
    return memory


def _row(draft: str | None, memory) -> Row:
    return Row(target="T", draft=draft, role=Role.SPECULATIVE if draft else Role.BASELINE, memory=memory)


def test_a_q8_draft_costs_more_than_a_q4_1_draft_and_the_estimate_is_within_a_fifth(start_llama, models, q8_draft):
    target, q4 = models["target-2x"], models["base"]
    alone = _held(start_llama, target)
    with_q4, with_q8 = _held(start_llama, target, q4), _held(start_llama, target, q8_draft)
    for memory in (alone, with_q4, with_q8):
        assert set(memory.devices) == {"CPU"} and memory.unreported is None, memory   # a CPU build: one device
        cpu = memory.devices["CPU"]
        assert cpu["model_mib"] > 100 and cpu["kv_mib"] > 0 and cpu["compute_mib"] > 0
        assert memory.peak_rss_mib and memory.peak_rss_mib > 50
    q4_cost, q8_cost = cost_of(_row("q4", with_q4), _row(None, alone)), cost_of(_row("q8", with_q8), _row(None, alone))
    assert 0 < q4_cost.extra["CPU"] < q8_cost.extra["CPU"], (q4_cost, q8_cost)
    # the same architecture: the same KV cache; the Q8_0 weights are what cost more
    assert with_q4.devices["CPU"]["kv_mib"] == with_q8.devices["CPU"]["kv_mib"]
    assert with_q8.devices["CPU"]["model_mib"] > with_q4.devices["CPU"]["model_mib"]
    # --dry-run's estimate from the headers against what the log said (weights, KV cache and compute buffers)
    for draft, measured in ((None, alone), (q4, with_q4), (q8_draft, with_q8)):
        guessed = estimate_memory(target, draft, CTX)
        assert guessed is not None and measured.total_mib()
        assert abs(guessed.total_mib() / measured.total_mib() - 1) < 0.20, (draft, guessed, measured)
        assert guessed.devices["CPU"]["kv_mib"] == measured.devices["CPU"]["kv_mib"]     # exact: the f16 cache


def test_a_longer_context_holds_more_kv_cache(start_llama, models):
    short, long = (_held(start_llama, models["base"], ctx_size=n) for n in (512, 2048))
    assert long.kv_mib == pytest.approx(4 * short.kv_mib)
    assert long.devices["CPU"]["model_mib"] == short.devices["CPU"]["model_mib"]
