"""The context axis (settings.context_tokens) through the sweep, on the in-process fake backend: the plan,
the refusal before any server starts, a verdict per length and the crossover, resume, the report.
The real llama-server's side (prompt lengths, prefill) is tests/test_long_context_llama.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from draftbench.common.errors import ConfigError
from draftbench.config import long_documents
from draftbench.config.long_documents import LONG_CATEGORIES, Source
from draftbench.report import build_figures
from draftbench.results.file import load_results
from draftbench.sweep import EXIT_OK, Sweep, plan
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.console import Reporter

from fakes.inprocess import FakeBackend, Script

TARGET, SHORT, STEADY = "/m/target.gguf", "/m/short-reach.gguf", "/m/steady.gguf"
LENGTHS = [256, 512, 1024]
CONTEXT_CHARTS = {"chart-context-speedup", "chart-context-ttft", "chart-context-memory"}


@pytest.fixture(autouse=True)
def plays(monkeypatch):
    """Prose without the pinned wheel (the code comes from this interpreter's standard library)."""
    words = " ".join(f"{i}th-word" for i in range(4000))
    monkeypatch.setattr(long_documents, "prose", lambda play: Source(play, words, {"package": "test", "sha256": "0"}))


def config(tmp_path: Path, **settings):
    data = {"name": "unit", "hardware": "box", "backend": "llamacpp", "targets": [{"label": "7B", "path": TARGET}],
            "drafts": [{"label": "short-reach", "path": SHORT}, {"label": "steady", "path": STEADY}],
            "settings": {"runs": 2, "max_tokens": 64, "port": 0, "context_tokens": LENGTHS, **settings}}
    return validate_config(data, source=str(tmp_path / "c.json"), base_dir=str(tmp_path))


def script(**kw) -> Script:
    """short-reach pays 1.5× up to 512 tokens and costs 40% at 1024; steady pays 1.3× at every length."""
    return Script(**{"tps": {TARGET: 50.0}, "speedup": {SHORT: 1.5, STEADY: 1.3},
                     "acceptance": {SHORT: 0.8, STEADY: 0.7}, "per_length": {SHORT: {1024: 0.4}}, **kw})


def sweep(tmp_path: Path, backend: FakeBackend, cfg) -> Path:
    path = tmp_path / "r.json"
    assert Sweep(cfg, path, None, reporter=Reporter(), backend=backend).run() == EXIT_OK
    return path


def test_lengths_multiply_the_plan_and_grow_only_their_keys(tmp_path):
    combos = plan(config(tmp_path))
    assert [c.context_tokens for c in combos] == [n for n in LENGTHS for _ in range(3)]
    assert combos[0].key[-1] == ("context", 256) and combos[0].title(False) == "7B (baseline) [256-token prompts]"
    assert all(c.context_tokens is None and len(c.key) == 4 for c in plan(config(tmp_path, context_tokens=None)))


def test_settings_that_cannot_go_with_the_axis_are_refused(tmp_path):
    with pytest.raises(ConfigError) as err:
        config(tmp_path, prompts=["code"], search="adaptive")
    text = str(err.value)
    assert "$.settings.prompts" in text and "its own long prompts" in text and "$.settings.search" in text


def test_a_length_the_model_cannot_take_is_refused_before_any_server_starts(tmp_path):
    backend = FakeBackend(script(trained_context={STEADY: 700}))
    with pytest.raises(ConfigError) as err:
        Sweep(config(tmp_path), tmp_path / "r.json", None, reporter=Reporter(), backend=backend).run()
    assert backend.specs == []                                 # not even the tokenizer's server
    text = str(err.value)
    assert "$.settings.context_tokens: 1,024: target '7B' with draft 'steady'" in text
    assert "at most 556" in text                               # 700 less the answer's and the draft's room


def test_a_sweep_at_three_lengths_gives_a_verdict_per_length_and_the_crossover(tmp_path):
    backend = FakeBackend(script())
    path = sweep(tmp_path, backend, config(tmp_path))
    data = json.loads(path.read_text())
    # the tokenizer's server first (no draft, a small context), then every measuring server sized to its length
    assert backend.specs[0].draft is None and backend.specs[0].ctx_size == 512
    measuring = backend.specs[1:]
    assert {s.context_tokens for s in measuring} == set(LENGTHS)
    assert all(s.ctx_size >= s.context_tokens + 64 for s in measuring)
    rows = {(r["role"], r["draft"], r["context_tokens"]): r for r in data["results"]}
    assert len(rows) == 9
    for (_, _, n), row in rows.items():
        assert {q["prompt_id"] for q in row["requests"]} == {f"{c}-{n}" for c in LONG_CATEGORIES}
        assert all(abs(q["prompt_tokens"] - n) <= 1 for q in row["requests"])
        assert all(q["server_prefill_tps"] and q["server_prefill_s"] for q in row["requests"])
        assert row["memory"]["peak_rss_mib"] > 100
    assert rows[("speculative", "short-reach", 1024)]["speedup"]["ratio"] == pytest.approx(0.6, rel=0.02)
    entry = data["summary"]["targets"][0]
    context = entry["context"]
    # short-reach was confirmed at the two shorter lengths (that block decides for it); steady is judged by its own
    # interval there, and confirmed at 1,024 tokens
    assert context["lengths"] == LENGTHS and context["reach"] == {"short-reach": 512, "steady": 1024}
    assert context["paying"] == {"256": ["short-reach", "steady"], "512": ["short-reach", "steady"], "1024": ["steady"]}
    assert [p["recommended_draft"] for p in context["per_length"]] == ["short-reach", "short-reach", "steady"]
    assert "At 256 tokens: use short-reach" in entry["verdict"] and "At 1,024 tokens: use steady" in entry["verdict"]
    assert ("Across prompt lengths: steady pays at every length measured (256 to 1k tokens); short-reach pays up "
            "to 512 tokens; from 1k tokens only steady does.") in entry["verdict"]
    # time to first token split: the draft's server prefills too, and the long-prompt figures are per length
    first = context["per_length"][2]
    assert first["baseline"]["prefill_tps"] == pytest.approx(2000, rel=0.05)
    steady = next(c for c in first["candidates"] if c["candidate"] == "steady")
    assert steady["extra_ttft_s"] > 0 and steady["end_to_end_ratio"] > 1
    record = data["prompt_set"]["context"]
    assert record["filler"] == "documents" and record["targets"]["7B"]["1024"]["long-code-edit-1024"] == 1024
    assert record["sources"]["argparse.py"]["python"]
    # the report: the grid at the shortest length, and the three context charts
    figures = build_figures(load_results(path))
    assert set(figures) >= CONTEXT_CHARTS
    assert [t["name"] for t in figures["chart-context-speedup"]["data"]] == ["short-reach", "steady"]
    assert figures["chart-context-speedup"]["layout"]["xaxis"]["type"] == "log"


def test_resuming_a_finished_context_sweep_starts_nothing(tmp_path):
    path = sweep(tmp_path, FakeBackend(script()), config(tmp_path))
    again = FakeBackend(script())
    assert Sweep(config(tmp_path), path, None, reporter=Reporter(), backend=again).run() == EXIT_OK
    assert again.specs == []


def test_a_resume_may_add_lengths_but_not_change_the_prompts_sources(tmp_path, monkeypatch):
    path = sweep(tmp_path, FakeBackend(script()), config(tmp_path, context_tokens=[256, 512]))
    before = [json.dumps(r["requests"]) for r in json.loads(path.read_text())["results"]]
    more = FakeBackend(script())
    assert Sweep(config(tmp_path), path, None, reporter=Reporter(), backend=more).run() == EXIT_OK
    assert {s.context_tokens for s in more.specs[1:]} == {1024}          # only the new length is measured
    data = json.loads(path.read_text())
    assert set(before) <= {json.dumps(r["requests"]) for r in data["results"]} and len(data["results"]) == 9
    # fewer lengths than the file holds, or other prompts: another sweep
    with pytest.raises(Exception, match=r"settings\.context_tokens"):
        Sweep(config(tmp_path, context_tokens=[256]), path, None, reporter=Reporter(), backend=FakeBackend()).run()
    original = long_documents.stdlib_module

    def other_python(name):
        source = original(name)
        return Source(name, source.text, {**source.origin, "sha256": "f" * 64, "python": "3.99.0"})
    monkeypatch.setattr(long_documents, "stdlib_module", other_python)
    with pytest.raises(Exception, match=r"measured on other long prompts.*3\.99\.0"):
        Sweep(config(tmp_path, context_tokens=[256, 512, 1024, 2048]), path, None, reporter=Reporter(),
              backend=FakeBackend(script())).run()


def test_random_token_filler_is_labelled_in_the_verdict_and_the_report(tmp_path):
    from draftbench.report import render_report

    path = sweep(tmp_path, FakeBackend(script()), config(tmp_path, context_tokens=[256, 512], context_filler="random-tokens"))
    data = json.loads(path.read_text())
    assert "by prompt length (random-token filler: the documents' tokens shuffled, which overstates speculative " \
           "gains)" in data["summary"]["targets"][0]["verdict"]
    assert data["prompt_set"]["context"]["filler"] == "random-tokens"
    assert "random-token filler" in render_report(load_results(path))


def test_the_ab_on_long_prompts_splits_first_token_from_decode(tmp_path):
    from draftbench.config.candidates import Candidate
    from draftbench.config.model_ref import ModelRef
    from draftbench.config.settings import Settings
    from draftbench.measure.sequential import MeasureOptions
    from draftbench.sweep.ab import ABPlan, run_ab, screen

    settings = Settings(port=0, runs=2, max_tokens=64, context_tokens=600)
    ab = ABPlan(ModelRef("target", TARGET), Candidate("steady", "steady", draft=ModelRef("steady", STEADY)),
                settings, (), MeasureOptions(runs=2, max_tokens=64), context_tokens=600)
    backend = FakeBackend(script())
    results = run_ab(ab, backend, "llamacpp", tmp_path / "logs", Reporter())
    drafts = [s.draft for s in backend.specs]
    # the tokenizer's server first, then A and B in the sweep's drift-cancelling design (servers in turn)
    assert drafts[0] is None and set(drafts[1:]) == {None, STEADY} and drafts[1:3] == [None, STEADY]
    assert all(s.context_tokens == 600 and s.ctx_size >= 600 + 64 for s in backend.specs[1:])
    assert all(abs(r.prompt_tokens - 600) <= 1 for row in results.results for r in row.requests)
    text = screen(results, ab)
    for line in ("prefill", "first token", "the candidate's own prefill", "end to end", "for 64 output tokens"):
        assert line in " ".join(text.split())
    assert results.prompt_set["context"]["targets"]["target"]["600"]


def test_one_length_still_splits_prefill_from_decode_in_the_summary(tmp_path):
    data = json.loads(sweep(tmp_path, FakeBackend(script()), config(tmp_path, context_tokens=512)).read_text())
    entry = data["summary"]["targets"][0]
    assert entry["verdict"].startswith("7B, by prompt length — At 512 tokens: use short-reach")
    assert "Across prompt lengths" not in entry["verdict"]                   # no crossover with one length
    assert entry["context"]["per_length"][0]["baseline"]["prefill_tps"] is not None
