"""Concurrency levels against the real llama-server on the forged family, at N ∈ {1, 2}: the server gets N
slots of ctx_size each, N streams really overlap, per-request (per-slot) counters add up to the server's
totals, and the results file, console, report and bench.py carry the level."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from draftbench.config.prompts import BUILTIN_PROMPTS
from draftbench.lifetime.process import free_port
from draftbench.measure.concurrent import run_streams
from draftbench.measure.sequential import MeasureOptions

from helpers import pairs_accounted_for, run_cli

pytestmark = pytest.mark.llama

CTX = 512
# One thread per server: on a shared, oversubscribed machine llama.cpp's threads spin-wait on each other
# (measured here: 0.3 tok/s with 2 threads vs 9 tok/s with 1 at load 16 on 2 cores). Mechanisms only.
ONE_THREAD = ("--threads", "1")


def overlapping(timeline: list[dict]) -> bool:
    spans = [(t["start_s"], t["end_s"]) for t in timeline]
    return any(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(spans) for b in spans[i + 1:])


def test_two_slots_two_overlapping_streams_and_counters_that_add_up(start_llama, models):
    server = start_llama(models["base"], models["base"], ctx_size=CTX, concurrency=2, extra_args=ONE_THREAD)
    cmd = server.command
    assert cmd[cmd.index("-np") + 1] == "2" and cmd[cmd.index("-c") + 1] == str(2 * CTX)
    slots = server.slot_states()
    assert [s.n_ctx for s in slots] == [CTX, CTX]            # each slot keeps ctx_size
    options = MeasureOptions(runs=1, warmup=1, max_tokens=16, request_timeout_s=600, stall_timeout_s=300)
    level = run_streams(server, list(BUILTIN_PROMPTS[:2]), options, streams=2)
    load = level.load
    assert [(r.prompt_id, r.run) for r in level.records] == [(p.id, 0) for p in BUILTIN_PROMPTS[:2]]
    assert load["in_flight_max"] == 2 and overlapping(load["timeline"])
    assert {t["stream"] for t in load["timeline"]} == {0, 1}
    side = load["server"]
    # the server batched both: more than one busy slot per decode step on average over the level
    assert side["busy_slots_per_decode"] > 1.0
    # each request's timings are its slot's; together they are exactly the server's totals
    assert set(side["checks"]) == {"prompt_tokens", "output_tokens", "draft_tokens", "accepted_tokens"}
    assert side["consistent"] is True, side["checks"]
    assert side["checks"]["draft_tokens"]["server"] > 0 and side["window"]["verify_steps"] > 0
    assert side["checks"]["output_tokens"]["server"] == sum(r.completion_tokens for r in level.records)
    # per-request verify steps cannot be told apart with two slots busy: never guessed
    assert all(r.verify_steps is None and r.draft_n is not None for r in level.records)


def write_config(folder: Path, models: dict, **settings) -> Path:
    config = {
        "name": "levels", "hardware": "test-2core", "backend": "llamacpp", "model_family": "SmolLM2 (forged)",
        "targets": [{"label": "135M target", "path": models["base"]}],
        "drafts": [{"label": "135M Q4_1", "path": models["base"]}],
        "settings": {"runs": 1, "stages": 1, "max_tokens": 16, "ctx_size": CTX, "gpu_layers": 0, "port": free_port(),
                     "prompts": ["code", "json"], "concurrency": [1, 2], "request_timeout_s": 600,
                     "stall_timeout_s": 300, "extra_args": list(ONE_THREAD), **settings},
    }
    path = folder / "levels.json"
    path.write_text(json.dumps(config, indent=2))
    return path


def test_a_sweep_over_two_levels_end_to_end(models, tmp_path):
    results = tmp_path / "levels-out.json"
    proc = run_cli("sweep.py", "--config", str(write_config(tmp_path, models)), "--results", str(results),
                   timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    # one stream runs in the target's stages (one interleaved stage here); the other level runs after them in plan
    # order, numbered on its own
    assert "[1/≤1] 135M target + 135M Q4_1 [stage 1/1, beside the stage's baseline server]" in out
    assert "[1/2] 135M target (baseline) [2 streams]" in out and "[2/2] 135M target + 135M Q4_1 [2 streams]" in out
    assert "2 streams:" in out and "tok/s in total" in out
    data = json.loads(results.read_text())
    rows = {(r["role"], r["concurrency"]): r for r in data["results"]}
    assert set(rows) == {("baseline", 1), ("speculative", 1), ("baseline", 2), ("speculative", 2)}
    for (_role, n), row in rows.items():
        cmd = row["server"]["command"]
        assert cmd[cmd.index("-np") + 1] == str(n) and cmd[cmd.index("-c") + 1] == str(n * CTX)
        assert row["status"] == "ok" and len(row["requests"]) == 2
        if n == 1:
            assert row["load"] is None                                    # one stream: as before
        else:
            assert row["load"]["server"]["consistent"] is True and overlapping(row["load"]["timeline"])
            assert [s["n_ctx"] for s in row["load"]["server"]["slots"]] == [CTX, CTX]
    spec2 = rows[("speculative", 2)]
    assert spec2["speculation_active"] is True and spec2["verify_steps"] > 0 and spec2["mean_accepted_len"] > 1
    # paired with the 2-stream baseline, prompt by prompt: two pairs planned (a busy machine may leave some out)
    assert pairs_accounted_for(spec2, rows[("baseline", 2)]) == 2
    entry = data["summary"]["targets"][0]
    assert entry["crossover"]["levels"] == [1, 2] and "Under load" in entry["verdict"]
    page = results.with_suffix(".html").read_text()
    for chart in ("chart-concurrency-speedup", "chart-concurrency-throughput", "chart-concurrency-latency"):
        assert f'id="{chart}-section"' in page


def test_bench_concurrency_against_running_servers(start_llama, models, tmp_path):
    one_slot = start_llama(models["base"], ctx_size=CTX, extra_args=ONE_THREAD)
    two_slots = start_llama(models["base"], models["base"], ctx_size=CTX, concurrency=2, extra_args=ONE_THREAD)
    out_json = tmp_path / "bench.json"
    proc = run_cli("bench.py", "--url", one_slot.base_url, "--compare-url", two_slots.base_url, "--concurrency", "2",
                   "--requests", "2", "--max-tokens", "16", "--request-timeout", "600", "--json", str(out_json),
                   timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "2 concurrent streams" in out
    assert "Note: baseline has 1 slot, so at most 1 of the 2 streams run at once" in out
    assert out.count("aggregate tok/s") == 2 and "Aggregate  :" in out
    assert "per-request counters add up to the server's totals" in out
    data = json.loads(out_json.read_text())
    assert data["settings"]["concurrency"] == 2
    spec = data["results"][1]
    assert spec["concurrency"] == 2 and spec["load"]["server"]["busy_slots_per_decode"] > 1.0
    assert spec["acceptance_rate"] is not None and spec["verify_steps"] > 0
    assert data["results"][0]["load"]["server"]["slots"] == [{"id": 0, "n_ctx": CTX}]
