"""Model-free methods, hybrids and clean baselines on the real llama-server (the forged family):
mechanics, not speed. A code-edit prompt makes the answer repeat the prompt, so n-gram methods draft."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from draftbench.backends.llamacpp.backend import LlamaCppBackend
from draftbench.config.prompts import resolve_prompts
from draftbench.measure.sequential import MeasureOptions
from draftbench.sweep import CombinationRunner, RunnerIO, Sweep, plan
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.console import Reporter

from helpers import run_cli

pytestmark = pytest.mark.llama      # real servers: not in `make check`, one at a time in `make test`

# Short n-grams: a 135M model's answer copies only stretches of the prompt (the defaults want 12–48 tokens).
NGRAM_SIMPLE = {"ngram_simple_size_n": 3, "ngram_simple_size_m": 16}
NGRAM_MOD = {"ngram_mod_n_match": 4, "ngram_mod_n_min": 2, "ngram_mod_n_max": 16}


def config(models, tmp_path, candidates, drafts=(), max_tokens=40):
    return validate_config({
        "name": "methods", "backend": "llamacpp",
        "targets": [{"label": "135M", "path": models["base"]}],
        "drafts": [{"label": label, "path": models[key]} for label, key in drafts],
        "candidates": candidates,
        "settings": {"runs": 1, "stages": 1, "warmup": 0, "max_tokens": max_tokens, "prompts": ["code-edit"], "gpu_layers": 0,
                     "ctx_size": 2048, "port": 0, "startup_timeout_s": 300}}, source=str(tmp_path / "c.json"),
        base_dir=str(tmp_path))


def test_code_edit_with_ngram_methods_and_a_baseline_that_proves_it_did_not_speculate(models, tmp_path):
    cfg = config(models, tmp_path, [{"label": "ngram-simple", "method": "ngram-simple", "params": NGRAM_SIMPLE},
                                    {"label": "ngram-mod", "method": "ngram-mod", "params": NGRAM_MOD}])
    path = tmp_path / "r.json"
    Sweep(cfg, path, None, reporter=Reporter()).run()
    rows = {r["draft"]: r for r in json.loads(path.read_text())["results"]}

    baseline = rows[None]
    assert baseline["status"] == "ok" and baseline["active_methods"] == []      # /slots: speculative.types none
    command = baseline["server"]["command"]
    assert command[command.index("--spec-type") + 1] == "none" and command[-2:] == ["-lv", "4"]
    assert baseline["method_stats"] is None and baseline["draft_n"] is None

    for method in ("ngram-simple", "ngram-mod"):
        row = rows[method]
        assert row["status"] == "ok", row["reason"]
        assert row["active_methods"] == [method] and row["candidate"]["method"] == [method]
        assert row["draft_n"] > 0 and row["speculation_active"] is True
        stats = row["method_stats"][method]
        assert set(row["method_stats"]) == {method}
        # the log's per-method counters and the response's timings count the same drafted tokens
        assert stats["gen_tokens"] == row["draft_n"] and stats["acc_tokens"] == row["draft_n_accepted"]
        # one request per stage: as many stages run as the verdict needs (the noise decides)
        measured = len(row["requests"])
        assert stats["calls_draft"] > 0 and stats["requests"] == measured >= 1
        request = row["requests"][0]
        assert request["category"] == "code-edit" and method in request["draft_details"]["methods"]
        assert row["by_category"]["code-edit"]["n"] == measured


def test_a_hybrid_records_both_of_its_components(models, tmp_path):
    hybrid = {"label": "57M + ngram-mod", "draft": "57M", "method": ["draft-simple", "ngram-mod"],
              "params": dict(NGRAM_MOD, draft_max=4)}
    cfg = config(models, tmp_path, [hybrid], drafts=(("57M", "draft-trunc"),), max_tokens=32)
    combo = next(c for c in plan(cfg) if c.candidate and c.candidate.label == "57M + ngram-mod")
    runner = CombinationRunner(LlamaCppBackend(), "llamacpp", cfg.settings, resolve_prompts(["code-edit"]),
                               MeasureOptions(runs=1, warmup=0, max_tokens=32), RunnerIO(tmp_path / "logs"))
    row = runner.run(combo, 1, {})
    assert row.ok, row.reason
    assert set(row.active_methods) == {"draft-simple", "ngram-mod"}
    assert set(row.method_stats) == {"draft-simple", "ngram-mod"}
    assert row.method_stats["draft-simple"]["gen_tokens"] > 0            # the draft model drafted too
    command = row.server["command"]
    assert command[command.index("--spec-type") + 1] == "draft-simple,ngram-mod" and "-md" in command
    assert row.candidate == {"label": "57M + ngram-mod", "method": ["draft-simple", "ngram-mod"], "draft": "57M",
                             "params": {"draft_max": 4, **NGRAM_MOD}}


def test_the_example_config_is_valid_and_a_type_the_binary_lacks_exits_2_listing_its_types(llama_bin, tmp_path):
    """configs/example_methods.json as shipped plans its 7 rows; the same config naming a spec type this
    llama-server lacks exits 2 before anything starts, listing the types read from the binary's --help."""
    shipped = Path(__file__).resolve().parents[1] / "configs" / "example_methods.json"
    proc = run_cli("sweep.py", "--config", str(shipped), "--results", str(tmp_path / "r.json"), "--dry-run",
                   env={"DRAFTBENCH_LLAMA_SERVER": llama_bin})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "7 combinations" in proc.stdout and "135M + ngram-mod n_match=8" in proc.stdout

    config = json.loads(shipped.read_text())
    config["candidates"][1]["method"] = "ngram-foo"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(config))
    proc = run_cli("sweep.py", "--config", str(bad), "--results", str(tmp_path / "r.json"),
                   env={"DRAFTBENCH_LLAMA_SERVER": llama_bin})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("Error:") and "$.candidates[1].method" in proc.stderr
    assert "'ngram-foo' is not a speculative type this llama-server offers" in proc.stderr
    for offered in ("draft-simple", "ngram-simple", "ngram-map-k", "ngram-mod", "ngram-cache"):
        assert offered in proc.stderr
    assert not (tmp_path / "r.json").exists() and "Traceback" not in proc.stderr
