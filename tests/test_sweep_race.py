"""The staged decision through the sweep, with the in-process backend (no processes; deterministic; nothing
here depends on speed): the race and the exhaustive search decide alike, candidates leave the race with the
reason, nothing gains is said as such, and the console, the verdict and the report name one best. The
stages' mechanics (fresh servers, resume, budget, --more) are in test_sweep_stages.py; the real
llama-server in test_sweep_race_llama.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from draftbench.analysis.summary import verdicts_of
from draftbench.analysis.verdict import analyze
from draftbench.results.file import ResultsFile, load_results
from draftbench.results.kinds import Status
from draftbench.sweep import EXIT_INCOMPLETE, EXIT_OK, Sweep
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.console import Reporter

from fakes.inprocess import FakeBackend, Script

TARGET = "/m/target.gguf"
BEST, GOOD, BAD, SLOW = "/m/best.gguf", "/m/good.gguf", "/m/bad.gguf", "/m/slow.gguf"
DRAFTS = (("best", BEST), ("good", GOOD), ("bad", BAD), ("slow", SLOW))


def config(tmp_path: Path, drafts=DRAFTS, **settings):
    data = {"name": "race", "hardware": "box", "backend": "llamacpp", "targets": [{"label": "7B", "path": TARGET}],
            "drafts": [{"label": label, "path": path} for label, path in drafts],
            "settings": {"max_tokens": 64, "prompts": "builtin", "port": 0, "search": "adaptive", **settings}}
    return validate_config(data, source=str(tmp_path / "c.json"), base_dir=str(tmp_path))


def script(**kw) -> Script:
    base = dict(tps={TARGET: 50.0}, speedup={BEST: 2.0, GOOD: 1.5, BAD: 0.6, SLOW: 0.97},
                acceptance={BEST: 0.9, GOOD: 0.8, BAD: 0.02, SLOW: 0.5})
    base.update(kw)
    return Script(**base)


def sweep(tmp_path, backend, cfg=None, reporter=None, name="r.json") -> tuple[int, ResultsFile]:
    path = tmp_path / name
    code = Sweep(cfg or config(tmp_path), path, None, reporter=reporter or Reporter(), backend=backend).run()
    return code, analyze(load_results(path))    # the verdict as every view shows it: the file analysed again


def by_draft(results: ResultsFile) -> dict:
    return {r.draft: r for r in results.results}


def launches(backend: FakeBackend) -> list:
    return [entry[2] for entry in backend.log if entry[0] == "launch"]


class Said(Reporter):
    """What the sweep said about its looks and verdicts."""

    def __init__(self):
        self.lines: list[str] = []

    def race(self, text):
        self.lines.append(text)


def test_a_clear_best_is_recommended_by_the_race_and_the_exhaustive_search_alike(tmp_path):
    raced_backend, full_backend = FakeBackend(script()), FakeBackend(script())
    code_ad, raced = sweep(tmp_path, raced_backend)
    code_ex, full = sweep(tmp_path, full_backend, config(tmp_path, search="exhaustive"), name="ex.json")
    assert code_ad == code_ex == EXIT_OK        # candidates that left the race are not failures
    for results in (raced, full):
        entry = verdicts_of(results)[0]
        assert entry.recommended_draft == "best" and entry.stages.verdict.value == "recommend"
        assert entry.verdict.startswith("7B: use best — expect +") and "95% over 4 candidates" in entry.verdict
        assert entry.run.what == "recommended" and "--draft /m/best.gguf" in entry.run.advice.text
    rows = by_draft(raced)
    assert {rows[d].status for d in ("good", "bad", "slow")} == {Status.ELIMINATED}
    assert "slower than best on the same prompts" in rows["good"].reason
    assert "cannot gain the noise floor" in rows["bad"].reason
    assert len(launches(raced_backend)) <= len(launches(full_backend))
    assert sum(len(r.requests) for r in raced.results) <= sum(len(r.requests) for r in full.results)


def test_close_candidates_are_measured_over_more_stages_and_the_rest_leave(tmp_path):
    backend = FakeBackend(script(speedup={BEST: 1.5, GOOD: 1.45, BAD: 0.6, SLOW: 0.97}, noise={BEST: 0.1, GOOD: 0.1}))
    code, results = sweep(tmp_path, backend)
    rows = by_draft(results)
    assert code == EXIT_OK
    assert len({r.block for r in rows["best"].requests}) > 1 and len({r.block for r in rows["good"].requests}) > 1
    assert rows["bad"].status is Status.ELIMINATED and {r.block for r in rows["bad"].requests} == {0}
    assert launches(backend).count(BAD) == 1
    entry = verdicts_of(results)[0]
    assert entry.stages.verdict.value in ("recommend", "shortlist", "unresolved")


def test_when_nothing_gains_it_is_said_and_nothing_is_recommended(tmp_path):
    backend = FakeBackend(script(speedup={BEST: 0.7, GOOD: 0.8, BAD: 0.6, SLOW: 0.75}))
    code, results = sweep(tmp_path, backend)
    entry = verdicts_of(results)[0]
    assert code == EXIT_OK and entry.recommended_draft is None
    assert entry.stages.verdict.value == "nothing gains"
    assert "not recommended — every candidate was shown to gain less than the noise floor" in entry.verdict
    assert entry.run.what == "target alone"
    assert "(significantly slower" in entry.verdict


def test_the_console_the_verdict_and_the_report_name_one_best(tmp_path):
    said = Said()
    backend = FakeBackend(script(speedup={BEST: 1.5, GOOD: 1.45, BAD: 0.6, SLOW: 0.97}, noise={BEST: 0.1, GOOD: 0.1}))
    _, results = sweep(tmp_path, backend, reporter=said)
    entry = verdicts_of(results)[0]
    best = entry.best.name
    assert said.lines and said.lines[-1].startswith("7B: look ") and f"best so far {best}:" in said.lines[-1]
    assert best in entry.verdict
    from draftbench.report.page import render_report
    page = render_report(results)
    assert best in page and "The stages" in page
    assert "Power: With the spread measured here, a candidate +10.0% faster than the target alone" in page


def test_a_candidate_that_fails_is_an_error_and_the_others_go_on(tmp_path):
    backend = FakeBackend(script(missing={SLOW}))
    code, results = sweep(tmp_path, backend)
    rows = by_draft(results)
    assert code == EXIT_INCOMPLETE and rows["slow"].status is Status.SKIPPED
    assert verdicts_of(results)[0].recommended_draft == "best"


def test_switching_search_on_resume_is_refused(tmp_path):
    sweep(tmp_path, FakeBackend(script()))
    with pytest.raises(Exception, match=r"settings\.search 'adaptive' vs 'exhaustive'"):
        sweep(tmp_path, FakeBackend(script()), config(tmp_path, search="exhaustive"))


def test_the_results_file_keeps_the_stages_in_strict_json(tmp_path):
    sweep(tmp_path, FakeBackend(script()))
    data = json.loads((tmp_path / "r.json").read_text(), parse_constant=lambda c: pytest.fail(f"non-strict {c}"))
    row = next(r for r in data["results"] if r["draft"] == "best")
    assert row["design"]["horizon"] == 6 and row["design"]["per_stage"] == 6 and row["design"]["name"] == "interleaved"
    assert all(r["block"] == 0 and r["compared_with"] for r in row["requests"])
    stages = data["summary"]["targets"][0]["stages"]
    assert stages["decision"] == "recommend" and stages["quote"]["interval"].startswith("95% over 4 candidates")
