"""The verdict ends with the command that runs what it recommends (issue 25): without draftbench's
plumbing, the same in the console, the report and ``--export md``; run as printed (with a free port),
it serves the recommended methods (``/slots`` says so). Mechanisms, never speed: whatever the
verdict picks on this machine, its command must serve exactly that configuration."""

from __future__ import annotations

import html
import json
import shlex
from pathlib import Path

import pytest
import requests
from draftbench.analysis.categories import CategoryBest
from draftbench.analysis.choice import Choice
from draftbench.analysis.summary import verdicts_of
from draftbench.analysis.verdict import analyze
from draftbench.analysis.winning_command import (
    BEST_MEASURED,
    RECOMMENDED,
    TARGET_ALONE,
    command_lines,
    how_to_run,
    runs_by_category,
)
from draftbench.backends import get_backend
from draftbench.backends.how_to_run import RunAdvice, advise, without_plumbing
from draftbench.backends.lmstudio.settings import LMStudioSettings
from draftbench.config.settings import Settings
from draftbench.lifetime.polling import poll
from draftbench.lifetime.process import ManagedProcess, free_port
from draftbench.results.file import ResultsFile, Row, load_results
from draftbench.results.speedup import Speedup

from helpers import run_cli

LLAMA_CMD = ["/opt/llama/llama-server", "-m", "/m/t.gguf", "--host", "127.0.0.1", "--port", "40123", "-c", "2048",
             "-ngl", "0", "-np", "1", "--metrics", "--spec-type", "draft-simple,ngram-mod", "-md", "/m/d.gguf",
             "-ngld", "0", "--spec-draft-n-max", "4", "--spec-ngram-mod-n-match", "4", "-lv", "4", "--threads", "2"]


# --------------------------------------------------------------------------- unit: the plumbing goes

def test_llama_command_loses_only_draftbenchs_plumbing():
    kept = get_backend("llamacpp").plumbing.strip(LLAMA_CMD)
    assert kept == ["/opt/llama/llama-server", "-m", "/m/t.gguf", "-c", "2048", "-ngl", "0", "--spec-type",
                    "draft-simple,ngram-mod", "-md", "/m/d.gguf", "-ngld", "0", "--spec-draft-n-max", "4",
                    "--spec-ngram-mod-n-match", "4", "--threads", "2"]
    # four slots were measured as such: they stay; --flag=value forms go too
    assert without_plumbing(["x", "-np", "4", "--port=1"], valued=("-np", "--port"),
                            only_values={"-np": ("1",)}) == ["x", "-np", "4"]


def test_vllm_command_keeps_its_speculative_config_quoted():
    cmd = ["vllm", "serve", "org/t", "--host", "127.0.0.1", "--port", "8000", "--max-model-len", "4096",
           "--no-enable-prefix-caching", "--speculative-config", '{"method":"ngram","num_speculative_tokens":5}',
           "--per-request-spec-decode-metrics", "summary"]
    row = Row(target="t", draft="ngram", role="speculative", server={"backend": "vllm", "command": cmd})
    advice = advise(get_backend("vllm"), row, {})
    assert advice == RunAdvice("command", "vllm serve org/t --max-model-len 4096 --speculative-config "
                                          "'{\"method\":\"ngram\",\"num_speculative_tokens\":5}'")
    assert shlex.split(advice.text)[-1] == cmd[-3]


def test_lm_studio_advice_is_the_settings_to_choose():
    row = Row(target="7B", draft="0.5B", role="speculative", target_path="qwen2.5-7b-instruct",
              draft_path="qwen2.5-0.5b-instruct", draft_max=4,
              candidate={"label": "0.5B", "method": [], "draft": "0.5B", "params": {"draft_p_min": 0.8}},
              server={"backend": "lmstudio", "command": ["lms", "load", "qwen2.5-7b-instruct", "--identifier",
                                                         "draftbench-target", "--context-length", "4096", "--gpu",
                                                         "max"]})
    advice = advise(get_backend("lmstudio"), row, Settings(backend=LMStudioSettings(lmstudio_min_draft_length=2)))
    assert advice is not None and advice.kind == "settings"
    assert "`lms load qwen2.5-7b-instruct --context-length 4096 --gpu max`" in advice.text
    assert '"draft_model": "qwen2.5-0.5b-instruct"' in advice.text
    for setting in ("speculativeDecodingNumDraftTokensExact = 4", "speculativeDecodingMinContinueDraftingProbability "
                    "= 0.8", "speculativeDecodingMinDraftLengthToConsider = 2"):
        assert setting in advice.text


def _speedup(ratio, significant):
    return Speedup(ratio=ratio, ci95_low=ratio - 0.05, ci95_high=ratio + 0.05, significant=significant,
                   method="paired", n_pairs=8, percent=round((ratio - 1) * 100, 2))


