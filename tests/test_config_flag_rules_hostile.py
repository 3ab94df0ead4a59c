"""Issue 45, one rule table for every route into a server's command: a flag a setting owns, one that changes the
model or its output, and one that blinds what draftbench reads to prove what ran are refused in a sweep and the
A/B with the option to use, and vLLM's --speculative-config keys are held to the same rules whether they come
through extra_args (-sc), settings.vllm_speculative_config or a vLLM candidate's params."""

from __future__ import annotations

import json

import pytest
from draftbench.backends.vllm.backend import VLLMBackend
from draftbench.config.extra_args import check_server_args, find_flags, speculative_config_problems
from draftbench.config.flag_rules import AB, SERVER, FlagKind
from draftbench.sweep.config_file import validate_config

from helpers import run_cli
from test_config_extra_args import config, problems


@pytest.mark.parametrize("backend, args, fix", [
    ("llamacpp", ["-ngl", "5"], "settings.gpu_layers"),
    ("llamacpp", ["--gpu-layers=5"], "settings.gpu_layers"),
    ("llamacpp", ["-c", "512"], "settings.ctx_size"),
    ("llamacpp", ["--ctx-size", "512"], "settings.ctx_size"),
    ("llamacpp", ["-np", "4"], "settings.concurrency"),
    ("llamacpp", ["-n", "8"], "settings.max_tokens"),
    ("llamacpp", ["--n-predict", "8"], "settings.max_tokens"),
    ("vllm", ["--enable-prefix-caching"], "settings.vllm_prefix_caching"),
    ("vllm", ["--max-model-len", "512"], "settings.ctx_size"),
    ("vllm", ["--tensor-parallel-size", "2"], "settings.vllm_tensor_parallel_size"),
    ("vllm", ["-tp", "2"], "settings.vllm_tensor_parallel_size"),
    ("vllm", ["--max-num-seqs", "4"], "settings.concurrency"),
    ("vllm", ["-n", "2"], "settings.vllm_nnodes"),                 # vLLM's -n is --nnodes, llama-server's --n-predict
])
def test_a_flag_a_setting_owns_is_refused_naming_the_setting(backend, args, fix):
    [p] = problems(config(backend=backend, settings={"extra_args": args}))
    assert p.path == "$.settings.extra_args[0]" and "draftbench sets that itself" in p.message, p
    assert p.fix.startswith(f"remove it; use {fix} instead"), p.fix


@pytest.mark.parametrize("backend, args", [
    ("llamacpp", ["--lora", "a.gguf"]), ("llamacpp", ["--lora-scaled", "a.gguf", "0.5"]),
    ("llamacpp", ["--control-vector", "v.gguf"]), ("llamacpp", ["--override-kv", "x.y=int:1"]),
    ("llamacpp", ["--rope-scale", "2"]), ("llamacpp", ["--chat-template", "chatml"]),
    ("llamacpp", ["--ignore-eos"]), ("llamacpp", ["--grammar-file", "g.gbnf"]),
    ("vllm", ["--load-format", "dummy"]), ("vllm", ["--load-format=dummy"]), ("vllm", ["--hf-overrides", "{}"]),
    ("vllm", ["--revision", "main"]), ("vllm", ["--quantization", "fp8"]), ("vllm", ["-q", "fp8"]),
    ("vllm", ["--tokenizer", "/other"]), ("vllm", ["--override-generation-config", "{\"temperature\": 1}"]),
    ("vllm", ["--load-form", "dummy"]),                        # argparse completes a cut-short name
])
def test_a_flag_that_changes_the_model_or_its_output_is_refused(backend, args):
    [p] = problems(config(backend=backend, settings={"extra_args": args}))
    assert "the model's weights or its output" in p.message and p.fix.startswith("remove it: "), p


@pytest.mark.parametrize("backend, args", [("llamacpp", ["--no-slots"]), ("vllm", ["--disable-log-stats"])])
def test_a_flag_that_blinds_the_proof_of_what_ran_is_refused(backend, args):
    [p] = problems(config(backend=backend, settings={"extra_args": args}))
    assert "which draftbench reads to prove what ran" in p.message and p.fix.startswith("remove it: "), p


def test_free_flags_and_the_values_after_switches_stay_free():
    validate_config(config(settings={"extra_args": ["--threads", "2", "-fa", "on", "--batch-size", "512"]}))
    validate_config(config(backend="vllm", settings={"extra_args": ["--enforce-eager", "--kv-cache-memory-bytes",
                                                                    "536870912", "--gpu-memory-utilization", "0.9"]}))
    # a switch takes no value: what follows it is a flag of its own
    assert [(u.name, u.value) for u in find_flags(["--ignore-eos", "-c", "64"])] == [("--ignore-eos", None),
                                                                                     ("-c", "64")]


