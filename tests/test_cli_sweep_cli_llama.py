"""Real sweeps of the forged SmolLM2 family through sweep.py, as a user runs them."""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from draftbench.lifetime.process import free_port

from helpers import REPO, llama_server_pids, run_cli, saved_rows, wait_for

pytestmark = pytest.mark.llama

from helpers import REFERENCE  # noqa: E402


def write_config(folder: Path, models: dict, *, drafts=("good", "bad", "missing"), name="t", **settings) -> Path:
    available = {"good": ("135M Q4_1", models["base"]), "bad": ("57M trunc8", models["draft-trunc"]),
                 "missing": ("135M missing", str(folder / "not-downloaded-yet.gguf")),
                 "badvocab": ("135M badvocab", models["draft-badvocab"]),
                 "corrupt": ("135M corrupt", models["corrupt"])}
    config = {
        "name": name, "hardware": "test-2core", "backend": "llamacpp", "model_family": "SmolLM2 (forged)",
        "targets": [{"label": "241M Q4_1", "path": models["target-2x"]}],
        "drafts": [{"label": available[d][0], "path": available[d][1]} for d in drafts],
        "settings": {"stages": 2, "max_tokens": 16, "ctx_size": 1024, "gpu_layers": 0, "port": free_port(),
                     "prompts": ["code", "json"], **settings},
    }
    path = folder / f"{name}.json"
    path.write_text(json.dumps(config, indent=2))
    return path


def rows_by_draft(results_path: Path) -> dict:
    return {r["draft"]: r for r in json.loads(results_path.read_text())["results"] if r["role"] != "control"}


def test_full_sweep_measures_truthfully(models, tmp_path):
    config = write_config(tmp_path, models)
    results = tmp_path / "out.json"
    proc = run_cli("sweep.py", "--config", str(config), "--results", str(results))
    assert proc.returncode == 3, proc.stdout + proc.stderr  # finished, one combination skipped
    out = proc.stdout
    # the default (interleaved) design: no baseline step of its own; each draft is measured in up to two stages
    # (stages=2), beside the stage's baseline server, so at most 3 drafts x 2 stages = 6 steps
    assert "[1/≤6] 241M Q4_1 + 135M Q4_1 [stage 1/2, beside the stage's baseline server]" in out
    assert "Starting server ... ready" in out and "Server stopped" in out
    assert re.search(r"Benchmarking \.\.\. \.+ [0-9.]+ tok/s \(acceptance: \d+%\)", out)
    rows = rows_by_draft(results)
    baseline, good, bad, missing = rows[None], rows["135M Q4_1"], rows["57M trunc8"], rows["135M missing"]
    assert baseline["status"] == "ok" and baseline["acceptance_rate"] is None
    assert good["acceptance_rate"] > 0.5 and good["speculation_active"] is True
    assert bad["acceptance_rate"] < 0.05 and bad["speculation_active"] is True
    assert missing["status"] == "skipped" and "does not exist" in missing["reason"]
    # upstream's keys are all there, and the rows carry what the verdict needs
    for key in ("target", "draft", "mean_tps", "median_tps", "mean_ttft", "mean_total_time", "wall_time",
                "acceptance_rate", "speedup", "equivalence", "requests", "server"):
        assert key in good
    assert good["server"]["command"][good["server"]["command"].index("--spec-type") + 1] == "draft-simple"
    n = len(good["requests"])          # both prompts at every stage measured (one or two: the verdict may decide)
    assert n in (2, 4) and all(r["draft_n"] > 0 for r in good["requests"])
    assert {"ratio", "ci95_low", "ci95_high", "significant"} <= set(good["speedup"])
    # temperature 0: speculative output must equal the target's own output (or say where it differs)
    assert good["equivalence"]["compared"] == n
    assert good["equivalence"]["match_rate"] == 1.0 or good["equivalence"]["mismatches"]
    summary = json.loads(results.read_text())["summary"]["targets"][0]
    assert summary["recommended_draft"] != "57M trunc8"  # the bad draft is never recommended
    assert "Verdict:" in out and summary["verdict"] in out
    assert results.with_suffix(".html").exists()


