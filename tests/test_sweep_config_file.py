"""draftbench.sweep.config_file: loading and validating sweep configs; every problem names where, what and the fix."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from draftbench.common.errors import ConfigError, Problem
from draftbench.common.files import expand_env, expand_path
from draftbench.config.settings import COMMON_SETTINGS
from draftbench.sweep.config_file import SweepConfig, load_config, validate_config

REPO = Path(__file__).resolve().parent.parent


def base_config(**overrides) -> dict:
    cfg = {
        "name": "qwen-test",
        "hardware": "box-1",
        "backend": "llamacpp",
        "model_family": "Qwen2.5",
        "targets": [{"label": "7B Q4", "path": "/models/t.gguf"}],
        "drafts": [{"label": "0.5B Q8", "path": "/models/d.gguf"}],
        "settings": {"runs": 2},
    }
    cfg.update(overrides)
    return cfg


def problems_of(data, **kwargs) -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        validate_config(data, **kwargs)
    problems = info.value.problems
    for p in problems:
        assert p.path.startswith("$"), p
        assert p.message, p
        assert p.fix, f"problem without a fix: {p}"
    return problems


def only_problem(data, **kwargs) -> Problem:
    problems = problems_of(data, **kwargs)
    assert len(problems) == 1, problems
    return problems[0]


def write_config(tmp_path: Path, data, name: str = "sweep.json") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


# --------------------------------------------------------------------------- good configs

def test_example_config_loads():
    cfg = load_config(REPO / "configs" / "example_sweep.json")
    assert isinstance(cfg, SweepConfig)
    assert cfg.name == "qwen25-72b" and cfg.backend == "llamacpp"
    assert [t.label for t in cfg.targets] == ["72B Q8_0", "72B Q4_K_M"]
    assert len(cfg.drafts) == 3
    assert cfg.settings.runs == 1 and cfg.settings.max_tokens == 1024
    assert cfg.settings.prompts == "standard"         # the default: a pool large enough for fresh stages
    assert cfg.warnings == ()
    assert cfg.default_stem() == "m2ultra-128gb_llamacpp_qwen25-72b"


@pytest.mark.parametrize("example", sorted((REPO / "configs").glob("*.json")), ids=lambda p: p.name)
def test_every_shipped_config_loads_without_a_warning(example):
    """The configs people copy say what the code wants: none draws a warning (settings.runs where nothing repeats,
    a setting the code would question)."""
    assert load_config(example).warnings == ()


def test_runs_draws_a_warning_only_where_nothing_it_repeats_is_measured():
    """The stages measure every fresh prompt once: runs repeats only other concurrency levels, drafts alone and
    ceiling runs, so it is questioned only where none of those is measured."""
    (warning,) = validate_config(base_config()).warnings
    assert warning.path == "$.settings.runs" and "precision comes from more stages" in warning.message
    for uses_runs in ({"concurrency": [1, 2]}, {"draft_alone": True}, {"ceiling": True}):
        assert validate_config(base_config(settings={"runs": 3, **uses_runs})).warnings == ()
    assert validate_config(base_config(settings={})).warnings == ()


def test_demo_config_uses_the_cache_default(monkeypatch):
    monkeypatch.delenv("DRAFTBENCH_CACHE", raising=False)
    cfg = load_config(REPO / "configs" / "demo_sweep.json")
    expected = os.path.expanduser("~/.cache/draftbench/models/smollm2-target-3x.Q4_1.gguf")
    assert cfg.targets[0].path == expected
    assert cfg.targets[0].raw_path.startswith("${DRAFTBENCH_CACHE:-~/.cache/draftbench}")
    assert all(os.path.isabs(m.path) and "$" not in m.path and "~" not in m.path
               for m in cfg.targets + cfg.drafts)
    assert cfg.settings.prompts == ["code", "json", "code-edit", "prose"]
    assert [c.label for c in cfg.candidates] == ["ngram-simple"]


def test_demo_config_follows_the_cache_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("DRAFTBENCH_CACHE", str(tmp_path / "cache"))
    cfg = load_config(REPO / "configs" / "demo_sweep.json")
    assert cfg.drafts[0].path == str(tmp_path / "cache" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")


def test_defaults_are_filled_in():
    cfg = validate_config(base_config(settings={}))
    for key, spec in COMMON_SETTINGS.items():
        if key != "prompts":
            assert getattr(cfg.settings, key) == spec.default, key
    assert cfg.draft_max_values == (None,)


def test_null_settings_mean_defaults():
    cfg = validate_config(base_config(settings={"runs": None, "port": None}))
    assert cfg.settings.runs == 1 and cfg.settings.port == 8080
    assert validate_config(base_config(settings=None)).settings.runs == 1


def test_minimal_config():
    cfg = validate_config({"name": "x", "targets": [{"label": "T", "path": "t.gguf"}]}, base_dir="/cfg")
    assert cfg.hardware == "unknown" and cfg.backend == "llamacpp" and cfg.drafts == ()
    assert cfg.targets[0].path == "/cfg/t.gguf"


def test_relative_paths_resolve_against_the_config_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    path = write_config(tmp_path / "sub", base_config(targets=[{"label": "T", "path": "../models/t.gguf"}]))
    cfg = load_config(path)
    assert cfg.targets[0].path == str(tmp_path / "models" / "t.gguf")
    assert cfg.base_dir == str((tmp_path / "sub").resolve())


def test_draft_max_list_and_per_model_args():
    cfg = validate_config(base_config(settings={"draft_max": [4, 8, 16]},
                                      drafts=[{"label": "d", "path": "/d.gguf", "extra_args": ["-t", "4"]}]))
    assert cfg.draft_max_values == (4, 8, 16)
    assert cfg.drafts[0].extra_args == ("-t", "4")
    assert validate_config(base_config(settings={"draft_max": 8})).draft_max_values == (8,)


def test_builtin_category_list_and_prompt_file(tmp_path):
    cfg = validate_config(base_config(settings={"prompts": ["code", "prose"]}))
    assert cfg.settings.prompts == ["code", "prose"]
    (tmp_path / "p.txt").write_text("one\ntwo\n")
    cfg = validate_config(base_config(settings={"prompts": "p.txt"}), base_dir=str(tmp_path))
    assert cfg.settings.prompts == str(tmp_path / "p.txt")


# --------------------------------------------------------------------------- unknown names are errors

def test_unknown_keys_are_errors_that_suggest_the_key_meant():
    data = base_config(extra_top=1, settings={"runs": 2, "max_token": 64})
    data["targets"][0]["colour"] = "red"
    data["candidates"] = [{"label": "ngram", "method": "ngram-mod", "parms": {}}]
    problems = {p.path: p for p in problems_of(data)}
    assert set(problems) == {"$.extra_top", "$.settings.max_token", "$.targets[0].colour", "$.candidates[0].parms"}
    assert problems["$.settings.max_token"].message == "unknown key"
    assert problems["$.settings.max_token"].fix == "did you mean max_tokens?"
    assert problems["$.candidates[0].parms"].fix == "did you mean params?"
    assert problems["$.extra_top"].fix.startswith("use one of: ")      # nothing close: the known keys


def test_the_other_backends_settings_say_whose_they_are():
    problem = only_problem(base_config(settings={"vllm_method": "ngram"}))
    assert problem.path == "$.settings.vllm_method" and "backend vllm" in problem.message
    assert problem.fix == "remove it, or set \"backend\": \"vllm\""


@pytest.mark.parametrize("settings,path,fix", [
    ({"search": "adaptiv"}, "$.settings.search", "did you mean 'adaptive'?"),
    ({"prompts": ["code", "chatt"]}, "$.settings.prompts[1]", "did you mean 'chat'?"),
])
def test_misspelt_choices_suggest_the_one_meant(settings, path, fix):
    problem = only_problem(base_config(settings=settings))
    assert problem.path == path and fix in str(problem)


def test_misspelt_backend_and_draft_label_suggest_the_one_meant():
    assert only_problem(base_config(backend="llamacp")).fix == "did you mean 'llamacpp'?"
    data = base_config(candidates=[{"label": "hybrid", "draft": "0.5B Q9", "method": ["draft-simple", "ngram-mod"]}])
    assert only_problem(data).fix == "did you mean '0.5B Q8'?"


# --------------------------------------------------------------------------- missing keys, wrong types

def test_missing_required_keys_are_all_reported():
    problems = problems_of({"hardware": "box"})
    paths = {p.path for p in problems}
    assert paths == {"$.name", "$.targets"}
    assert all("is missing" in p.message for p in problems)


def test_empty_targets():
    p = only_problem(base_config(targets=[]))
    assert p.path == "$.targets" and p.message == "is empty" and "target" in p.fix


def test_config_must_be_an_object():
    p = only_problem([1, 2])
    assert p.path == "$" and "must be a JSON object, not list" in p.message


@pytest.mark.parametrize("settings,path,cause,fix", [
    ({"runs": "3"}, "$.settings.runs", 'must be an integer, not str "3"', "write 3 without quotes"),
    ({"runs": 2.5}, "$.settings.runs", "must be an integer, not float 2.5", "whole number"),
    ({"runs": True}, "$.settings.runs", "must be an integer, not bool true", "whole number"),
    ({"runs": 0}, "$.settings.runs", "is 0; must be ≥ 1", "at least 1"),
    ({"port": 70000}, "$.settings.port", "is 70000; must be ≤ 65535", "at most 65535"),
    ({"temperature": "0.5"}, "$.settings.temperature", 'must be a number, not str "0.5"',
     "write 0.5 without quotes"),
    ({"temperature": "hot"}, "$.settings.temperature", 'must be a number, not str "hot"', "use a finite number"),
    ({"noise_floor": 2}, "$.settings.noise_floor", "is 2.0; must be ≤ 1", "at most 1"),
    ({"control_baseline": "yes"}, "$.settings.control_baseline", 'must be true or false, not "yes"',
     "write true or false"),
    ({"control_baseline": "true"}, "$.settings.control_baseline", "must be true or false",
     "write true without quotes"),
    ({"host": ""}, "$.settings.host", 'must be a non-empty string, not ""', "double quotes"),
    ({"extra_args": "--threads 8"}, "$.settings.extra_args", "must be a list of strings",
     "quote every argument separately"),
    ({"extra_args": ["-t", 8]}, "$.settings.extra_args", "must be a list of strings", "quote every argument"),
    ({"prompts": 5}, "$.settings.prompts", 'must be "standard", "builtin", a list of categories and sets or a file '
     'path, not 5', '"standard"'),
    ({"prompts": ["code", "poetry"]}, "$.settings.prompts[1]", "unknown prompt category or set 'poetry'",
     "choose from builtin, code, json"),
    ({"prompts": []}, "$.settings.prompts", "is an empty list", "name at least one"),
])
def test_bad_setting_values(settings, path, cause, fix):
    p = only_problem(base_config(settings=settings))
    assert p.path == path
    assert cause in p.message
    assert fix in p.fix


@pytest.mark.parametrize("draft_max,path,cause", [
    ([], "$.settings.draft_max", "is an empty list"),
    ([4, 0], "$.settings.draft_max[1]", "is 0; must be ≥ 1"),
    ([4, 300], "$.settings.draft_max[1]", "is 300; must be ≤ 256"),
    ([4, "8"], "$.settings.draft_max[1]", 'must be an integer, not "8"'),
    ([4, True], "$.settings.draft_max[1]", "must be an integer, not true"),
    ([4, 8, 4], "$.settings.draft_max", "lists 4 more than once"),
    ("8", "$.settings.draft_max", 'must be an integer, not "8"'),
    (0, "$.settings.draft_max", "is 0; must be ≥ 1"),
])
def test_bad_draft_max(draft_max, path, cause):
    p = only_problem(base_config(settings={"draft_max": draft_max}))
    assert (p.path, p.message.startswith(cause) or cause in p.message) == (path, True), p


def test_every_problem_is_reported_at_once():
    data = base_config(name="", settings={"runs": 0, "port": "x", "draft_max": [0]}, backend="tgi")
    paths = {p.path for p in problems_of(data)}
    assert paths == {"$.name", "$.settings.runs", "$.settings.port", "$.settings.draft_max[0]", "$.backend"}


def test_unknown_backend_lists_the_known_ones():
    p = only_problem(base_config(backend="tgi"))
    assert p.path == "$.backend" and "unknown backend 'tgi'" in p.message
    assert "llamacpp" in p.fix and "vllm" in p.fix
    p = only_problem(base_config(backend=3))
    assert p.path == "$.backend" and "must be a string" in p.message


def test_settings_must_be_an_object():
    p = only_problem(base_config(settings=[1]))
    assert p.path == "$.settings" and "must be an object, not list" in p.message


@pytest.mark.parametrize("field,value,cause", [
    ("name", "my/sweep", "cannot be used in a file name"),
    ("name", "..", "cannot be used in a file name"),
    ("name", 5, "must be a non-empty string, not 5"),
    ("hardware", "mac:studio", "cannot be used in a file name"),
    ("hardware", "   ", "must be a non-empty string"),
    ("name", "sweep\n", "cannot be used in a file name"),
])
def test_bad_names(field, value, cause):
    p = only_problem(base_config(**{field: value}))
    assert p.path == f"$.{field}" and cause in p.message


# --------------------------------------------------------------------------- models and labels

@pytest.mark.parametrize("entry,path,cause", [
    ({"path": "/m.gguf"}, "$.drafts[0].label", "is missing or empty"),
    ({"label": "", "path": "/m.gguf"}, "$.drafts[0].label", "is missing or empty"),
    ({"label": "   ", "path": "/m.gguf"}, "$.drafts[0].label", "is missing or empty"),
    ({"label": 7, "path": "/m.gguf"}, "$.drafts[0].label", "must be a string, not 7"),
    ({"label": "d"}, "$.drafts[0].path", "is missing or empty"),
    ({"label": "d", "path": ["/m.gguf"]}, "$.drafts[0].path", 'must be a string, not ["/m.gguf"]'),
    ({"label": "d", "path": "/m.gguf", "extra_args": "-t 4"}, "$.drafts[0].extra_args", "must be a list of strings"),
    ("/m.gguf", "$.drafts[0]", 'must be an object with "label" and "path"'),
])
def test_bad_model_entries(entry, path, cause):
    p = only_problem(base_config(drafts=[entry]))
    assert p.path == path and cause in p.message


def test_models_must_be_a_list():
    p = only_problem(base_config(drafts={"label": "d", "path": "/d"}))
    assert p.path == "$.drafts" and "must be a list" in p.message


@pytest.mark.parametrize("label", ["a/b", "a\\b", "tab\there", "nl\n", ".", "..", "x" * 101])
def test_unsafe_labels(label):
    p = only_problem(base_config(targets=[{"label": label, "path": "/t.gguf"}]))
    assert p.path == "$.targets[0].label"
    assert "cannot be used in file names" in p.message and p.fix == "rename it"


def test_safe_labels_with_spaces_and_punctuation():
    cfg = validate_config(base_config(targets=[{"label": "7B Q4_K_M (imatrix), v2", "path": "/t.gguf"}]))
    assert cfg.targets[0].label == "7B Q4_K_M (imatrix), v2"


def test_duplicate_labels():
    drafts = [{"label": "d", "path": "/a.gguf"}, {"label": "e", "path": "/b.gguf"}, {"label": "d", "path": "/c.gguf"}]
    p = only_problem(base_config(drafts=drafts))
    assert p.path == "$.drafts[2].label"
    assert "duplicates $.drafts[0].label ('d')" in p.message and "own label" in p.fix


def test_a_target_and_a_draft_may_share_a_label():
    cfg = validate_config(base_config(targets=[{"label": "same", "path": "/a"}], drafts=[{"label": "same", "path": "/b"}]))
    assert cfg.targets[0].label == cfg.drafts[0].label == "same"


# --------------------------------------------------------------------------- environment variables

def test_env_default_used_when_unset_or_empty(monkeypatch):
    monkeypatch.delenv("DB_TEST_MODELS", raising=False)
    data = base_config(targets=[{"label": "T", "path": "${DB_TEST_MODELS:-~/models}/t.gguf"}])
    assert validate_config(data).targets[0].path == os.path.expanduser("~/models/t.gguf")
    monkeypatch.setenv("DB_TEST_MODELS", "")
    assert validate_config(data).targets[0].path == os.path.expanduser("~/models/t.gguf")
    monkeypatch.setenv("DB_TEST_MODELS", "/srv/models")
    assert validate_config(data).targets[0].path == "/srv/models/t.gguf"


def test_env_plain_forms(monkeypatch):
    monkeypatch.setenv("DB_TEST_MODELS", "/srv/m")
    for raw in ("$DB_TEST_MODELS/t.gguf", "${DB_TEST_MODELS}/t.gguf"):
        cfg = validate_config(base_config(targets=[{"label": "T", "path": raw}]))
        assert cfg.targets[0].path == "/srv/m/t.gguf"
        assert cfg.targets[0].raw_path == raw


def test_env_expansion_details(monkeypatch):
    monkeypatch.delenv("DB_UNSET", raising=False)
    monkeypatch.setenv("DB_EMPTY", "")
    monkeypatch.setenv("DB_SET", "/x")
    monkeypatch.setenv("DB_DOLLAR", "/has/$DB_SET")
    assert expand_env("${DB_EMPTY-/dflt}") == ("", [], None)          # "-": only when unset (POSIX)
    assert expand_env("${DB_UNSET-/dflt}") == ("/dflt", [], None)
    assert expand_env("${DB_UNSET:-$DB_SET/y}") == ("/x/y", [], None)  # a default may use $VAR
    assert expand_env("$DB_DOLLAR")[0] == "/has/$DB_SET"               # values are not expanded again
    assert expand_env("/a$b-$") == ("/a$b-$", ["b"], None)
    assert expand_env("/price$")[1:] == ([], None)                      # a lone "$" stays literal
    assert expand_path("${DB_UNSET:-rel}/t.gguf", "/cfg") == ("/cfg/rel/t.gguf", None)


def test_unresolved_variable_names_variable_path_and_fix(monkeypatch):
    monkeypatch.delenv("DB_NOT_SET", raising=False)
    for raw in ("$DB_NOT_SET/t.gguf", "${DB_NOT_SET}/t.gguf"):
        p = only_problem(base_config(targets=[{"label": "T", "path": raw}]))
        assert p.path == "$.targets[0].path"
        assert "environment variable $DB_NOT_SET is not set" in p.message
        assert "export DB_NOT_SET=" in p.fix and "${DB_NOT_SET:-" in p.fix


def test_several_unresolved_variables(monkeypatch):
    monkeypatch.delenv("DB_A", raising=False)
    monkeypatch.delenv("DB_B", raising=False)
    p = only_problem(base_config(drafts=[{"label": "d", "path": "$DB_A/${DB_B}/d.gguf"}]))
    assert p.path == "$.drafts[0].path" and "environment variables $DB_A, $DB_B are not set" in p.message


def test_unresolved_variable_inside_a_default(monkeypatch):
    monkeypatch.delenv("DB_A", raising=False)
    monkeypatch.delenv("DB_B", raising=False)
    p = only_problem(base_config(drafts=[{"label": "d", "path": "${DB_A:-$DB_B}/d.gguf"}]))
    assert "$DB_B is not set" in p.message


@pytest.mark.parametrize("raw", ["${DB_A:?required}/t.gguf", "${DB_A/t.gguf", "${1}/t.gguf",
                                 "${DB_A:-${DB_B}}/t.gguf"])
def test_unsupported_variable_syntax(monkeypatch, raw):
    monkeypatch.delenv("DB_A", raising=False)
    p = only_problem(base_config(targets=[{"label": "T", "path": raw}]))
    assert p.path == "$.targets[0].path"
    assert "supported" in p.message and "${NAME:-default}" in p.fix


def test_llama_bin_expansion(monkeypatch):
    monkeypatch.setenv("DB_BIN", "/opt/llama")
    cfg = validate_config(base_config(settings={"llama_bin": "$DB_BIN/llama-server"}))
    assert cfg.settings.llama_bin == "/opt/llama/llama-server"
    monkeypatch.delenv("DB_BIN")
    p = only_problem(base_config(settings={"llama_bin": "$DB_BIN/llama-server"}))
    assert p.path == "$.settings.llama_bin" and "$DB_BIN is not set" in p.message and "export DB_BIN" in p.fix


# --------------------------------------------------------------------------- files

def test_bad_json_names_line_and_column(tmp_path):
    path = write_config(tmp_path, '{\n  "name": "x",\n  "targets": [],\n}\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    (p,) = info.value.problems
    assert p.path == "$" and "invalid JSON at line 4, column 1" in p.message and "trailing comma" in p.fix
    assert str(path) in str(info.value) and "nothing was started" in str(info.value)


def test_duplicate_keys_name_their_path(tmp_path):
    text = '{"name": "x", "targets": [{"label": "T", "path": "/t", "path": "/u"}], "settings": {"runs": 1, "runs": 2}}'
    with pytest.raises(ConfigError) as info:
        load_config(write_config(tmp_path, text))
    paths = sorted(p.path for p in info.value.problems)
    assert paths == ["$.settings.runs", "$.targets[0].path"]
    assert all("appears twice" in p.message and p.fix for p in info.value.problems)


def test_missing_file_folder_and_binary(tmp_path):
    for target, cause in ((tmp_path / "nope.json", "file not found"), (tmp_path, "is a folder")):
        with pytest.raises(ConfigError) as info:
            load_config(target)
        assert info.value.problems[0].message == cause and info.value.problems[0].fix
    bad = tmp_path / "bin.json"
    bad.write_bytes(b"\xff\xfe{}")
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    assert "not UTF-8" in info.value.problems[0].message


def test_utf8_bom_is_accepted(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(base_config()).encode())
    assert load_config(path).name == "qwen-test"


def test_config_error_text_lists_every_problem():
    with pytest.raises(ConfigError) as info:
        validate_config(base_config(name="", settings={"runs": 0}), source="my.json")
    text = str(info.value)
    assert text.startswith("my.json: 2 problems in the config (nothing was started)")
    assert "  - $.name: " in text and "  - $.settings.runs: is 0; must be ≥ 1 — use a number of at least 1" in text
    assert info.value.exit_code == 2


def test_bad_prompt_file_is_a_config_problem(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"prompt": "ok"}\n{"oops"\n')
    p = only_problem(base_config(settings={"prompts": "bad.jsonl"}), base_dir=str(tmp_path))
    assert p.path == "$.settings.prompts" and "bad.jsonl:2: invalid JSON" in p.message


def test_missing_prompt_file_and_category_as_a_string(tmp_path):
    p = only_problem(base_config(settings={"prompts": "nope.txt"}), base_dir=str(tmp_path))
    assert p.path == "$.settings.prompts" and "does not exist" in p.message and ".jsonl" in p.fix
    p = only_problem(base_config(settings={"prompts": "code"}), base_dir=str(tmp_path))
    assert '["code"]' in p.fix