def test_the_ab_and_server_py_name_their_own_options_or_pass_a_server_for_people_on():
    found, _ = check_server_args("--", ["-ngl", "5", "-c", "64", "-n", "4", "-np", "2", "--lora", "a"],
                                 allow_remote=False, entry=AB)
    assert [p.fix for p in found] == [
        "remove it; use --gpu-layers instead", "remove it; use --ctx-size (or --context-tokens) instead",
        "remove it; use --max-tokens instead", "remove it: the A/B measures one stream",
        "remove it: a row names the model at the target's path and the answers it gave as configured (merge an "
        "adapter into a model file of its own and measure that as a target)"]
    found, _ = check_server_args("--", ["-c", "64", "--lora", "a", "-n", "4", "--no-slots"], allow_remote=False,
                                 entry=SERVER["llamacpp"])
    assert [p.fix for p in found] == ["remove it; use --ctx-size instead",
                                      "remove it: draftbench reads it to prove what the server ran"]
    found, _ = check_server_args("--", ["--max-model-len", "64", "--quantization", "fp8"], allow_remote=False,
                                 entry=SERVER["vllm"])
    assert [p.fix for p in found] == ["remove it; use --max-model-len instead"]


def test_bench_target_refuses_an_owned_flag_before_anything_starts(tmp_path):
    proc = run_cli("bench.py", "--target", "t.gguf", "--draft", "d.gguf", "--", "-t", "1", "--ctx-size", "256",
                   cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("Error: argument 3 after --: sets --ctx-size"), proc.stderr
    assert "use --ctx-size (or --context-tokens) instead" in proc.stderr and len(proc.stderr.splitlines()) <= 2


VLLM = {"name": "v", "hardware": "h", "backend": "vllm", "targets": [{"label": "T", "path": "org/target"}],
        "drafts": [{"label": "D", "path": "org/draft"}]}


@pytest.mark.parametrize("key, value, fix", [
    ("model", "org/other", "a \"drafts\" entry"), ("num_speculative_tokens", 9, "settings.draft_max"),
    ("method", "ngram", "settings.vllm_method"), ("revision", "main", "the draft is the model"),
])
def test_vllm_speculative_config_keys_are_refused_on_every_route(key, value, fix):
    # settings.vllm_speculative_config
    [p] = problems({**VLLM, "settings": {"vllm_speculative_config": {key: value, "prompt_lookup_max": 4}}})
    assert p.path == f"$.settings.vllm_speculative_config.{key}" and fix in p.fix, p
    # a vLLM candidate's params are --speculative-config keys too
    loaded = validate_config({**VLLM, "candidates": [{"label": "c", "draft": "D", "params": {key: value}}]})
    [p] = VLLMBackend().validate_candidates(loaded.specs(), loaded.settings)
    assert p.path == f"$.candidates[0].params.{key}" and fix in p.fix, p
    # and -sc in extra_args, as before
    [p] = problems({**VLLM, "settings": {"extra_args": ["-sc", json.dumps({key: value})]}})
    assert "a candidate's \"method\" and \"params\"" in p.fix
    assert speculative_config_problems("$.x", {"draft_tensor_parallel_size": 1, "prompt_lookup_min": 2}) == []


def test_a_vllm_config_with_another_draft_in_its_speculative_config_is_refused_at_the_command_line(tmp_path):
    path = tmp_path / "v.json"
    path.write_text(json.dumps({**VLLM, "candidates": [{"label": "c", "draft": "D",
                                                         "params": {"model": "org/other",
                                                                    "num_speculative_tokens": 9}}]}))
    proc = run_cli("sweep.py", "--config", str(path), "--dry-run", cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and "$.candidates[0].params.model" in proc.stderr, proc.stderr
    assert "$.candidates[0].params.num_speculative_tokens" in proc.stderr and "Traceback" not in proc.stderr


def test_every_kind_has_an_answer_in_a_sweep():
    from draftbench.config.flag_rules import RULES, SWEEP
    passed_on = {FlagKind.HOST, FlagKind.API_KEY, FlagKind.DRAFT_PLACEMENT}
    assert all(SWEEP.refusal(r) is not None for r in RULES if r.kind not in passed_on)
