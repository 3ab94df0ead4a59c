"""Issue 45, the environment a server gets is the one we decided: no LLAMA_ARG_* variable reaches llama-server
as it is. One whose flag is free in the rule table (LLAMA_ARG_THREADS) becomes that flag at the front of the
command, where it is recorded and every later flag still wins; every other one (speculation, the context, a
draft, an unknown name, a value llama-server would not read) is cleared and named in one note. vLLM's VLLM_*
variables are passed and recorded in one note, secrets masked."""

from __future__ import annotations

from draftbench.backends.base import LaunchSpec
from draftbench.backends.llamacpp.command import build_command, env_routes, server_environment
from draftbench.config.server_env import vllm_environment

from helpers import default_settings

# The shapes of llama-server's --help (common_arg::to_string: the description at column 40, or on the next line)
HELP = """\
-t,    --threads N                      number of CPU threads to use during generation (default: -1)
                                        (env: LLAMA_ARG_THREADS)
-c,    --ctx-size N                     size of the prompt context (default: 4096, 0 = loaded from model)
                                        (env: LLAMA_ARG_CTX_SIZE)
--mmap, --no-mmap                       whether to memory-map model (default: enabled)
                                        (env: LLAMA_ARG_MMAP)
-fa,   --flash-attn [on|off|auto]       set Flash Attention use ('on', 'off', or 'auto', default: 'auto')
                                        (env: LLAMA_ARG_FLASH_ATTN)
--spec-type [none|draft-simple|ngram-mod]
                                        speculative decoding types (default: none)
                                        (env: LLAMA_ARG_SPEC_TYPE)
--spec-synth-len N                      benchmarking only: accept N tokens of each draft
                                        (env: LLAMA_ARG_SPEC_SYNTH_LEN)
--spec-draft-n-max N                    number of tokens to draft (default: 16)
                                        (env: LLAMA_ARG_SPEC_DRAFT_N_MAX)
-md,   --model-draft FNAME              draft model for speculative decoding (default: unused)
                                        (env: LLAMA_ARG_MODEL_DRAFT)
-ngld, --gpu-layers-draft N             number of layers to store in VRAM for the draft model
                                        (env: LLAMA_ARG_N_GPU_LAYERS_DRAFT)
--rpc SERVERS                           comma separated list of RPC servers (host:port)
                                        (env: LLAMA_ARG_RPC)
--slots, --no-slots                     expose slots monitoring endpoint (default: enabled)
                                        (env: LLAMA_ARG_ENDPOINT_SLOTS)
--no-warmup                             skip warming up the model with an empty run
                                        (env: LLAMA_ARG_NO_WARMUP)
--api-key KEY                           API key to use for authentication (default: none)
                                        (env: LLAMA_API_KEY)
-hft,  --hf-token TOKEN                 Hugging Face access token (default: value from HF_TOKEN environment
                                        variable)
                                        (env: HF_TOKEN)
"""
CAPS = {"flags": ["-m", "--spec-type", "-np"], "env": {n: r.to_dict() for n, r in env_routes(HELP).items()}}


def test_the_routes_are_read_from_help_as_llama_cpp_prints_them():
    routes = env_routes(HELP)
    assert routes["LLAMA_ARG_THREADS"].flags == ("-t", "--threads") and routes["LLAMA_ARG_THREADS"].takes_value
    assert routes["LLAMA_ARG_MMAP"].flags == ("--mmap",) and routes["LLAMA_ARG_MMAP"].negative == ("--no-mmap",)
    assert not routes["LLAMA_ARG_MMAP"].takes_value and routes["LLAMA_ARG_FLASH_ATTN"].takes_value
    assert routes["LLAMA_ARG_SPEC_TYPE"].flags == ("--spec-type",)          # its description on the next line
    assert routes["LLAMA_ARG_NO_WARMUP"].flags == ("--no-warmup",) and routes["HF_TOKEN"].flags[-1] == "--hf-token"


