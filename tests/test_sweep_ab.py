"""The one-command A/B (bench.py --target T --draft D): its logic with the in-process fake backend,
its argument checks, and a real run of the forged pair on llama-server (Ctrl-C included)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from draftbench.backends.llamacpp.settings import LlamaCppSettings
from draftbench.common.errors import ServerError
from draftbench.config.candidates import Candidate
from draftbench.config.model_ref import ModelRef
from draftbench.config.prompts import BUILTIN_PROMPTS
from draftbench.config.settings import Settings
from draftbench.measure.sequential import MeasureOptions
from draftbench.results.file import load_results, save_results
from draftbench.sweep.ab import ABPlan, run_ab, screen, verdict
from draftbench.sweep.console import Reporter

from fakes.inprocess import FakeBackend, Script
from helpers import REPO, llama_server_pids, pairs_accounted_for, read_until, run_cli, wait_for

TARGET, DRAFT = "/m/target.gguf", "/m/draft.gguf"


def plan(**options) -> ABPlan:
    settings = Settings(port=0, runs=2, max_tokens=64, backend=LlamaCppSettings())
    return ABPlan(ModelRef("target", TARGET), Candidate("draft", "draft", draft=ModelRef("draft", DRAFT)),
                  settings, tuple(BUILTIN_PROMPTS[:3]), MeasureOptions(**{"runs": 2, "max_tokens": 64, **options}))


def ab(tmp_path, script: Script):
    backend = FakeBackend(script)
    return backend, run_ab(plan(), backend, "llamacpp", tmp_path / "logs", Reporter())


# --------------------------------------------------------------------------- logic

def test_baseline_and_candidate_up_together_in_abba_order_and_every_server_stopped(tmp_path):
    """Issue 37: the A/B measured the target alone, then the candidate — the drift-prone order. It now runs
    the sweep's interleaved design where both fit: per block a baseline and a candidate server side by side."""
    backend, results = ab(tmp_path, Script(tps={TARGET: 50.0}, speedup={DRAFT: 1.5}, acceptance={DRAFT: 0.8}))
    assert [launch[1:3] for launch in backend.log if launch[0] == "launch"] == [(TARGET, None), (TARGET, DRAFT)] * 2
    assert all(s.stopped for s in backend.servers)
    baseline, spec = results.results
    assert baseline.design["name"] == spec.design["name"] == "interleaved" and spec.design["sessions"] == 2
    assert all(r.compared_with and r.compared_with[0] in {b.session for b in baseline.requests} for r in spec.requests)
    assert (baseline.role, spec.role) == ("baseline", "speculative")
    assert spec.speedup.method == "paired-log-by-prompt" and spec.speedup.significant is True
    assert spec.equivalence["compared"] == 6
    text = screen(results, plan())
    for item in ("baseline ", "speculative ", "multiplier ", "acceptance ", "mean accepted len", "output ",
                 "verdict "):
        assert f"  {item}" in text, item
    assert "1.50x [" in text and "significant" in text and "80.0%  (192 of 240 drafted tokens accepted)" in text
    assert "identical to the baseline on 6/6 requests" in text and "Use it: 1.50x as fast" in text


class OneAtATime(FakeBackend):
    def side_by_side(self, settings, target, draft):
        return "the GPU holds one of them at a time"


def test_where_both_do_not_fit_each_candidate_block_is_bracketed_by_baseline_blocks(tmp_path):
    backend = OneAtATime(Script(tps={TARGET: 50.0}, speedup={DRAFT: 1.5}, acceptance={DRAFT: 0.8}))
    results = run_ab(plan(), backend, "llamacpp", tmp_path / "logs", Reporter())
    launches = [launch[2] for launch in backend.log if launch[0] == "launch"]
    assert launches == [None, DRAFT, None] * 2 and all(s.stopped for s in backend.servers)
    spec = results.results[1]
    assert spec.design["name"] == "bracketed"
    assert all(len(r.compared_with or []) == 2 for r in spec.requests)     # the baseline blocks before and after
    assert spec.speedup.significant is True


def test_a_slower_candidate_is_called_slower(tmp_path):
    _, results = ab(tmp_path, Script(tps={TARGET: 50.0}, speedup={DRAFT: 0.6}, acceptance={DRAFT: 0.8}))
    text = verdict(*results.results)
    assert text.startswith("Do not use it here: speculative decoding is 1.67x slower") and "compute-bound" in text


def test_no_difference_is_said_out_loud(tmp_path):
    _, results = ab(tmp_path, Script(tps={TARGET: 50.0}, speedup={DRAFT: 1.0}, acceptance={DRAFT: 0.05}))
    text = verdict(*results.results)
    assert text.startswith("Not worth it here: the difference") and "not significant)" in text    # 95%, what for
    assert "rarely predicts this target (5% accepted)" in text
    assert "not significant" in screen(results, plan())


def test_a_draft_that_never_drafts_is_no_speed_up(tmp_path):
    _, results = ab(tmp_path, Script(inactive={DRAFT}))
    assert verdict(*results.results).startswith("Do not use it as configured: the server never speculated")


