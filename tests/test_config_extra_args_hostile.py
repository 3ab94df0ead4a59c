"""Issue 36, pass-through flags: after `--` (bench.py --target, server.py) and in a config's extra_args, a flag that
changes what is measured is refused with the option to use instead, or held to the checks of the config's own field
(`--rpc` behind allow_remote, with its warning); one rule table for all three, every spelling the servers accept."""

from __future__ import annotations

import pytest
from draftbench.config.extra_args import check_server_args, find_flags, take_rpc
from draftbench.config.flag_rules import AB, SERVER, SWEEP, FlagKind
from draftbench.sweep.config_file import validate_config

from helpers import run_cli
from test_config_extra_args import config, problems


@pytest.mark.parametrize("arg, kind", [
    ("-m", FlagKind.TARGET), ("--model=x.gguf", FlagKind.TARGET), ("-hf", FlagKind.TARGET),
    ("--fim-qwen-7b-spec", FlagKind.TARGET),
    ("-md", FlagKind.DRAFT), ("-md=x.gguf", FlagKind.DRAFT), ("--model-draft", FlagKind.DRAFT),
    ("--spec-draft-model", FlagKind.DRAFT), ("--model_draft", FlagKind.DRAFT),
    ("--spec-draft-n-max", FlagKind.DRAFT_LENGTH), ("--draft-max", FlagKind.DRAFT_LENGTH),
    ("--spec-type", FlagKind.SPECULATION), ("--spec_type=ngram-mod", FlagKind.SPECULATION),
    ("--spec-ngram-mod-n-match", FlagKind.SPECULATION), ("--spec-some-future-flag", FlagKind.SPECULATION),
    ("-sc", FlagKind.SPECULATION), ("--speculative-config.method=ngram", FlagKind.SPECULATION),
    ("--speculative-conf", FlagKind.SPECULATION),                           # argparse completes it (vLLM)
    ("--rpc", FlagKind.RPC), ("--rpc=10.0.0.1:50052", FlagKind.RPC), ("--rp", FlagKind.RPC),
    ("--host=0.0.0.0", FlagKind.HOST), ("--port", FlagKind.PORT), ("--api_key", FlagKind.API_KEY),
    ("--config", FlagKind.CONFIG_FILE),
    ("-ngld", FlagKind.DRAFT_PLACEMENT), ("--spec-draft-ngl", FlagKind.DRAFT_PLACEMENT),
    ("-td", FlagKind.DRAFT_PLACEMENT),
])
def test_every_spelling_is_recognised(arg, kind):
    [use] = find_flags([arg, "value"])
    assert use.rule.kind is kind


@pytest.mark.parametrize("args", [["--threads", "4"], ["-t", "-1"], ["-fa", "on"], ["--batch-size", "512"],
                                  ["--gpu-memory-utilization", "0.9"], ["--enforce-eager"]])
def test_ordinary_flags_are_left_alone(args):
    assert find_flags(args) == []


@pytest.mark.parametrize("args, where, instead", [
    (["-md", "other.gguf"], "$.settings.extra_args[0]", "a \"drafts\" entry"),
    (["-t", "2", "-m=x.gguf"], "$.settings.extra_args[2]", "the target's \"path\""),
    (["--spec-type", "ngram-mod"], "$.settings.extra_args[0]", "a candidate's \"method\" and \"params\""),
    (["--spec-draft-n-max", "8"], "$.settings.extra_args[0]", "settings.draft_max"),
    (["--rpc=127.0.0.1:50052"], "$.settings.extra_args[0]", "the target's \"rpc\""),
])
def test_a_sweep_refuses_what_changes_the_measurement_naming_the_key(args, where, instead):
    [p] = problems(config(settings={"extra_args": args}))
    assert p.path == where and "draftbench sets that itself" in p.message and instead in p.fix


def test_a_drafts_placement_flags_are_allowed_its_speculation_is_not():
    validate_config(config(drafts=[{"label": "D", "path": "/d.gguf", "extra_args": ["-ngld", "0", "-td", "2"]}]))
    [p] = problems(config(candidates=[{"label": "c", "method": "ngram-mod",
                                       "extra_args": ["--spec-ngram-mod-n-match", "8"]}]))
    assert p.path == "$.candidates[0].extra_args[0]" and "\"params\"" in p.fix