def test_per_category_commands_when_the_best_differs():
    server = {"backend": "llamacpp", "command": ["llama-server", "-m", "t", "--port", "1"]}
    rows = (Row(target="T", role="baseline", mean_tps=10, server=server),
            Row(target="T", draft="ngram-mod", role="speculative", server={**server, "command": [
                *server["command"], "--spec-type", "ngram-mod"]}))
    results = ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="", settings={}, results=rows)
    choice = Choice("ngram-mod", None, _speedup(1.4, True))
    by_category = {"code-edit": CategoryBest("ngram-mod", False, "ngram-mod", None, significant_gain=True),
                   "rewrite": CategoryBest("ngram-mod", False, "ngram-mod", None, significant_gain=True),
                   "chat": CategoryBest(None, False),
                   # a best not shown to gain once corrected: exploratory, no command of its own
                   "json": CategoryBest("other", False, "other", None, significant_gain=False)}
    run, by_type = how_to_run(results, "T", 1, choice), runs_by_category(by_category, results, "T")
    assert run is not None
    assert run.to_dict() == {"what": RECOMMENDED, "kind": "command", "line": "llama-server -m t --spec-type ngram-mod"}
    assert command_lines(run, by_type) == ["Run it: llama-server -m t --spec-type ngram-mod",
                                           "For code-edit, rewrite (ngram-mod): llama-server -m t --spec-type ngram-mod",
                                           "For chat (target alone): llama-server -m t"]
    run = how_to_run(results, "T", 1, Choice())
    assert run is not None and run.what == TARGET_ALONE and runs_by_category({}, results, "T") == ()


# --------------------------------------------------------------------------- the real thing

def _serve_as_printed(text: str, tmp_path: Path, name: str) -> tuple[str, ...]:
    """Run a printed command with ``--port`` appended, send one request, and return the serving slot's
    ``params["speculative.types"]`` (filled in once a request ran) as a tuple of methods."""
    port = free_port()
    proc = ManagedProcess([*shlex.split(text), "--port", str(port)], tmp_path / f"{name}.log", port=port)
    try:
        base = f"http://127.0.0.1:{port}"
        assert poll(lambda: _ok(base + "/health"), 300), proc.log_tail(30)
        answer = requests.post(base + "/v1/chat/completions", timeout=300, json={
            "messages": [{"role": "user", "content": "Repeat: def add(a, b): return a + b"}], "max_tokens": 16,
            "temperature": 0})
        assert answer.status_code == 200, answer.text
        # without draftbench's -np 1 the server has its default slots: the one that served the request says
        served = [s["params"]["speculative.types"] for s in requests.get(base + "/slots", timeout=30).json()
                  if "speculative.types" in (s.get("params") or {})]
        assert len(served) == 1, served
        return tuple(t for t in (p.strip() for p in served[0].split(",")) if t and t != "none")
    finally:
        proc.stop(grace_s=3)


def _ok(url: str) -> bool | None:
    try:
        return True if requests.get(url, timeout=2).status_code == 200 else None
    except requests.RequestException:
        return None


@pytest.mark.llama
def test_the_printed_command_serves_the_recommended_methods(models, tmp_path):
    config = {"name": "cmd", "hardware": "test-2core", "backend": "llamacpp",
              "targets": [{"label": "241M", "path": models["target-2x"]}],
              "drafts": [{"label": "135M", "path": models["base"]}],
              "candidates": [{"label": "135M + ngram-mod", "draft": "135M", "method": ["draft-simple", "ngram-mod"],
                              "params": {"ngram_mod_n_match": 4, "ngram_mod_n_min": 2, "ngram_mod_n_max": 16}}],
              "settings": {"stages": 1, "warmup": 0, "max_tokens": 24, "ctx_size": 1024, "gpu_layers": 0, "port": 0,
                           "prompts": ["code-edit"], "draft_max": 4}}
    path = tmp_path / "cmd.json"
    path.write_text(json.dumps(config))
    results_path = tmp_path / "cmd-results.json"
    proc = run_cli("sweep.py", "--config", str(path), "--results", str(results_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = analyze(load_results(results_path))      # a file's stored summary is only written back
    verdict = verdicts_of(results)[0]
    assert verdict.run is not None
    run = verdict.run.to_dict()
    assert run["kind"] == "command"
    for plumbing in ("--port", "--host", "--metrics", "-np", "-lv"):
        assert plumbing not in shlex.split(run["line"])
    # the same lines in the console, the report and the Markdown export
    lines = verdict.command_lines()
    assert all(line in proc.stdout for line in lines)
    report = results_path.with_suffix(".html").read_text()
    assert html.escape(run["line"], quote=True) in report or html.escape(run["line"], quote=False) in report
    md = run_cli("sweep.py", "--results", str(results_path), "--export", "md")
    assert md.returncode == 0 and run["line"] in md.stdout
    # whatever this machine made the verdict pick, the printed command serves exactly that
    if run["what"] in (RECOMMENDED, BEST_MEASURED):
        row = next(r for r in results.results if r.role == "speculative" and r.draft == verdict.recommended_draft)
        expected = set(row.active_methods or ())
        assert expected
    else:
        assert run["what"] == TARGET_ALONE
        expected = set()
    assert set(_serve_as_printed(run["line"], tmp_path, "verdict")) == expected
    # and the hybrid's own command (recommended or not on this machine) serves both of its methods
    hybrid = next(r for r in results.results if r.draft == "135M + ngram-mod")
    advice = advise(get_backend("llamacpp"), hybrid, results.settings)
    assert set(_serve_as_printed(advice.text, tmp_path, "hybrid")) == {"draft-simple", "ngram-mod"}