def test_a_failed_baseline_starts_no_second_server(tmp_path):
    backend, results = ab(tmp_path, Script(fail_launch={TARGET: ServerError("llama-server crashed")}))
    assert sum(1 for entry in backend.log if entry[0] == "launch") == 1
    baseline, spec = results.results
    assert baseline.status == "error" and spec.status == "skipped"
    assert verdict(baseline, spec).startswith("No verdict: the baseline did not run")


def test_warnings_name_bench_flags_not_config_keys(tmp_path):
    # one run on two prompts: no spread to measure (with three or more prompts, one run each is a design)
    one_run = replace(plan(), prompts=tuple(BUILTIN_PROMPTS[:2]), options=MeasureOptions(runs=1, max_tokens=64))
    results = run_ab(one_run, FakeBackend(Script()), "llamacpp", tmp_path / "logs", Reporter())
    messages = [w.message for r in results.results for w in r.warnings]
    assert any("raise --runs to 3" in m for m in messages) and not any("settings.runs" in m for m in messages)


def test_an_ab_on_a_busy_machine_says_so_and_records_the_load(tmp_path, monkeypatch):
    import io

    from draftbench.lifetime import machine_load
    from draftbench.lifetime.machine_load import Load
    from draftbench.results.findings import Code
    from draftbench.sweep.console import Console

    monkeypatch.setattr(machine_load, "now", lambda window_s=1.0: Load(0.9, 8.0, 2, window_s))
    monkeypatch.setattr(machine_load.Monitor, "over_last", lambda self, seconds: Load(0.7, 6.0, 2, seconds))
    out = io.StringIO()
    results = run_ab(plan(), FakeBackend(Script()), "llamacpp", tmp_path / "logs", Console(out))
    assert "Warning: the machine is busy: before the A/B started, other programs used 90% of the CPU" in out.getvalue()
    assert results.load_before[0]["other_cpu_share"] == 0.9
    assert all(r.machine_load["other_cpu_share"] == 0.7 and any(w.code is Code.BUSY_MACHINE for w in r.warnings)
               for r in results.results)


def test_the_loop_warning_names_the_ab_flags(tmp_path):
    """Issue 37: the A/B's loop warning said settings.max_tokens, a config key the A/B has no config for."""
    from draftbench.analysis.verdict import analyze
    from draftbench.results.findings import Code

    _, results = ab(tmp_path, Script(tps={TARGET: 50.0}, speedup={DRAFT: 1.5}, acceptance={DRAFT: 0.8}))
    assert results.made_by == "bench.py"
    from draftbench.sweep.init_configs import this_hardware
    assert results.hardware == this_hardware()       # one rule with --init: the host name (issue 37)
    save_results(results, tmp_path / "ab.json")
    assert load_results(tmp_path / "ab.json").made_by == "bench.py"
    loop = "Sure! " + "<|im_start|>user\n" * 40
    first = results.results[0].requests[0].prompt_id

    def looping(row, faster: float):
        return replace(row, requests=tuple(replace(r, text=loop, decode_tps=r.decode_tps * faster)
                                           if r.prompt_id == first else r for r in row.requests))
    again = analyze(replace(results, results=(looping(results.results[0], 1.0), looping(results.results[1], 2.0))))
    found = [w for r in again.results for w in r.warnings if w.code is Code.DEGENERATE_OUTPUT]
    assert found and all("settings." not in w.message and "settings." not in (w.setting or "") for w in found)
    assert any("raise --max-tokens past the loop" in w.message for w in found)


# --------------------------------------------------------------------------- argument checks (no server starts)

