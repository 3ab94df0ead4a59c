"""Concurrency levels with vLLM, against tests/fakes/fake_vllm.py (vLLM cannot run here): --max-num-seqs N,
N streams at once, and the level's acceptance from vLLM's Prometheus totals when responses carry none."""

from __future__ import annotations

import dataclasses
import json

from draftbench.backends.vllm.backend import VLLMBackend

from helpers import run_cli
from test_backends_vllm import DRAFT, TARGET, fake, make_spec  # noqa: F401  (fake is a fixture)


def sweep(fake, tmp_path, **settings) -> dict:  # noqa: F811
    config = {
        "name": "fake-vllm-levels", "hardware": "test", "backend": "vllm", "model_family": "fake",
        "targets": [{"label": "8B", "path": TARGET}], "drafts": [{"label": "0.6B", "path": DRAFT}],
        "settings": {"vllm_bin": str(fake.bin), "runs": 1, "warmup": 1, "max_tokens": 24, "draft_max": 4,
                     "port": 0, "prompts": ["code", "json", "list", "prose"], "startup_timeout_s": 30,
                     "concurrency": [1, 2], "design": "sequential", **settings},    # one server per row
    }
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps(config))
    results = tmp_path / "out.json"
    proc = run_cli("sweep.py", "--config", str(path), "--results", str(results), timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 streams:" in proc.stdout and "tok/s in total" in proc.stdout
    return json.loads(results.read_text())


def test_levels_get_max_num_seqs_and_the_levels_totals(fake, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("FAKE_VLLM_LOAD_S", "0.05")
    monkeypatch.setenv("FAKE_VLLM_STEP_S", "0.02")       # requests long enough to overlap visibly
    data = sweep(fake, tmp_path)
    argv = fake.argv()
    # the one-stream servers (one per row and stage, as many stages as the verdict needs), then a level's
    one_stream = {r["session"] for row in data["results"] if row["concurrency"] == 1 for r in row["requests"]}
    assert ["--max-num-seqs" in a for a in argv] == [False] * len(one_stream) + [True, True]
    assert all(a[a.index("--max-num-seqs") + 1] == "2" for a in argv if "--max-num-seqs" in a)
    rows = {(r["draft"], r["concurrency"]): r for r in data["results"]}
    good = rows[("0.6B", 2)]
    load = good["load"]
    assert load["streams"] == 2 and load["in_flight_max"] == 2
    spans = [(t["start_s"], t["end_s"]) for t in load["timeline"]]
    assert any(a[0] < b[1] and b[0] < a[1] for a in spans for b in spans if a is not b)
    # no per-request statistics: acceptance comes from vLLM's totals over the level (4 requests × 24 tokens)
    assert load["server"]["window"]["draft_tokens"] == 4 * 28 and load["server"]["checks"]["output_tokens"]["match"]
    assert (good["draft_n"], good["draft_n_accepted"], good["verify_steps"]) == (112, 64, 28)
    assert good["acceptance_rate"] == 0.5714 and good["mean_accepted_len"] == 3.286
    assert all(r["verify_steps"] is None and r["draft_n"] is None for r in good["requests"])
    # the one-stream rows are measured one request at a time, exactly as before
    one = rows[("0.6B", 1)]
    assert one["load"] is None and [r["draft_n"] for r in one["requests"]][:4] == [28, 28, 28, 28]
    # the set's 4 prompts at every stage the verdict needed (a loaded machine needs more stages: CI shares its machine)
    assert len(one["requests"]) % 4 == 0 and {r["draft_n"] for r in one["requests"]} == {28}
    assert good["speedup"]["n_pairs"] == 4 and rows[(None, 2)]["load"]["server"]["consistent"] is True
    assert data["summary"]["targets"][0]["crossover"]["levels"] == [1, 2]


def test_per_request_metrics_add_up_to_vllms_totals(fake, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("FAKE_VLLM_LOAD_S", "0.05")
    monkeypatch.setenv("FAKE_VLLM_STEP_S", "0.01")
    data = sweep(fake, tmp_path, vllm_per_request_metrics="summary")
    good = next(r for r in data["results"] if r["draft"] == "0.6B" and r["concurrency"] == 2)
    checks = good["load"]["server"]["checks"]
    assert set(checks) == {"prompt_tokens", "output_tokens", "draft_tokens", "accepted_tokens"}
    assert all(c["match"] for c in checks.values()), checks
    assert [r["draft_source"] for r in good["requests"]] == ["response"] * 4


def test_bench_concurrency_against_a_running_vllm(fake, tmp_path, monkeypatch):  # noqa: F811
    """bench.py --concurrency 2 --backend vllm: two streams overlap on a server started with --max-num-seqs 2,
    and acceptance comes from vLLM's totals over the level (its responses carry no per-request counts)."""
    monkeypatch.setenv("FAKE_VLLM_LOAD_S", "0.05")
    monkeypatch.setenv("FAKE_VLLM_STEP_S", "0.02")
    spec = make_spec(tmp_path, draft=DRAFT, draft_max=4, vllm_bin=str(fake.bin))
    spec = dataclasses.replace(spec, concurrency=2)
    out_json = tmp_path / "bench.json"
    with VLLMBackend().launch(spec) as server:
        proc = run_cli("bench.py", "--url", server.base_url, "--backend", "vllm", "--model", TARGET,
                       "--concurrency", "2", "--requests", "4", "--max-tokens", "24", "--json", str(out_json),
                       timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--max-num-seqs" in fake.argv()[0] and fake.argv()[0][fake.argv()[0].index("--max-num-seqs") + 1] == "2"
    out = proc.stdout
    assert "aggregate tok/s" in out and "per-request counters add up to the server's totals" in out
    assert "acceptance         57.1% (64 accepted / 112 drafted), 3.29 tokens per verify step" in out
    row = json.loads(out_json.read_text())["results"][0]
    assert row["concurrency"] == 2 and row["load"]["in_flight_max"] == 2
    assert row["load"]["server"]["slots"] is None          # vLLM has no /slots: not guessed
