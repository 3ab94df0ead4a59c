"""Candidates in the config: model-free methods, hybrids, parameter lists, and what a backend offers."""

from __future__ import annotations

import pytest
from draftbench.backends import get_backend
from draftbench.backends.llamacpp.command import candidate_problems, parse_spec_types, removed_flags
from draftbench.common.errors import ConfigError
from draftbench.config.candidates import expand
from draftbench.sweep import plan, shows_k
from draftbench.sweep.config_file import validate_config

CAPS = {"flags": ["-m", "--spec-type", "--spec-draft-n-max", "--spec-ngram-mod-n-match", "--spec-ngram-mod-n-max",
                  "--spec-ngram-simple-size-n", "--spec-draft-cpu-moe", "--spec-ngram-size-n", "--spec-draft-model"],
        "spec_types": ["draft-simple", "draft-mtp", "ngram-simple", "ngram-mod"],
        "removed_flags": ["--spec-ngram-size-n"]}


def cfg(candidates, drafts=(("135M", "/m/d.gguf"),), backend="llamacpp", **settings):
    return validate_config({"name": "c", "backend": backend, "targets": [{"label": "7B", "path": "/m/t.gguf"}],
                            "drafts": [{"label": la, "path": p} for la, p in drafts], "candidates": candidates,
                            "settings": settings})


def problems_of(candidates, **kw) -> str:
    with pytest.raises(ConfigError) as exc:
        cfg(candidates, **kw)
    return str(exc.value)


def test_lists_expand_into_labelled_candidates_and_drafts_stay_first():
    config = cfg([{"label": "ngram-mod", "method": "ngram-mod", "params": {"ngram_mod_n_match": [16, 24]}},
                  {"label": "135M + ngram-mod", "draft": "135M", "method": ["draft-simple", "ngram-mod"],
                   "params": {"draft_max": [4, 8]}}], draft_max=8)
    titles = [c.title(shows_k(config)) for c in plan(config)]
    assert titles == ["7B (baseline)", "7B + 135M (k=8)", "7B + ngram-mod n_match=16", "7B + ngram-mod n_match=24",
                      "7B + 135M + ngram-mod (k=4)", "7B + 135M + ngram-mod (k=8)"]
    hybrid = plan(config)[-1].candidate
    assert hybrid.draft.path == "/m/d.gguf" and hybrid.method == ("draft-simple", "ngram-mod")
    assert hybrid.to_dict() == {"label": "135M + ngram-mod", "method": ["draft-simple", "ngram-mod"],
                                "draft": "135M", "params": {"draft_max": 8}}
    assert plan(config)[2].key == ("speculative", "7B", "ngram-mod n_match=16", None)


def test_an_inline_draft_and_a_plain_config_without_candidates():
    config = cfg([{"label": "hybrid", "draft": {"label": "0.5B", "path": "d2.gguf"}, "method": "draft-simple"}])
    assert plan(config)[-1].candidate.draft.label == "0.5B"
    assert [c.title(False) for c in plan(cfg(None))] == ["7B (baseline)", "7B + 135M"]


@pytest.mark.parametrize("candidates, expected", [
    ([{"label": "x"}], "names neither a method nor a draft"),
    ([{"label": "x", "draft": "nope"}], "'nope' is not the label of a drafts entry"),
    ([{"label": "135M", "method": "ngram-mod"}], "duplicates $.drafts[0].label ('135M')"),
    ([{"label": "x", "method": "ngram-mod", "params": {"n": [1, 1]}}], "lists a value more than once"),
    ([{"label": "x", "method": "ngram-mod", "params": {"N-Match": 1}}], "is not a parameter name"),
    ([{"label": "x", "method": ["ngram-mod", "ngram-mod"]}], "names a method more than once"),
    ([{"label": "x", "method": 5}], "must be a method name or a list of them"),
    ([{"label": "x", "method": "ngram-mod", "params": {"draft_max": 0}}], "must be a whole number ≥ 1"),
    ([{"label": "a", "method": "ngram-mod", "params": {"n": [1, 2]}}, {"label": "a n=1", "method": "ngram-mod"}],
     "which $.candidates[0] also produces"),
    ("ngram", "$.candidates: must be a list"),
])
def test_bad_candidates_are_named_with_their_json_path(candidates, expected):
    assert expected in problems_of(candidates)


