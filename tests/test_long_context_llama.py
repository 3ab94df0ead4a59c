"""Long prompts on the real llama-server (the forged SmolLM2 family): cut with the server's own tokenizer,
they reach it at the requested token count, prefill and decode are recorded apart, and a length the
models cannot take is refused before any server starts. Needs `make setup` (nothing is downloaded here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from draftbench.backends.base import LaunchSpec
from draftbench.backends.llamacpp.backend import LlamaCppBackend
from draftbench.config import prompt_data
from draftbench.config.long_documents import LONG_TASKS
from draftbench.config.long_prompts import TOLERANCE, LongPromptBuilder
from draftbench.config.settings import DEFAULTS
from draftbench.lifetime.process import free_port
from draftbench.measure.sequential import MeasureOptions, measure_one

from helpers import REQUIRE_LLAMA, default_settings, llama_server_pids, run_cli

pytestmark = pytest.mark.llama
LENGTHS = (300, 700)          # short: 2 shared cores prefill a few hundred tokens a second


@pytest.fixture(scope="module")
def plays_cached() -> None:
    for data in prompt_data.DATA_FILES.values():
        if data.set_name == "long-prose" and not data.path.is_file():
            if REQUIRE_LLAMA:
                pytest.fail(f"{data.path} is missing (run `make prompt-sets`); CI requires it", pytrace=False)
            pytest.skip(f"{data.path} is missing: run `make prompt-sets`")


def test_prompts_reach_the_server_at_the_requested_length_with_prefill_and_decode_apart(models, llama_bin,
                                                                                           plays_cached, tmp_path):
    spec = LaunchSpec(target=models["base"], port=free_port(), ctx_size=1024, gpu_layers=0,
                      settings=default_settings(llama_bin=llama_bin), log_path=str(tmp_path / "server.log"),
                      context_tokens=max(LENGTHS))
    with LlamaCppBackend().launch(spec) as server:
        tokenizer = server.tokenizer()
        builder = LongPromptBuilder(tokenizer, DEFAULTS.context_filler, DEFAULTS.seed)
        built = {n: builder.prompts(n) for n in LENGTHS}
        options = MeasureOptions(max_tokens=8, warmup=0)
        for n, prompts in built.items():
            assert [p.prompt.category for p in prompts] == [t.category for t in LONG_TASKS]
            for long_prompt in prompts:
                assert abs(long_prompt.tokens - n) <= TOLERANCE            # as the tokenizer counts the chat prompt
                record = measure_one(server, long_prompt.prompt, options, seed=1, max_tokens=8)
                # what the server itself counted for the request (usage.prompt_tokens): the same chat prompt
                assert record.prompt_tokens == long_prompt.tokens, (long_prompt.prompt.id, record.prompt_tokens)
                # time to first token split: the server's prefill apart from the decode rate
                assert record.server_prefill_s and record.server_prefill_s > 0
                assert record.server_prefill_tps and record.server_prefill_tps > 0
                assert record.server_decode_tps and record.ttft_s and record.ttft_s >= record.server_prefill_s * 0.5
        memory = server.memory_use()
        assert memory.peak_rss_mib and memory.peak_rss_mib > 50
        assert memory.kv_mib is None or memory.kv_mib > 0
    # the documents are real text: a play, and this Python's standard library for the code edit
    code = next(p for p in built[700] if p.prompt.category == "long-code-edit").prompt.text
    assert "# file: argparse.py" in code and "```python" in code


def _config(folder: Path, models: dict, lengths: list[int]) -> Path:
    config = {"name": "long", "hardware": "test-2core", "backend": "llamacpp",
              "targets": [{"label": "135M Q4_1", "path": models["base"]}],
              "drafts": [{"label": "57M trunc8", "path": models["draft-trunc"]}],
              "settings": {"runs": 1, "max_tokens": 8, "gpu_layers": 0, "port": free_port(), "context_tokens": lengths}}
    path = folder / "long.json"
    path.write_text(json.dumps(config))
    return path


def test_a_length_the_models_cannot_take_is_refused_before_any_server_starts(models, llama_bin, tmp_path):
    before = llama_server_pids()
    results = tmp_path / "out.json"
    proc = run_cli("sweep.py", "--config", str(_config(tmp_path, models, [512, 9000])), "--results", str(results))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "$.settings.context_tokens: 9,000: target '135M Q4_1'" in proc.stderr
    assert "more than the 8,192 the target" in proc.stderr and "at most 8,104" in proc.stderr
    assert not results.exists() and not (llama_server_pids() - before)
    proc = run_cli("bench.py", "--target", models["base"], "--draft", models["draft-trunc"], "--context-tokens", "9000",
                   "--gpu-layers", "0")
    assert proc.returncode == 2 and "--context-tokens 9000" in proc.stderr and "the 8,192 the target" in proc.stderr
    assert "--context-tokens of at most" in proc.stderr and not (llama_server_pids() - before)