@pytest.mark.parametrize("args, message", [
    (["--target", "t.gguf", "--draft", "d.gguf", "--url", "http://127.0.0.1:1"], "--url measure a running server"),
    (["--target", "t.gguf"], "--target needs --draft D.gguf or --spec-type"),
    (["--target", "missing.gguf", "--draft", "d.gguf"], "--target missing.gguf: model file"),
    (["--target", "t.gguf", "--draft", "d.gguf", "--backend", "vllm"], "the A/B runs llama.cpp only"),
    (["--target", "t.gguf", "--draft", "d.gguf", "--draft-max", "0"], "--draft-max must be at least 1"),
    ([], "give --url URL (a running server) or --target T.gguf"),
    (["--target", "t.gguf", "--draft", "d.gguf", "--concurrency", "2"], "--concurrency applies to --url only"),
    (["--url", "http://127.0.0.1:1", "--", "--threads", "1"], "arguments after -- go to the servers that --target"),
    (["--target", "t.gguf", "--draft", "d.gguf", "--", "--threads", "1", "--port", "9"],
     "argument 3 after --: sets --port"),
    (["--target", "t.gguf", "--draft", "d.gguf", "--", "--host", "0.0.0.0"], "argument 1 after --: makes the server "
     "listen on 0.0.0.0"),
])
def test_bad_arguments_are_one_error_line(tmp_path, args, message):
    proc = run_cli("bench.py", *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("Error: ") and message in proc.stderr and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- the real thing

AB_ARGS = ("--category", "code", "--category", "json", "--max-tokens", "16", "--runs", "1", "--gpu-layers", "0",
           "--ctx-size", "1024")


@pytest.mark.llama
def test_ab_on_the_forged_pair_prints_one_screen_and_leaves_no_server(models, tmp_path):
    before = llama_server_pids()
    out = tmp_path / "ab.json"
    proc = run_cli("bench.py", "--target", models["target-2x"], "--draft", models["base"], *AB_ARGS,
                   "--json", str(out), "--", "--threads", "1", timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = proc.stdout
    # the sweep's interleaved design: per stage (one a run: --runs 1), a baseline and a speculative server side by
    # side, requests in ABBA order
    assert "Note: interleaved (" in text
    assert ("[1/≤1] smollm2-target-2x.Q4_1 + SmolLM2-135M-Instruct.Q4_1 [stage 1/1, beside the stage's baseline "
            "server]") in text and text.count("Server stopped") == 2
    for item in ("baseline", "speculative", "multiplier", "acceptance", "mean accepted len", "output", "verdict"):
        assert f"\n  {item:<18} " in text, item
    results = load_results(out)
    baseline, spec = results.results
    assert baseline.ok and spec.ok and spec.speculation_active is True and spec.acceptance_rate > 0.5
    assert spec.server["command"][spec.server["command"].index("--spec-type") + 1] == "draft-simple"
    assert baseline.server["command"][baseline.server["command"].index("--spec-type") + 1] == "none"
    # everything after -- reached both servers, as settings.extra_args does in a sweep
    for row in (baseline, spec):
        assert row.server["command"][-2:] == ["--threads", "1"]
        assert "n_threads = 1" in Path(row.server["log"]).read_text(errors="replace")
    assert f"{spec.acceptance_rate:.1%}  ({spec.draft_n_accepted} of {spec.draft_n} drafted" in text
    # two pairs planned: a burst of other programs' load (another test worker) may leave one out, saying so
    assert pairs_accounted_for(spec, baseline) == 2 and f"{spec.speedup.ratio:.2f}x [" in text
    assert spec.design["name"] == "interleaved" and all(r.compared_with for r in spec.requests)
    assert spec.equivalence["compared"] == 2
    assert not (llama_server_pids() - before)
    # the saved file is a results file like a sweep's
    proc = run_cli("sweep.py", "--results", str(out), "--export", "md")
    assert proc.returncode == 0 and "`smollm2-target-2x.Q4_1 + SmolLM2-135M-Instruct.Q4_1`" in proc.stdout


@pytest.mark.llama
@pytest.mark.parametrize("when", ["loading", "measuring"])
def test_ctrl_c_during_the_ab_stops_its_server(models, tmp_path, when):
    before = llama_server_pids()
    proc = subprocess.Popen([sys.executable, str(REPO / "bench.py"), "--target", models["target-2x"], "--draft",
                             models["base"], *AB_ARGS], cwd=str(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    seen = ""
    try:
        if when == "loading":
            wait_for(lambda: llama_server_pids() - before, timeout=120)     # a server of ours is starting
        else:
            seen = read_until(proc, "ready (", timeout=300)                  # the baseline is being measured
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, seen + out
    assert "Interrupted." in out
    wait_for(lambda: not (llama_server_pids() - before), timeout=15)


@pytest.mark.llama
def test_unknown_spec_type_is_refused_before_any_server_starts(models, tmp_path):
    before = llama_server_pids()
    proc = run_cli("bench.py", "--target", models["target-2x"], "--spec-type", "warp-drive", cwd=tmp_path)
    assert proc.returncode == 2 and "--spec-type: 'warp-drive' is not a speculative type" in proc.stderr, proc.stderr
    assert not (llama_server_pids() - before)


def test_results_file_is_not_overwritten(tmp_path):
    existing = tmp_path / "old.json"
    existing.write_text(json.dumps({"results": [], "name": "x"}))
    proc = run_cli("bench.py", "--target", "t.gguf", "--draft", "d.gguf", "--json", str(existing), cwd=tmp_path)
    assert proc.returncode == 2 and "--json " in proc.stderr and "is an existing results file" in proc.stderr
    assert existing.read_text() == json.dumps({"results": [], "name": "x"})


def test_json_onto_a_model_is_refused(tmp_path):
    model = tmp_path / "t.gguf"
    model.write_bytes(b"GGUF\x03\x00\x00\x00")
    proc = run_cli("bench.py", "--target", str(model), "--draft", "d.gguf", "--json", str(model), cwd=tmp_path)
    assert proc.returncode == 2 and "writing it would destroy" in proc.stderr, proc.stderr
    assert model.read_bytes() == b"GGUF\x03\x00\x00\x00"


def test_a_file_name_that_cannot_be_a_label_is_refused(tmp_path):
    proc = run_cli("bench.py", "--target", "evil\x1b[2J.gguf", "--draft", "d.gguf", cwd=tmp_path)
    assert proc.returncode == 2 and "--target evil\\x1b[2J.gguf: the file name" in proc.stderr, proc.stderr
    assert "\x1b" not in proc.stderr          # shown as an escape, never sent to the terminal