def test_llama_cpp_names_what_its_binary_offers():
    specs = cfg([{"label": "a", "method": "ngram-foo"},
                 {"label": "b", "method": "ngram-mod", "params": {"draft_max": 4, "ngram_size_n": 3}},
                 {"label": "c", "method": "draft-simple"},
                 {"label": "d", "draft": "135M", "method": "ngram-mod"},
                 {"label": "e", "method": "draft-mtp", "params": {"draft_max": 2}},
                 {"label": "f", "draft": "135M", "method": ["draft-simple", "ngram-mod"],
                  "params": {"ngram_mod_n_match": 8, "draft_cpu_moe": True}}]).specs()
    found = {(p.path, p.message.split(";")[0]) for p in candidate_problems(specs, CAPS, "llama-server")}
    text = "\n".join(f"{a}: {b}" for a, b in sorted(found))
    assert "$.candidates[0].method: 'ngram-foo' is not a speculative type this llama-server offers" in text
    assert "$.candidates[1].params.draft_max: is the draft model's length" in text
    assert "$.candidates[1].params.ngram_size_n: this llama-server has no --spec-ngram-size-n" in text  # removed
    assert "$.candidates[2]: draft-simple needs a draft model" in text
    assert "$.candidates[3].draft: is given, but ngram-mod uses no draft model" in text
    assert not any(path.startswith(("$.candidates[4]", "$.candidates[5]", "$.drafts")) for path, _ in found)


def test_misspelt_methods_and_parameters_suggest_the_one_meant():
    specs = cfg([{"label": "a", "method": "ngram_mod"},
                 {"label": "b", "method": "ngram-mod", "params": {"ngram_mod_n_mtch": 8}},
                 {"label": "c", "method": "ngram-mod", "params": {"zzz": 1}}]).specs()
    fixes = {p.path: p.fix for p in candidate_problems(specs, CAPS, "llama-server")}
    assert fixes["$.candidates[0].method"].startswith("did you mean 'ngram-mod'? use one of: ")
    assert fixes["$.candidates[1].params.ngram_mod_n_mtch"] == "did you mean ngram_mod_n_match?"
    assert fixes["$.candidates[2].params.zzz"].startswith("use one of: draft_max, ")   # nothing close: all of them


def test_spec_types_and_removed_flags_are_read_from_help():
    help_text = ("--spec-type none,draft-simple,ngram-mod   comma-separated list (default: none)\n"
                 "--spec-ngram-mod-n-min N                minimum number of ngram tokens\n"
                 "--draft, --draft-n, --draft-max N       the argument has been removed. use --spec-draft-n-max\n")
    assert parse_spec_types(help_text) == ["draft-simple", "ngram-mod"]
    assert removed_flags(help_text) == ["--draft", "--draft-max", "--draft-n"]


def test_vllm_takes_one_method_per_candidate():
    config = cfg([{"label": "a", "method": ["eagle3", "ngram"]}, {"label": "b", "method": "ngram-mod"},
                  {"label": "c", "method": "eagle3"}, {"label": "d", "method": "ngram",
                                                       "params": {"prompt_lookup_max": 4}}], backend="vllm")
    problems = get_backend("vllm").validate_candidates(config.specs(), config.settings)
    text = "\n".join(map(str, problems))
    assert "$.candidates[0].method: vLLM runs one speculative method at a time" in text
    assert "'ngram-mod' is not a vLLM speculative method" in text
    assert "$.candidates[2]: method eagle3 needs a draft model" in text
    assert "candidates[3]" not in text


def test_expansion_keeps_scalars_and_skips_nulls():
    spec = cfg([{"label": "m", "method": "ngram-mod", "params": {"ngram_mod_n_match": 8}}]).candidates[0]
    (only,) = expand(spec)
    assert only.label == "m" and only.settings_params == {"ngram_mod_n_match": 8} and only.model_free
