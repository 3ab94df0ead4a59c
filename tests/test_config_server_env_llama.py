"""Issue 45 on the real llama-server: the environment a server gets is the one we decided. Passed on as it was,
LLAMA_ARG_SPEC_DRAFT_N_MAX=1 made a draft candidate draft one token a step while its row said the server's
default k, and LLAMA_ARG_SPEC_SYNTH_LEN turned measured acceptance into a synthetic one (checked on this build:
21 drafted, 21 steps, 9 accepted). Now they are cleared and named; LLAMA_ARG_THREADS (free) is in the recorded
command; an inherited LLAMA_ARG_SPEC_TYPE does not turn speculation on in a baseline (/slots proves it), nor
LLAMA_ARG_CTX_SIZE shrink its context. The routes come from this build's own --help."""

from __future__ import annotations

import pytest
from draftbench.backends.llamacpp.command import capabilities
from draftbench.config.prompt import Prompt, user_turn
from draftbench.config.server_env import EnvRoute
from draftbench.measure.sequential import MeasureOptions, measure_one

pytestmark = pytest.mark.llama
PROMPT = Prompt("p", "code", user_turn("Count from 1 to 100, separated by commas."))


def test_this_builds_help_names_the_routes_the_rules_decide(llama_bin):
    routes = {n: EnvRoute.from_dict(r) for n, r in capabilities(llama_bin)["env"].items()}
    assert routes["LLAMA_ARG_THREADS"].takes_value and routes["LLAMA_ARG_THREADS"].flags[-1] == "--threads"
    assert routes["LLAMA_ARG_SPEC_TYPE"].flags == ("--spec-type",)
    assert routes["LLAMA_ARG_ENDPOINT_SLOTS"].negative == ("--no-slots",)
    assert routes["LLAMA_ARG_KV_OFFLOAD"].negative == ("-nkvo", "--no-kv-offload")
    assert len(routes) > 100


def test_the_environment_neither_shortens_a_candidates_drafts_nor_fakes_its_acceptance(models, start_llama,
                                                                                       monkeypatch):
    monkeypatch.setenv("LLAMA_ARG_SPEC_DRAFT_N_MAX", "1")
    monkeypatch.setenv("LLAMA_ARG_SPEC_SYNTH_LEN", "1.5")
    server = start_llama(models["target-2x"], models["base"], ctx_size=1024)
    [note] = server.notes
    assert "LLAMA_ARG_SPEC_DRAFT_N_MAX (--spec-draft-n-max)" in note and "LLAMA_ARG_SPEC_SYNTH_LEN" in note
    record = measure_one(server, PROMPT, MeasureOptions(max_tokens=32, warmup=0), seed=1, max_tokens=32)
    assert record.verify_steps and record.draft_n and record.draft_n > record.verify_steps   # k > 1 a step


def test_an_inherited_spec_type_and_context_do_not_reach_a_baseline(models, start_llama, monkeypatch):
    monkeypatch.setenv("LLAMA_ARG_THREADS", "1")
    monkeypatch.setenv("LLAMA_ARG_SPEC_TYPE", "ngram-mod")
    monkeypatch.setenv("LLAMA_ARG_CTX_SIZE", "512")
    server = start_llama(models["base"], ctx_size=1024)
    assert server.command[1:3] == ["--threads", "1"]                 # decided, and recorded
    [note] = server.notes
    assert "LLAMA_ARG_SPEC_TYPE (--spec-type)" in note and "LLAMA_ARG_CTX_SIZE (-c)" in note
    record = measure_one(server, PROMPT, MeasureOptions(max_tokens=16, warmup=0), seed=1, max_tokens=16)
    assert record.completion_tokens and record.draft_n in (None, 0)
    assert server.active_methods() == ()                             # /slots: speculative.types none
    assert {s.n_ctx for s in server.slot_states() or ()} == {1024}     # not the environment's 512
