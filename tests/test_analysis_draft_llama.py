"""Inside a draft with the real llama-server on the forged SmolLM2 family: per-position counts, the
mean accepted length as the server defines it, the one-run k prediction against measured k, and
ceiling runs at synthetic acceptance. Assert mechanisms, never speed: the machine is shared."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path

import pytest
from draftbench.config.prompts import BUILTIN_PROMPTS
from draftbench.lifetime.process import free_port
from draftbench.measure.sequential import MeasureOptions, run_prompts

from helpers import run_cli

pytestmark = pytest.mark.llama

# llama-server's own line per request: "draft acceptance = 0.85417 (   41 accepted /    48 generated), mean len =  7.83"
SERVER_LINE = re.compile(r"draft acceptance = [0-9.]+ \(\s*(\d+) accepted /\s*(\d+) generated\), mean len =\s*([0-9.]+)")


def test_per_position_counts_add_up_and_mean_length_is_the_servers(start_llama, models):
    server = start_llama(models["target-2x"], models["base"], draft_max=4, ctx_size=1024)
    # no warm-up: the first request runs before llama-server exports any per-position series
    records = run_prompts(server, list(BUILTIN_PROMPTS[:2]), MeasureOptions(runs=1, warmup=0, max_tokens=16))
    lines = SERVER_LINE.findall(Path(server.log_path).read_text(errors="replace"))
    assert len(lines) == len(records) == 2, lines
    for record, (accepted, drafted, mean_len) in zip(records, lines):
        per_pos = record.accepted_per_pos
        assert per_pos is not None and len(per_pos) == 4                  # one entry per draft position (k)
        assert sum(per_pos) == record.draft_n_accepted == int(accepted)   # every accepted token has one position
        assert all(a >= b for a, b in itertools.pairwise(per_pos))       # position i needs every one before it
        assert record.draft_n == int(drafted) and record.verify_steps and per_pos[0] <= record.verify_steps
        # our mean accepted length is llama-server's "mean len": 1 + accepted / verify steps
        assert round(1 + record.draft_n_accepted / record.verify_steps, 2) == pytest.approx(float(mean_len), abs=0.006)


def _config(folder: Path, models: dict, name: str, draft_max) -> Path:
    config = {"name": name, "hardware": "test-2core", "backend": "llamacpp", "model_family": "SmolLM2 (forged)",
              "targets": [{"label": "241M Q4_1", "path": models["target-2x"]}],
              "drafts": [{"label": "135M Q4_1", "path": models["base"]}],
              "settings": {"runs": 1, "stages": 1, "warmup": 0, "max_tokens": 24, "ctx_size": 1024, "gpu_layers": 0,
                           "port": free_port(), "prompts": ["code"], "draft_max": draft_max}}
    path = folder / f"{name}-{'-'.join(map(str, draft_max if isinstance(draft_max, list) else [draft_max]))}.json"
    path.write_text(json.dumps(config, indent=2))
    return path


def test_one_run_prediction_against_measured_k_then_the_ceiling(models, tmp_path):
    results = tmp_path / "inside.json"
    proc = run_cli("sweep.py", "--config", str(_config(tmp_path, models, "inside", [2, 4, 8])), "--results",
                   str(results), "--no-chart", timeout=1500)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {(r["role"], r["draft_max"]): r for r in json.loads(results.read_text())["results"]}
    for k in (2, 4, 8):
        row = rows[("speculative", k)]
        assert len(row["accepted_per_pos"]) == k and sum(row["accepted_per_pos"]) == row["draft_n_accepted"]
        # one short request per k: too few drafts to diagnose (issue 37), and said so with the counts
        assert row["diagnosis"]["code"] in ("early_rejections", "acceptance_decays", "acceptance_holds",
                                            "too_few_drafts")
        if row["diagnosis"]["code"] == "too_few_drafts":
            assert f"it drafted only {row['draft_n']} tokens in {row['verify_steps']} drafts" in \
                row["diagnosis"]["message"]
    pred = rows[("speculative", 8)]["k_prediction"]
    assert pred["from_k"] == 8 and [p["k"] for p in pred["per_k"]] == list(range(1, 9))
    compared = {p["k"]: p for p in pred["per_k"] if p["measured_tps"] is not None}
    assert set(compared) == {2, 4} and pred["compared"] == 2
    assert all(math.isfinite(p["error_pct"]) for p in compared.values())
    assert pred["per_k"][7]["predicted_tps"] == pytest.approx(rows[("speculative", 8)]["mean_tps"], abs=1e-3)
    # the greedy-prefix premise, measured: tokens per step at k from the k=8 counts vs the k run itself
    premise = {k: (pred["per_k"][k - 1]["tokens_per_step"], rows[("speculative", k)]["mean_accepted_len"])
               for k in (2, 4)}
    print(f"\none-run prediction from k=8: {json.dumps(compared)}; tokens/step predicted vs measured: {premise}; "
          f"mean error {pred['mean_abs_error_pct']}%")
    assert "Best k from one run, 241M Q4_1 + 135M Q4_1 (predicted from k=8" in proc.stdout
    assert "Acceptance by position: " in proc.stdout and "Diagnosis: " in proc.stdout

    # The same results file, resumed with --ceiling for k=8: only the two synthetic runs start.
    proc = run_cli("sweep.py", "--config", str(_config(tmp_path, models, "inside", 8)), "--results", str(results),
                   "--ceiling", timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the ceiling runs are not candidates (never ranked): each runs on a server of its own, after the stages
    assert proc.stdout.count("Starting server") == 2
    data = json.loads(results.read_text())
    by_level = {r["synthetic"]["level"]: r for r in data["results"] if r["role"] == "ceiling"}
    real = next(r for r in data["results"] if r["role"] == "speculative" and r["draft_max"] == 8)
    assert real["requests"] == rows[("speculative", 8)]["requests"]      # the measured k=8 row is not measured again
    full, measured = by_level["full"], by_level["measured"]
    # the ceiling runs record their settings, and the server got exactly those
    assert full["synthetic"] == {"level": "full", "synth_len": 9.0, "k": 8, "from_mean_accepted_len":
                                 real["mean_accepted_len"]}
    assert measured["synthetic"]["synth_len"] == pytest.approx(real["mean_accepted_len"], abs=1e-4)
    for row in (full, measured):
        command = row["server"]["command"]
        assert float(command[command.index("--spec-synth-len") + 1]) == row["synthetic"]["synth_len"]
        assert row["candidate"]["params"]["synth_len"] == row["synthetic"]["synth_len"]
        assert row["equivalence"] is None and row["status"] == "ok"
        log = Path(row["server"]["log"]).read_text(errors="replace")
        assert "synthetic speculative acceptance is enabled" in log
    # full acceptance: every drafted token accepted, except a drafted end-of-generation token, which llama.cpp
    # never accepts at synthetic rates
    assert full["draft_n_accepted"] >= full["draft_n"] - 1 and full["acceptance_rate"] > 0.9
    assert real["ceiling"]["full_tps"] == full["mean_tps"] and "of what its cost allows" in real["ceiling"]["text"]
    summary = data["summary"]["targets"][0]
    assert summary["recommended_draft"] in (None, "135M Q4_1")            # a ceiling row is never recommended
    print(f"ceiling: {real['ceiling']['text']}; verdict: {summary['verdict']}")
    assert results.with_suffix(".html").exists()
    page = results.with_suffix(".html").read_text()
    assert "Each draft against its ceiling" in page and "Acceptance by draft position" in page


def test_dry_run_plans_the_ceiling_and_other_backends_refuse_it(models, tmp_path):
    config = _config(tmp_path, models, "plan", 4)
    proc = run_cli("sweep.py", "--config", str(config), "--ceiling", "--dry-run")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[3/4] 241M Q4_1 + 135M Q4_1 [synthetic: its measured acceptance]" in proc.stdout
    assert "[4/4] 241M Q4_1 + 135M Q4_1 [synthetic: full acceptance]" in proc.stdout
    data = json.loads(config.read_text())
    data.update(backend="vllm", targets=[{"label": "8B", "path": "org/target"}],
                drafts=[{"label": "1B", "path": "org/draft"}])
    config.write_text(json.dumps(data))
    proc = run_cli("sweep.py", "--config", str(config), "--ceiling", "--dry-run")
    assert proc.returncode == 2 and proc.stderr.count("\n") <= 3, proc.stdout + proc.stderr
    assert "--ceiling: vllm cannot run drafts at synthetic acceptance" in proc.stderr
    assert "Traceback" not in proc.stderr
