"""Issue 45 on the real llama-server: the environment a server gets is the one we decided. An inherited
LLAMA_ARG_SPEC_TYPE does not turn speculation on in a baseline and LLAMA_ARG_CTX_SIZE does not shrink its
context (on b11434 they did: /slots said speculation on and n_ctx 512); LLAMA_ARG_THREADS (free) is in the
recorded command. /slots proves it; the routes come from this build's own --help."""

from __future__ import annotations

import pytest
from draftbench.backends.llamacpp.command import capabilities
from draftbench.config.prompt import Prompt, user_turn
from draftbench.config.server_env import EnvRoute
from draftbench.measure.sequential import MeasureOptions, measure_one

pytestmark = pytest.mark.llama


def test_this_builds_help_names_the_routes_the_rules_decide(llama_bin):
    routes = {n: EnvRoute.from_dict(r) for n, r in capabilities(llama_bin)["env"].items()}
    assert routes["LLAMA_ARG_THREADS"].takes_value and routes["LLAMA_ARG_THREADS"].flags[-1] == "--threads"
    assert routes["LLAMA_ARG_SPEC_TYPE"].flags == ("--spec-type",)
    assert routes["LLAMA_ARG_ENDPOINT_SLOTS"].negative == ("--no-slots",)
    assert len(routes) > 100


def test_an_inherited_spec_type_and_context_do_not_reach_a_baseline(models, start_llama, monkeypatch):
    monkeypatch.setenv("LLAMA_ARG_THREADS", "1")
    monkeypatch.setenv("LLAMA_ARG_SPEC_TYPE", "ngram-mod")
    monkeypatch.setenv("LLAMA_ARG_CTX_SIZE", "512")
    monkeypatch.setenv("LLAMA_ARG_SPEC_SYNTH_LEN", "16")
    server = start_llama(models["base"], ctx_size=1024)
    assert server.command[1:3] == ["--threads", "1"]                 # decided, and recorded
    assert server.command[server.command.index("--spec-type") + 1] == "none"
    [note] = server.notes
    assert "LLAMA_ARG_SPEC_TYPE (--spec-type)" in note and "LLAMA_ARG_CTX_SIZE (-c)" in note
    prompt = Prompt("p", "code", user_turn("Write a Python function that adds two numbers."))
    record = measure_one(server, prompt, MeasureOptions(max_tokens=16, warmup=0), seed=1, max_tokens=16)
    assert record.completion_tokens and record.draft_n in (None, 0)
    assert server.active_methods() == ()                             # /slots: speculative.types none
    assert {s.n_ctx for s in server.slot_states() or ()} == {1024}     # not the environment's 512
