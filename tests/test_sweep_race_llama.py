"""The adaptive search end to end: sweep.py --search adaptive on the forged SmolLM2 family with the real
llama-server, in stages. Mechanisms only (which candidate wins depends on a loaded machine's noise)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from draftbench.lifetime.process import free_port

from helpers import llama_server_pids, run_cli

pytestmark = pytest.mark.llama


def write_config(folder: Path, models: dict) -> Path:
    config = {
        "name": "race", "hardware": "test-2core", "backend": "llamacpp", "model_family": "SmolLM2 (forged)",
        "targets": [{"label": "241M Q4_1", "path": models["target-2x"]}],
        "drafts": [{"label": "135M Q4_1", "path": models["base"]}, {"label": "57M trunc8", "path": models["draft-trunc"]}],
        "candidates": [{"label": "ngram-mod", "method": "ngram-mod"}],
        "settings": {"max_tokens": 16, "ctx_size": 1024, "gpu_layers": 0, "port": free_port(), "stages": 3,
                     "prompts": ["code", "json"], "draft_max": [2, 4]},
    }
    path = folder / "race.json"
    path.write_text(json.dumps(config, indent=2))
    return path


def test_adaptive_sweep_races_in_stages_saves_and_resumes(models, tmp_path):
    config = write_config(tmp_path, models)
    results = tmp_path / "race-results.json"
    proc = run_cli("sweep.py", "--config", str(config), "--results", str(results), "--search", "adaptive",
                   "--budget", "3600")
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    out = proc.stdout
    print(out)     # shown when a later assertion fails
    data = json.loads(results.read_text())
    assert data["settings"]["search"] == "adaptive" and data["settings"]["budget_s"] == 3600
    rows = [r for r in data["results"] if r["role"] == "speculative"]
    assert len(rows) == 5 and {r["status"] for r in rows} <= {"ok", "eliminated", "error"}
    for row in rows:
        stages = sorted({q["block"] for q in row["requests"]})
        assert stages == list(range(len(stages))) and row["design"]["horizon"] == 3
        for stage in stages:     # one fresh server per candidate and stage, each prompt once on it
            reqs = [q for q in row["requests"] if q["block"] == stage]
            assert len({q["session"] for q in reqs}) == 1 and len({q["prompt_id"] for q in reqs}) == len(reqs)
        if row["status"] == "eliminated":
            assert row["reason"].startswith("eliminated: left at look") and row["speedup"] and row["mean_tps"]
    entry = data["summary"]["targets"][0]
    assert entry["stages"]["decision"] in ("recommend", "nothing gains", "shortlist", "unresolved")
    assert re.search(r"Race: 241M Q4_1: look 1 — best so far ", out)
    # every server the sweep started is counted, and none is left running
    assert data["summary"]["server_loads"] == out.count("Starting server")
    assert f"Server loads: {data['summary']['server_loads']}" in out
    assert not llama_server_pids()
    # run again: what was decided stays decided, nothing is measured twice
    again = run_cli("sweep.py", "--config", str(config), "--results", str(results), "--search", "adaptive",
                    "--budget", "3600")
    assert again.returncode in (0, 3), again.stdout + again.stderr
    before = {(r["draft"], r["draft_max"]): r["requests"] for r in data["results"]}     # k = 2 and 4: two rows
    for row in json.loads(results.read_text())["results"]:
        kept = before[(row["draft"], row["draft_max"])]
        assert row["requests"][: len(kept)] == kept