def test_interrupted_sweep_resumes_only_the_rest(models, tmp_path):
    config = write_config(tmp_path, models, drafts=("good", "bad"), runs=1)
    results = tmp_path / "resume.json"
    before = llama_server_pids()
    proc = subprocess.Popen([sys.executable, "sweep.py", "--config", str(config), "--results", str(results),
                             "--no-chart"], cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        wait_for(lambda: len(saved_rows(results)) >= 2, timeout=600)     # saved: in the file or its journal
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert "Resume with the same command" in out
    wait_for(lambda: not (llama_server_pids() - before), timeout=5)
    saved = json.loads(results.read_text())["results"]
    first_started = {(r["target"], r["draft"]): r["started_at"] for r in saved}

    def measured(rows) -> dict:
        return {(r["target"], r["draft"]): {(q["session"], q["prompt_id"], q["run"], q["decode_tps"])
                                            for q in r["requests"]} for r in rows}

    again = run_cli("sweep.py", "--config", str(config), "--results", str(results), "--no-chart")
    assert again.returncode == 0, again.stdout + again.stderr
    # The default (interleaved) design, two stages of both prompts: each draft beside the stage's baseline
    # server, at most 4 steps. The first (good draft, stage 1: the baseline's and the good draft's rows) was
    # saved before Ctrl-C; its target is not decided, so the resume numbers on from step 2 and never measures
    # step 1 again.
    assert re.search(r"Resuming .*: \d done, \d remaining(, \d of them with stages still to measure)?", again.stdout)
    assert "[1/≤4]" not in again.stdout and "[2/≤4]" in again.stdout, again.stdout
    final = json.loads(results.read_text())["results"]
    assert len(final) == 3 and all(r["status"] == "ok" for r in final)
    assert all(0 in {q["block"] for q in r["requests"]} for r in final)        # every row measured stage 1
    # nothing measured before the interrupt is lost or measured again, and a row keeps when it started
    before_interrupt, after_resume = measured(saved), measured(final)
    assert all(requests <= after_resume[key] for key, requests in before_interrupt.items())
    assert {(r["target"], r["draft"]): r["started_at"] for r in final
            if (r["target"], r["draft"]) in first_started} == first_started


def test_control_baseline_measures_drift_and_raises_the_noise_floor(models, tmp_path):
    """A/A: the target alone, measured again after its draft, tells how much the machine drifted.

    This must hold on any machine, quiet or busy. On a shared machine the two sessions really can
    differ by 30% (seen: +32% [+22%, +44%], the server's own timings agreed), and catching that is
    what the control is for. So the test asserts the mechanism, whatever the machine did: the
    drift is measured with a CI, named in the verdict when it is significant, and raised into the
    noise floor of the speed-ups it applies to; then, with a known drift written into the same
    real rows, the verdict and the floor follow it."""
    from dataclasses import replace

    from draftbench.analysis.row_analysis import measured_drift
    from draftbench.analysis.verdict import analyze
    from draftbench.results.file import load_results, save_results
    config = write_config(tmp_path, models, drafts=("good",), runs=1, control_baseline=True, max_tokens=16,
                          prompts=["code", "json", "list"], warmup=0)
    results = tmp_path / "aa.json"
    proc = run_cli("sweep.py", "--config", str(config), "--results", str(results), "--no-chart")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(results.read_text())["results"]
    control = next(r for r in rows if r["role"] == "control")
    spec = next(r for r in rows if r["role"] == "speculative")
    assert control["status"] == "ok" and isinstance(control["speedup"]["significant"], bool)
    assert control["speedup"]["ci95_low"] <= control["speedup"]["ratio"] <= control["speedup"]["ci95_high"]
    assert control["equivalence"]["match_rate"] == 1.0      # same server, temperature 0: same text, busy or not
    [drift_line] = [line for line in proc.stdout.splitlines() if "Drift vs first baseline" in line]
    loaded = load_results(results)
    drift = measured_drift(loaded, noise_floor=0.02).get("241M Q4_1", 0.0)
    verdict = json.loads(results.read_text())["summary"]["targets"][0]["verdict"]
    if control["speedup"]["significant"]:
        assert drift == pytest.approx(abs(control["speedup"]["ratio"] - 1))
        assert "the machine drifted during the sweep" in verdict and "(not significant)" not in drift_line
    else:
        assert drift == 0.0 and "drifted" not in verdict and "(not significant)" in drift_line
    assert spec["speedup"]["noise_floor"] == pytest.approx(max(0.02, drift))

    # The same real rows, with the control made exactly 1.5x its baseline request by request (a drift
    # no noise can hide): the verdict names it and the speed-up's floor rises to it.
    # Each control request is paired with the baseline request measured beside it (a stage's baseline server
    # answers each prompt once per candidate; ``beside`` names whose), so it is made 1.5x exactly that request.
    baseline_tps = {(r.session, r.prompt_id, r.run, r.beside): r.decode_tps
                    for r in loaded.baseline_for("241M Q4_1").requests}
    control_row = loaded.row(("control", "241M Q4_1", None, None))

    def partner(r, s):
        return baseline_tps.get((s, r.prompt_id, r.run, r.session), baseline_tps.get((s, r.prompt_id, r.run, None)))
    drifted = loaded.with_row(replace(control_row, requests=tuple(
        replace(r, decode_tps=1.5 * statistics.fmean(partner(r, s) for s in r.compared_with))
        for r in control_row.requests)))
    save_results(analyze(drifted), results)
    again = run_cli("sweep.py", "--chart-only", "--results", str(results), "--chart", str(tmp_path / "aa.html"))
    assert again.returncode == 0, again.stderr
    assert "the machine drifted during the sweep" in again.stdout
    floor = measured_drift(analyze(drifted), noise_floor=0.02)["241M Q4_1"]
    assert floor == pytest.approx(0.5, abs=0.01)
    spec_row = analyze(drifted).row(("speculative", "241M Q4_1", "135M Q4_1", None))
    assert spec_row.speedup.noise_floor == pytest.approx(floor) and "drift" in spec_row.speedup.note


def test_theory_with_a_measured_draft_cost(models, tmp_path):
    config = write_config(tmp_path, models, drafts=("good",), runs=1, draft_alone=True, draft_max=[2, 4])
    results = tmp_path / "theory.json"
    proc = run_cli("sweep.py", "--config", str(config), "--results", str(results), "--no-chart")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "+ 135M Q4_1 (k=2)" in proc.stdout and "+ 135M Q4_1 (k=4)" in proc.stdout
    rows = json.loads(results.read_text())["results"]
    spec = [r for r in rows if r["role"] == "speculative"]
    assert [r["draft_max"] for r in spec] == [2, 4]
    for row in spec:
        theory = row["theory"]
        assert theory["cost_source"].startswith("measured")
        assert theory["k_mean"] <= row["draft_max"] and theory["best_k"] >= 1
        assert theory["predicted_speedup"] > 0
    assert any(r["role"] == "draft_alone" and r["target"] == "135M Q4_1" for r in rows)


def test_config_dir_runs_valid_configs_and_names_broken_ones(models, tmp_path):
    folder = tmp_path / "configs"
    folder.mkdir()
    write_config(folder, models, drafts=(), name="a-valid", runs=1, prompts=["code"])
    (folder / "b-broken.json").write_text('{"name": "b", "targets": [], "settings": {"runs": "3"}}')
    (folder / "example_sweep.json").write_text("not even json")  # examples are ignored
    proc = run_cli("sweep.py", "--config-dir", str(folder), cwd=tmp_path)
    assert proc.returncode != 0
    assert "a-valid.json: ok" in proc.stdout
    assert "b-broken.json: INVALID CONFIG" in proc.stdout
    assert "$.targets: is empty" in proc.stderr and "$.settings.runs: must be an integer" in proc.stderr
    assert "example_sweep" not in proc.stdout + proc.stderr
    assert (tmp_path / "results" / "test-2core_llamacpp_a-valid.json").exists()


@pytest.mark.parametrize("name", ["m4max-128gb_llamacpp_qwen25-7b.json", "m4max-128gb_llamacpp_qwen25-72b.json"])
def test_chart_only_on_upstream_results(name, tmp_path):
    source = REFERENCE / name
    if not source.exists():
        pytest.skip(f"{source} is not here")
    before = source.read_bytes()
    chart = tmp_path / "chart.html"
    proc = run_cli("sweep.py", "--chart-only", "--results", str(source), "--chart", str(chart))
    assert proc.returncode == 0, proc.stderr
    assert chart.stat().st_size > 100_000  # plotly.js is embedded: the page works offline
    assert source.read_bytes() == before  # chart-only never rewrites the results
    assert "Chart saved to" in proc.stdout