def test_rpc_in_server_py_is_held_to_the_targets_checks():
    entry = SERVER["llamacpp"]
    found, warnings = check_server_args("--", ["--rpc", "10.0.0.1:50052"], allow_remote=False, entry=entry)
    assert "on another machine" in found[0].message and found[0].fix.endswith("--allow-remote")
    found, warnings = check_server_args("--", ["--rpc", "10.0.0.1:50052"], allow_remote=True, entry=entry)
    assert found == [] and "proof-of-concept" in warnings[0]
    for bad in ("127.0.0.1:5²", "127.0.0.1:５００５２"):
        found, _ = check_server_args("--", ["--rpc", bad], allow_remote=True, entry=entry)
        assert "not only the digits 0-9" in found[0].message
    assert take_rpc(["-t", "2", "--rpc", "127.0.0.1:1,127.0.0.1:2", "-fa"]) == (("127.0.0.1:1", "127.0.0.1:2"),
                                                                             ["-t", "2", "-fa"])


def test_the_ab_and_server_py_name_their_own_options():
    found, _ = check_server_args("--", ["-md", "x", "-m", "y", "--spec-type", "ngram-mod", "--draft", "3"],
                                 allow_remote=False, entry=AB)
    assert [p.fix for p in found] == ["remove it; use --draft instead", "remove it; use --target instead",
                                      "remove it; use --spec-type instead (other parameters: a sweep config's "
                                      "candidate \"params\")", "remove it; use --draft-max instead"]
    found, _ = check_server_args("--", ["-m", "y", "--spec-type", "ngram-mod"], allow_remote=False,
                                 entry=SERVER["llamacpp"])
    assert [p.fix for p in found] == ["remove it; use --model-path instead"]      # server.py passes speculation on
    found, _ = check_server_args("--", ["--speculative-config", "{}"], allow_remote=False, entry=SERVER["vllm"])
    assert "--method, --draft-model and --num-speculative-tokens" in found[0].fix
    assert SWEEP.instead[FlagKind.PORT].startswith("settings.port")


@pytest.mark.parametrize("after, message", [
    (["-md", "trunc8.gguf"], "argument 1 after --: sets -md"),
    (["-m", "other.gguf"], "argument 1 after --: sets -m"),
    (["--rpc", "203.0.113.5:50052"], "argument 1 after --: sets --rpc"),
    (["-t", "2", "--spec-draft-n-max=8"], "argument 3 after --: sets --spec-draft-n-max"),
])
def test_bench_target_refuses_before_anything_starts(tmp_path, after, message):
    proc = run_cli("bench.py", "--target", "t.gguf", "--draft", "d.gguf", "--", *after, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("Error: ") and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "This is a bug" not in proc.stderr


def test_server_py_refuses_a_remote_rpc_without_allow_remote_and_warns_with_it(tmp_path):
    missing = str(tmp_path / "missing.gguf")
    proc = run_cli("server.py", "llama-cpp", "--model-path", missing, "--", "--rpc", "10.0.0.1:50052", timeout=60)
    assert proc.returncode == 2 and "argument 1 after --: 10.0.0.1:50052 is on another machine" in proc.stderr
    proc = run_cli("server.py", "--allow-remote", "llama-cpp", "--model-path", missing, "--", "--rpc",
                   "10.0.0.1:50052", timeout=60)
    assert proc.returncode == 2 and "does not exist" in proc.stderr          # past the gate, stopped at the model
    assert "Warning: argument 1 after --: 10.0.0.1:50052 is reached over the network" in proc.stdout
    proc = run_cli("server.py", "llama-cpp", "--model-path", missing, "--", "-md", "x.gguf", timeout=60)
    assert proc.returncode == 2 and "use --draft-path instead" in proc.stderr


def test_a_value_is_never_read_as_a_flag():
    # an API key, or any value, that looks like a covered flag is the previous flag's value
    assert [u.name for u in find_flags(["--api-key", "--spec-x", "--threads", "4"])] == ["--api-key"]
    assert [(u.name, u.value) for u in find_flags(["--spec-default", "-md", "d.gguf"])] == [
        ("--spec-default", None), ("-md", "d.gguf")]
