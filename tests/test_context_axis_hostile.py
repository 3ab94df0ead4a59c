"""Issue 45, the context axis: a length is what the server counted, not what we believe. A server that reports
other prompt token counts than its tokenizer gave when the prompt was cut, or a tokenizer that counts half the
real tokens, ends with the baseline failed and its reason, never with rows judged at lengths they were not; a
resume refused for other long prompts leaves the results file untouched."""

from __future__ import annotations

import json

import pytest
from draftbench.common.errors import RequestError, ResultsFileError
from draftbench.config import long_documents
from draftbench.config.long_documents import Source
from draftbench.config.prompt import Prompt
from draftbench.measure.sequential import check_prompt_tokens
from draftbench.results.kinds import Status
from draftbench.sweep import EXIT_INCOMPLETE, Sweep
from draftbench.sweep.console import Reporter

from fakes.inprocess import FakeBackend
from test_context_axis import config, plays, script, sweep  # noqa: F401  (plays: a fixture)


@pytest.mark.parametrize("lie", [{"reported_prompt_tokens": 100}, {"tokenizer_share": 0.5}])
def test_a_server_or_tokenizer_that_miscounts_leaves_no_row_judged_at_a_wrong_length(tmp_path, lie):
    path = tmp_path / "r.json"
    code = Sweep(config(tmp_path, context_tokens=[512, 1024]), path, None, reporter=Reporter(),
                 backend=FakeBackend(script(**lie))).run()
    assert code == EXIT_INCOMPLETE
    rows = json.loads(path.read_text())["results"]
    assert {r["status"] for r in rows} == {Status.ERROR.value, Status.SKIPPED.value}
    baselines = [r for r in rows if r["role"] == "baseline"]
    assert len(baselines) == 2 and all("prompt tokens for long-" in b["reason"] and "which its own tokenizer "
                                       "counted as" in b["reason"] for b in baselines)
    assert not any(r.get("speedup") for r in rows)


def test_the_check_allows_the_cut_s_tolerance_and_says_both_counts():
    prompt = Prompt("long-code-512", "long-code", ({"role": "user", "content": "x"},), tokens=512)
    check_prompt_tokens(prompt, 510)            # a token merged across the cut, the BOS: within tolerance
    check_prompt_tokens(prompt, None)           # a server that reports no usage: nothing to compare
    check_prompt_tokens(Prompt("p", "c", ()), 5)   # not a long prompt
    with pytest.raises(RequestError, match=r"counted 100 prompt tokens for long-code-512 .* counted as 512"):
        check_prompt_tokens(prompt, 100)


def test_a_resume_refused_for_other_long_prompts_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    path = sweep(tmp_path, FakeBackend(script()), config(tmp_path, context_tokens=[256]))
    before, mtime = path.read_bytes(), path.stat().st_mtime_ns
    original = long_documents.stdlib_module

    def other_python(name):
        source = original(name)
        return Source(name, source.text, {**source.origin, "sha256": "e" * 64, "python": "3.98.0"})
    monkeypatch.setattr(long_documents, "stdlib_module", other_python)
    untouched = FakeBackend(script())
    with pytest.raises(ResultsFileError, match=r"measured on other long prompts.*3\.98\.0"):
        Sweep(config(tmp_path, context_tokens=[256, 512]), path, None, reporter=Reporter(), backend=untouched).run()
    assert path.read_bytes() == before and path.stat().st_mtime_ns == mtime
    assert untouched.specs == []                 # not even the tokenizer's server


def test_a_server_holding_less_context_than_it_was_started_for_is_refused(http_stub):
    from draftbench.backends.llamacpp.backend import LlamaCppServer
    from draftbench.backends.llamacpp.memory import check_slot_context
    from draftbench.common.errors import ServerError

    stub = http_stub({"GET /slots": (200, [{"id": 0, "n_ctx": 128, "is_processing": False}])})
    server = LlamaCppServer(f"http://127.0.0.1:{stub.port}", model="t.gguf")
    check_slot_context(server, 128)
    with pytest.raises(ServerError, match=r"holds 128 tokens of context per slot \(/slots n_ctx\), fewer than the "
                                          r"1,600 it was started for"):
        check_slot_context(server, 1600)
    blind = http_stub({"GET /slots": (501, {"error": "slots disabled"})})
    check_slot_context(LlamaCppServer(f"http://127.0.0.1:{blind.port}", model="t.gguf"), 1600)   # nothing to compare
