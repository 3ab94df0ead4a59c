"""Stages on the real llama-server: fresh servers at every stage, and no replayed answers. ngram-mod
remembers earlier answers on the same server (a /slots erase does not reset it), so a repetition of a
prompt on one server is served from memory; every stage starts its servers afresh, so when a small prompt
set is measured again at the next stage, its counts match first exposure. With a larger set every stage
draws fresh prompts. Mechanics, not speed."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from draftbench.backends.llamacpp.backend import LlamaCppBackend
from draftbench.config.prompts import resolve_prompts
from draftbench.measure.sequential import MeasureOptions, run_prompts
from draftbench.sweep import CombinationRunner, RunnerIO, Sweep, plan
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.console import Reporter

NGRAM_MOD = {"ngram_mod_n_match": 4, "ngram_mod_n_min": 2, "ngram_mod_n_max": 16}
PROMPTS = ["code-edit", "prose"]


@pytest.fixture(autouse=True)
def every_planned_stage(monkeypatch):
    """These tests check what a stage runs on, not the rule that ends a target: on a loaded machine a slow
    ngram-mod is rightly decided after one stage, which would leave no second stage to check."""
    from draftbench.analysis.decision import Decision
    monkeypatch.setattr(Decision, "final", lambda self, more=0: False)


def config(models, tmp_path, **settings):
    return validate_config({
        "name": "replay", "backend": "llamacpp", "targets": [{"label": "135M", "path": models["base"]}],
        "candidates": [{"label": "ngram-mod", "method": "ngram-mod", "params": NGRAM_MOD}],
        "settings": {"warmup": 1, "max_tokens": 48, "prompts": PROMPTS, "gpu_layers": 0, "stages": 3,
                     "search": "exhaustive", "ctx_size": 1024, "port": 0, "startup_timeout_s": 300, **settings}},
        source=str(tmp_path / "c.json"), base_dir=str(tmp_path))


@pytest.mark.llama
def test_ngram_mod_counts_at_every_stage_match_first_exposure(models, tmp_path):
    path = tmp_path / "r.json"
    Sweep(config(models, tmp_path), path, None, reporter=Reporter()).run()
    rows = {r["draft"]: r for r in json.loads(path.read_text())["results"]}
    ngram = rows["ngram-mod"]
    assert ngram["status"] == "ok", ngram["reason"]
    assert ngram["design"]["name"] == "interleaved" and ngram["design"]["stateful"] is True
    by_prompt: dict[str, list[dict]] = {}
    for r in ngram["requests"]:
        by_prompt.setdefault(r["prompt_id"], []).append(r)
    compared = 0
    for pid, reqs in by_prompt.items():
        assert len(reqs) >= 2 and len({r["session"] for r in reqs}) == len(reqs)   # a fresh server per stage
        assert [r["block"] for r in reqs] == list(range(len(reqs)))
        assert all(r["seen_before"] is False for r in reqs)
        first = reqs[0]
        for again in reqs[1:]:
            if again["text"] == first["text"]:          # the same answer: the same drafts, as on first exposure
                assert (again["draft_n"], again["draft_n_accepted"]) == (first["draft_n"], first["draft_n_accepted"]), pid
                compared += 1
    assert compared >= 2
    assert sum(r["draft_n"] for r in ngram["requests"]) > 0, "ngram-mod drafted nothing: the prompts no longer show it"
    # the baseline ran beside it, one fresh server per stage, never speculating
    baseline = rows[None]
    stages = {r["block"] for r in ngram["requests"]}
    assert baseline["active_methods"] == [] and len({r["session"] for r in baseline["requests"]}) == len(stages)
    assert all(r["beside"] in {q["session"] for q in ngram["requests"]} for r in baseline["requests"])


@pytest.mark.llama
def test_every_stage_draws_fresh_prompts_on_fresh_servers(models, tmp_path):
    """With more prompts than two stages need, no prompt is measured twice and every stage is a new pair."""
    prompt_file = tmp_path / "prompts.txt"
    prompt_file.write_text("\n".join(f"Write one sentence about the number {i}." for i in range(8)))
    path = tmp_path / "fresh.json"
    Sweep(config(models, tmp_path, prompts=str(prompt_file), prompts_per_stage=4, stages=2, max_tokens=24), path,
          None, reporter=Reporter()).run()
    rows = {r["draft"]: r for r in json.loads(path.read_text())["results"]}
    ngram = rows["ngram-mod"]
    assert ngram["status"] == "ok", ngram["reason"]
    prompts = [r["prompt_id"] for r in ngram["requests"]]
    assert len(prompts) == len(set(prompts))                        # fresh prompts: none twice
    by_stage: dict[int, set] = {}
    for r in ngram["requests"]:
        by_stage.setdefault(r["block"], set()).add(r["session"])
    assert all(len(s) == 1 for s in by_stage.values())              # one server per stage
    assert len({s for ss in by_stage.values() for s in ss}) == len(by_stage)   # a new one each time
    assert all(r["seen_before"] is False for r in ngram["requests"])


@pytest.mark.llama
def test_one_server_replays_what_it_has_seen(models, tmp_path):
    """The mechanism the design avoids: on one server, the second exposure of the code-edit prompt
    drafts more than the first (ngram-mod answers from memory)."""
    cfg = config(models, tmp_path)
    combo = next(c for c in plan(cfg) if c.candidate is not None)
    prompts = resolve_prompts(["code-edit"])
    options = MeasureOptions(runs=2, warmup=0, max_tokens=48)
    runner = CombinationRunner(LlamaCppBackend(), "llamacpp", cfg.settings, prompts, options, RunnerIO(tmp_path / "logs"))
    spec = runner.launch_spec(combo, 0, tmp_path / "one.log")
    server = runner.launch(replace(spec, port=runner.choose_port(spec.host)))
    try:
        first, again = run_prompts(server, prompts, options)
    finally:
        server.stop()
    assert first.text == again.text
    assert again.draft_n_accepted > first.draft_n_accepted, (first.draft_n_accepted, again.draft_n_accepted)
