"""The adaptive search end to end: sweep.py --search adaptive on the forged SmolLM2 family with the real
llama-server. Mechanisms only (which candidate wins depends on a loaded machine's noise)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from draftbench.analysis.race_outcome import LEADER_NOT_CONFIRMED, NOT_A_SPEEDUP, UNRESOLVED
from draftbench.lifetime.process import free_port

from helpers import llama_server_pids, run_cli

pytestmark = pytest.mark.llama


def write_config(folder: Path, models: dict) -> Path:
    config = {
        "name": "race", "hardware": "test-2core", "backend": "llamacpp", "model_family": "SmolLM2 (forged)",
        "targets": [{"label": "241M Q4_1", "path": models["target-2x"]}],
        "drafts": [{"label": "135M Q4_1", "path": models["base"]}, {"label": "57M trunc8", "path": models["draft-trunc"]}],
        "candidates": [{"label": "ngram-mod", "method": "ngram-mod"}],
        "settings": {"runs": 2, "max_tokens": 16, "ctx_size": 1024, "gpu_layers": 0, "port": free_port(),
                     "prompts": ["code", "json"], "draft_max": [2, 4]},
    }
    path = folder / "race.json"
    path.write_text(json.dumps(config, indent=2))
    return path


def test_adaptive_sweep_races_saves_and_resumes(models, tmp_path):
    config = write_config(tmp_path, models)
    results = tmp_path / "race-results.json"
    proc = run_cli("sweep.py", "--config", str(config), "--results", str(results), "--search", "adaptive",
                   "--budget", "3600")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    print(out)     # shown when a later assertion fails
    # two prompts, two runs: two blocks of two requests; the probe is the first block
    assert "Race: 241M Q4_1: adaptive search over 5 candidates — the probe is block 1 of 2 (2 requests each)" in out
    data = json.loads(results.read_text())
    assert data["settings"]["search"] == "adaptive" and data["settings"]["budget_s"] == 3600
    rows = [r for r in data["results"] if r["role"] == "speculative"]
    assert len(rows) == 5 and {r["status"] for r in rows} <= {"ok", "eliminated"}
    for row in rows:
        # the probe, perhaps the second block, perhaps the confirmation (two more requests on a fresh server)
        assert row["race"]["loads"] >= 1 and 2 <= len(row["requests"]) <= 6 and row["race"]["planned"] == 4
        assert row["race"]["loads"] == len({q["session"] for q in row["requests"]})
        if row["status"] == "eliminated":
            assert row["reason"].startswith("eliminated by the race") and row["speedup"] and row["mean_tps"]
            assert re.search(rf"Eliminated: {re.escape(row['reason'][:40])}", out)
        elif row["speculation_active"] is False:    # e.g. ngram-mod found nothing to draft: never raced
            assert row["race"]["decision"] == "inactive"
        else:
            assert row["race"]["decision"] in (
                "winner", "within the noise floor of the winner", "tied with the winner", "not separated",
                "within the noise floor of the leader", "tied with the leader", UNRESOLVED, LEADER_NOT_CONFIRMED,
                NOT_A_SPEEDUP)
    # every server the sweep started is counted, and none is left running
    # (each block is a server session; in the interleaved design a baseline server beside each candidate's)
    assert data["summary"]["server_loads"] == out.count("Starting server")
    assert f"Server loads: {data['summary']['server_loads']}" in out
    assert not llama_server_pids()
    report = results.with_suffix(".html").read_text()
    assert "eliminated" in report or all(r["status"] == "ok" for r in rows)
    # run again: the race is over, nothing is measured twice
    again = run_cli("sweep.py", "--config", str(config), "--results", str(results), "--search", "adaptive")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Starting server" not in again.stdout
    assert [r["requests"] for r in json.loads(results.read_text())["results"]] == [r["requests"] for r in data["results"]]
