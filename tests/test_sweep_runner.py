"""The sweep's logic (planning, running one combination, resume, interruption) with an in-process
backend: no processes, ports or HTTP. The real-server sweeps are in test_cli_sweep_cli_llama.py and test_sweep_session_faults.py."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from draftbench.common.errors import ResultsFileError, ServerError, ServerErrorKind
from draftbench.config.prompts import BUILTIN_PROMPTS
from draftbench.measure.sequential import MeasureOptions
from draftbench.results.file import SCHEMA_VERSION, load_results
from draftbench.results.kinds import Role
from draftbench.sweep import (
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    CombinationRunner,
    Console,
    RunnerIO,
    Sweep,
    plan,
)
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.console import Reporter
from draftbench.sweep.plan import Combination

from fakes.inprocess import FakeBackend, Script, port_in_use_error

TARGET, GOOD, BAD = "/m/target.gguf", "/m/good.gguf", "/m/bad.gguf"


def config(tmp_path: Path, drafts=(("good", GOOD), ("bad", BAD)), **settings):
    data = {"name": "unit", "hardware": "box", "backend": "llamacpp",
            "targets": [{"label": "7B", "path": TARGET}],
            "drafts": [{"label": label, "path": path} for label, path in drafts],
            "settings": {"runs": 2, "max_tokens": 64, "prompts": ["code", "json"], "port": 0, **settings}}
    return validate_config(data, source=str(tmp_path / "c.json"), base_dir=str(tmp_path))


def script(**kw) -> Script:
    base = dict(tps={TARGET: 50.0}, speedup={GOOD: 1.5, BAD: 0.6}, acceptance={GOOD: 0.8, BAD: 0.02})
    base.update(kw)
    return Script(**base)


def sweep(tmp_path, backend, cfg=None, reporter=None) -> tuple[int, Path]:
    results = tmp_path / "r.json"
    code = Sweep(cfg or config(tmp_path), results, None, reporter=reporter or Reporter(), backend=backend).run()
    return code, results


def rows(path: Path) -> dict:
    return {(r["role"], r["draft"], r["draft_max"]): r for r in json.loads(path.read_text())["results"]}


# --------------------------------------------------------------------------- planning

def test_plan_follows_upstreams_order_and_adds_k_values_and_controls(tmp_path):
    cfg = config(tmp_path, draft_max=[2, 4], control_baseline=True, draft_alone=True)
    titles = [c.title(True) for c in plan(cfg)]
    assert titles == ["7B (baseline)", "7B + good (k=2)", "7B + good (k=4)", "7B + bad (k=2)", "7B + bad (k=4)",
                      "7B (baseline again, drift check)", "good (draft alone, for its cost ratio)",
                      "bad (draft alone, for its cost ratio)"]
    assert plan(cfg)[0].key == ("baseline", "7B", None, None)


# --------------------------------------------------------------------------- one combination

def runner(tmp_path, backend, **settings) -> CombinationRunner:
    cfg = config(tmp_path, **settings)
    return CombinationRunner(backend, "llamacpp", cfg.settings, list(BUILTIN_PROMPTS[:2]),
                             MeasureOptions(runs=2, warmup=1, max_tokens=64), RunnerIO(tmp_path / "logs"))


def test_a_measured_row_records_the_server_and_every_request(tmp_path):
    backend = FakeBackend(script())
    combo = plan(config(tmp_path))[1]
    row = runner(tmp_path, backend).run(combo, 2, {})
    assert row.ok and row.speculation_active is True and row.acceptance_rate == 0.8
    assert len(row.requests) == 4 and {r.draft_source for r in row.requests} == {"timings"}
    assert row.server["command"] == ["fake-server", TARGET, "--draft", GOOD] and row.server["version"] == "fake 1.0"
    assert backend.servers[0].stopped and backend.servers[0].requests == 5        # warm-up + 4 measured


def test_missing_model_is_skipped_and_no_server_starts(tmp_path):
    backend = FakeBackend(script(missing={GOOD}))
    row = runner(tmp_path, backend).run(plan(config(tmp_path))[1], 2, {})
    assert row.status == "skipped" and "does not exist" in row.reason and "fix: check the path" in row.reason
    assert backend.log == []


def test_an_incompatible_pair_is_skipped_before_a_server_starts(tmp_path):
    backend = FakeBackend(script(incompatible={BAD}))
    row = runner(tmp_path, backend).run(plan(config(tmp_path))[2], 3, {})
    assert row.status == "skipped" and row.speculation_active is False and "token 100 differs" in row.reason
    assert backend.log == []


def test_drafts_of_a_failed_baseline_are_skipped(tmp_path):
    backend = FakeBackend(script())
    row = runner(tmp_path, backend).run(plan(config(tmp_path))[1], 2, {"7B": "llama-server crashed"})
    assert row.status == "skipped" and "baseline of 7B failed" in row.reason and backend.log == []


def test_launch_failure_is_an_error_row_with_the_same_server_fields(tmp_path):
    error = ServerError("llama-server could not load the draft", "check the draft file", log_tail="boom",
                        kind=ServerErrorKind.DRAFT_MODEL)
    backend = FakeBackend(script(fail_launch={BAD: error}))
    row = runner(tmp_path, backend).run(plan(config(tmp_path))[2], 3, {})
    assert row.status == "error" and row.reason == "llama-server could not load the draft — check the draft file"
    assert set(row.server) == {"backend", "command", "version", "log", "port", "log_tail"}
    assert row.server["log_tail"] == "boom"


def test_a_request_failing_midway_keeps_what_was_measured(tmp_path):
    backend = FakeBackend(script(fail_request_after={GOOD: 3}))      # warm-up + 2 measured, then it breaks
    row = runner(tmp_path, backend).run(plan(config(tmp_path))[1], 2, {})
    assert row.status == "error" and "broke mid-stream" in row.reason
    assert len(row.requests) == 2 and backend.servers[0].stopped
    assert set(row.server) == {"backend", "command", "version", "log", "port", "log_tail", "draft_sampling",
                               "draft_sampling_from"}       # a draft's sampling, as its server process runs it


def test_a_taken_port_is_retried_once_elsewhere(tmp_path):
    backend = FakeBackend(script())
    calls = []
    original = backend.launch

    def launch(spec):
        calls.append(spec.port)
        if len(calls) == 1:
            raise port_in_use_error()
        return original(spec)

    backend.launch = launch
    row = runner(tmp_path, backend).run(plan(config(tmp_path))[0], 1, {})
    assert row.ok and len(calls) == 2 and calls[0] != calls[1]


def test_a_draft_that_never_drafts_is_not_a_speedup(tmp_path):
    backend = FakeBackend(script(inactive={GOOD}))
    row = runner(tmp_path, backend).run(plan(config(tmp_path))[1], 2, {})
    assert row.ok and row.speculation_active is False
    assert [w.code.value for w in row.warnings if w.code.value == "never_drafted"] == ["never_drafted"]


# --------------------------------------------------------------------------- the session

def test_a_sweep_measures_everything_and_recommends_the_good_draft(tmp_path):
    code, path = sweep(tmp_path, FakeBackend(script()))
    assert code == EXIT_OK
    data = json.loads(path.read_text())
    assert data["schema_version"] == SCHEMA_VERSION and [r["status"] for r in data["results"]] == ["ok"] * 3
    verdict = data["summary"]["targets"][0]
    assert verdict["recommended_draft"] == "good" and "bad" in verdict["verdict"]     # rarely-accepting draft named


@pytest.mark.parametrize("design,launched", [
    # the missing candidate's first stage (then the verdict decides): upstream's order, a baseline server first
    ("sequential", [(TARGET, None), (TARGET, BAD)]),
    # interleaved: beside a fresh baseline server
    ("interleaved", [(TARGET, None), (TARGET, BAD)]),
    # bracketed: a baseline server before and after it
    ("bracketed", [(TARGET, None), (TARGET, BAD), (TARGET, None)])])
def test_resume_runs_only_what_is_missing(tmp_path, design, launched):
    backend = FakeBackend(script(missing={BAD}))
    code, path = sweep(tmp_path, backend, config(tmp_path, design=design))
    assert code == EXIT_INCOMPLETE
    backend2 = FakeBackend(script())
    code, _ = sweep(tmp_path, backend2, config(tmp_path, design=design))
    assert code == EXIT_OK
    assert [entry[1:3] for entry in backend2.log if entry[0] == "launch"] == launched
    assert rows(path)[("speculative", "bad", None)]["status"] == "ok"


def test_a_path_fixed_after_its_rows_were_skipped_resumes(tmp_path):
    """The mistyped path skipped its rows (nothing measured with it): fixing it is not another sweep."""
    typo = "/m/godo.gguf"
    code, path = sweep(tmp_path, FakeBackend(script(missing={typo})), config(tmp_path, drafts=(("good", typo),)))
    assert code == EXIT_INCOMPLETE and rows(path)[("speculative", "good", None)]["status"] == "skipped"
    backend = FakeBackend(script())
    code, _ = sweep(tmp_path, backend, config(tmp_path, drafts=(("good", GOOD),)))
    assert code == EXIT_OK
    # only the fixed candidate: its first stage beside a fresh baseline server (a clear gain: decided there)
    assert [entry[1:3] for entry in backend.log if entry[0] == "launch"] == [(TARGET, None), (TARGET, GOOD)]
    assert rows(path)[("speculative", "good", None)]["draft_path"] == GOOD
    # a path whose rows hold measurements still makes another sweep
    with pytest.raises(ResultsFileError, match=re.escape("points to /m/other.gguf now, /m/good.gguf then")):
        sweep(tmp_path, FakeBackend(script()), config(tmp_path, drafts=(("good", "/m/other.gguf"),)))


def test_interruption_keeps_finished_rows_and_stops_the_server(tmp_path):
    backend = FakeBackend(script(interrupt_on={BAD}))
    code, path = sweep(tmp_path, backend)
    assert code == EXIT_INTERRUPTED
    saved = load_results(path)
    assert [r.role for r in saved.results] == [Role.BASELINE, Role.SPECULATIVE]
    assert all(s.stopped for s in backend.servers)


def test_a_results_file_from_another_config_is_refused(tmp_path):
    sweep(tmp_path, FakeBackend(script()))
    other = config(tmp_path, max_tokens=128)
    with pytest.raises(ResultsFileError, match=r"settings\.max_tokens 64 vs 128"):
        sweep(tmp_path, FakeBackend(script()), other)


def test_the_console_says_what_happened(tmp_path):
    out = io.StringIO()
    sweep(tmp_path, FakeBackend(script(missing={BAD})), reporter=Console(out))
    text = out.getvalue()
    assert re.search(r"\[1/≤\d+\] 7B \+ good \[stage 1/6, beside the stage's baseline server\]", text)
    assert "Starting server ... ready (0.0 s)" in text and "7B: interleaved (a baseline server per stage" in text
    sequential = io.StringIO()
    sweep(tmp_path / "seq", FakeBackend(script(missing={BAD})), config(tmp_path, design="sequential"),
          reporter=Console(sequential))
    assert re.search(r"\[1/≤\d+\] 7B \(baseline\) \[stage 1/6\]\n", sequential.getvalue())
    assert "good so far (" in text and "Skipped: model file /m/bad.gguf does not exist" in text
    assert "=== Sweep complete ===" in text and "Verdict:" in text


def test_combination_keys_match_row_keys(tmp_path):
    _code, path = sweep(tmp_path, FakeBackend(script()))
    saved = load_results(path)
    assert {c.key for c in plan(config(tmp_path))} == {r.key for r in saved.results}
    assert Combination(Role.BASELINE, plan(config(tmp_path))[0].target).key == saved.results[0].key