def test_free_variables_become_recorded_flags_and_the_rest_are_cleared_and_named():
    environ = {"PATH": "/bin", "HF_TOKEN": "hf_x", "LLAMA_ARG_THREADS": "1", "LLAMA_ARG_FLASH_ATTN": "on",
               "LLAMA_ARG_NO_MMAP": "1", "LLAMA_ARG_NO_WARMUP": "true",
               "LLAMA_ARG_SPEC_SYNTH_LEN": "16", "LLAMA_ARG_SPEC_DRAFT_N_MAX": "1", "LLAMA_ARG_MODEL_DRAFT": "/d.gguf",
               "LLAMA_ARG_SPEC_TYPE": "ngram-mod", "LLAMA_ARG_CTX_SIZE": "512", "LLAMA_ARG_RPC": "127.0.0.1:5",
               "LLAMA_ARG_NO_ENDPOINT_SLOTS": "1", "LLAMA_API_KEY": "k", "LLAMA_ARG_FROM_THE_FUTURE": "1",
               "LLAMA_ARG_N_GPU_LAYERS_DRAFT": "0"}
    decided = server_environment(CAPS, environ)
    assert decided.env == {"PATH": "/bin", "HF_TOKEN": "hf_x"}          # no LLAMA_ARG_* reaches the server
    assert decided.args == ("--flash-attn", "on", "--no-mmap", "--no-warmup", "--gpu-layers-draft", "0",
                            "--threads", "1")          # in the variables' order
    cleared = {c.split(" ")[0] for c in decided.cleared}
    assert cleared == {"LLAMA_ARG_SPEC_SYNTH_LEN", "LLAMA_ARG_SPEC_DRAFT_N_MAX", "LLAMA_ARG_MODEL_DRAFT",
                       "LLAMA_ARG_SPEC_TYPE", "LLAMA_ARG_CTX_SIZE", "LLAMA_ARG_RPC", "LLAMA_ARG_NO_ENDPOINT_SLOTS",
                       "LLAMA_API_KEY", "LLAMA_ARG_FROM_THE_FUTURE"}
    note = decided.note("llama-server")
    assert note is not None and "\n" not in note and "LLAMA_ARG_SPEC_TYPE (--spec-type)" in note
    assert "LLAMA_ARG_FROM_THE_FUTURE (not an option of this llama-server)" in note
    assert server_environment(CAPS, {"PATH": "/bin", "LLAMA_ARG_THREADS": "1"}).note("llama-server") is None


def test_the_flags_standing_for_the_environment_come_first_so_every_later_flag_wins(tmp_path):
    decided = server_environment(CAPS, {"LLAMA_ARG_THREADS": "1"})
    spec = LaunchSpec(target="/t.gguf", port=8080, ctx_size=256, settings=default_settings(),
                      extra_args=("--threads", "4"))
    cmd = build_command("llama-server", CAPS, spec, inherited=decided.args)
    assert cmd[:3] == ["llama-server", "--threads", "1"] and cmd[-2:] == ["--threads", "4"]
    assert cmd[cmd.index("--spec-type") + 1] == "none"          # a baseline is a baseline, whatever the environment


def test_a_value_llama_server_would_not_read_as_on_or_off_is_cleared():
    decided = server_environment(CAPS, {"LLAMA_ARG_MMAP": "maybe"})
    assert decided.args == () and "'maybe' is not a value llama-server reads" in decided.cleared[0]


def test_vllm_variables_are_passed_and_recorded_in_one_note_with_secrets_masked():
    decided = vllm_environment({"PATH": "/bin", "VLLM_ATTENTION_BACKEND": "TORCH_SDPA", "VLLM_API_KEY": "s3cret",
                                "VLLM_LOGGING_LEVEL": "DEBUG", "VLLM_CPU_KVCACHE_SPACE": "4"})
    assert decided.env["VLLM_ATTENTION_BACKEND"] == "TORCH_SDPA" and decided.args == ()
    note = decided.note("vLLM")
    assert note == ("vLLM inherits VLLM_API_KEY=***, VLLM_ATTENTION_BACKEND=TORCH_SDPA from the environment "
                    "(recorded here; draftbench does not check what it changes)")
    assert vllm_environment({"VLLM_LOGGING_LEVEL": "INFO"}).note("vLLM") is None


def test_capabilities_another_version_cached_without_the_routes_are_read_again(tmp_path, monkeypatch):
    """A cache file of the same format number written by another version (no "env") would clear every variable,
    LLAMA_ARG_THREADS too, as "not an option": it is read again from --help."""
    import json

    from draftbench.backends.llamacpp import command

    monkeypatch.setenv("DRAFTBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(command, "_caps_memo", {})
    binary = tmp_path / "llama-server"
    (tmp_path / "help.txt").write_text("-m,    --model FNAME                    model path\n" + HELP)
    binary.write_text(f"#!/bin/sh\ncat {tmp_path / 'help.txt'}\n")
    binary.chmod(0o755)
    command.capabilities(str(binary))
    [cached] = (tmp_path / "cache" / "capabilities").glob(f"*-v{command.CAPS_FORMAT}.json")
    cached.write_text(json.dumps({k: v for k, v in json.loads(cached.read_text()).items() if k != "env"}))
    monkeypatch.setattr(command, "_caps_memo", {})
    caps = command.capabilities(str(binary))
    assert server_environment(caps, {"LLAMA_ARG_THREADS": "1"}).args == ("--threads", "1")
