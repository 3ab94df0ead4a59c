"""The draft's sampling as a candidate parameter (``params.draft_sampling``): offered where the build's ``--help``
lists it, refused with one line where not, in the printed command, and read back from the server process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from draftbench.backends import get_backend
from draftbench.backends.base import LaunchSpec
from draftbench.backends.llamacpp import draft_sampling
from draftbench.backends.llamacpp.command import (
    build_command,
    candidate_problems,
    parse_draft_samplings,
)
from draftbench.common.errors import ConfigError
from draftbench.config.candidates import expand
from draftbench.results.kinds import Role
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.launcher import sampling_problem
from draftbench.sweep.plan import Combination

# As llama-server b11434 prints it (`llama-server --help`), the lines around the flag.
HELP = """--spec-draft-p-min, --draft-p-min P     minimum speculative decoding probability (greedy) (default: 0.00)
                                        (env: LLAMA_ARG_SPEC_DRAFT_P_MIN)
--spec-draft-sampling {greedy,probabilistic}
                                        how the draft is sampled: greedy takes its argmax, probabilistic
                                        samples it and has the target verify by rejection sampling (default:
                                        greedy)
                                        (env: LLAMA_ARG_SPEC_DRAFT_SAMPLING)
--spec-draft-device, -devd, --device-draft <dev1,dev2,..>
"""
CAPS = {"flags": ["-m", "--spec-type", "--spec-draft-n-max", "--spec-draft-sampling", "-md", "-np", "-ngld"],
        "spec_types": ["draft-simple", "ngram-mod"], "removed_flags": [],
        "draft_samplings": ["greedy", "probabilistic"], "draft_sampling_default": "greedy"}
OLD_CAPS = {**CAPS, "flags": [f for f in CAPS["flags"] if f != "--spec-draft-sampling"], "draft_samplings": [],
            "draft_sampling_default": None}


def config(params, method=None, backend="llamacpp"):
    entry = {"label": "135M probabilistic", "draft": "135M", "params": params}
    if method:
        entry["method"] = method
    return validate_config({"name": "c", "backend": backend, "targets": [{"label": "7B", "path": "/m/t.gguf"}],
                            "drafts": [{"label": "135M", "path": "/m/d.gguf"}], "candidates": [entry]})


def test_the_choices_and_the_default_are_read_from_help():
    assert parse_draft_samplings(HELP) == ["greedy", "probabilistic"]
    assert draft_sampling.default_of(HELP) == "greedy"
    assert parse_draft_samplings("--spec-draft-p-min P  minimum") == []
    assert draft_sampling.default_of("--spec-draft-p-min P  minimum (default: 0.00)") is None


def test_a_candidate_asks_for_it_and_a_list_sweeps_both():
    spec = config({"draft_sampling": ["greedy", "probabilistic"]}).candidates[0]
    found = expand(spec)
    assert [c.label for c in found] == ["135M probabilistic sampling=greedy", "135M probabilistic sampling=probabilistic"]
    assert [c.draft_sampling for c in found] == ["greedy", "probabilistic"]
    assert candidate_problems((spec,), CAPS, "/bin/llama-server") == []


@pytest.mark.parametrize("params, method, caps, expected", [
    ({"draft_sampling": "probabilistic"}, None, OLD_CAPS,
     "this llama-server has no --spec-draft-sampling (its --help), so its draft is always taken greedily"),
    ({"draft_sampling": "probabilistic"}, None, {**CAPS, "draft_samplings": ["greedy"]},
     "'probabilistic' is not a draft sampling this llama-server offers"),
    ({"draft_sampling": "probabilistic"}, "ngram-mod", CAPS,
     "is how the draft model's tokens are chosen; this candidate has no draft method"),
])
def test_what_the_build_or_the_candidate_cannot_do_is_one_line(params, method, caps, expected):
    spec = config(params).candidates[0]
    if method:
        spec = type(spec)(spec.label, (method,), None, spec.params, (), spec.where)
    problems = candidate_problems((spec,), caps, "/bin/llama-server")
    assert len(problems) == 1 and expected in problems[0].message
    assert problems[0].path == "$.candidates[0].params.draft_sampling"


def test_a_value_that_is_no_sampling_is_refused_in_the_config():
    with pytest.raises(ConfigError) as exc:
        config({"draft_sampling": "random"})
    assert "$.candidates[0].params.draft_sampling: must be \"greedy\" or \"probabilistic\"" in str(exc.value)


def test_vllm_refuses_it_with_one_line():
    found = config({"draft_sampling": "probabilistic"}, method="draft_model", backend="vllm")
    problems = get_backend("vllm").validate_candidates(found.specs(), found.settings)
    assert [p.path for p in problems] == ["$.candidates[0].params.draft_sampling"]
    assert "is llama.cpp's --spec-draft-sampling; vLLM has no setting for how its draft is sampled" in str(problems[0])


def test_the_printed_command_says_it():
    spec = LaunchSpec(target="/m/t.gguf", draft="/m/d.gguf", params={"draft_sampling": "probabilistic"})
    cmd = build_command("/bin/llama-server", CAPS, spec)
    assert cmd[cmd.index("--spec-draft-sampling") + 1] == "probabilistic"


def test_the_flag_wins_over_the_variable_which_wins_over_the_default():
    flag = ["llama-server", "--spec-draft-sampling", "probabilistic"]
    assert draft_sampling.effective(flag, {"LLAMA_ARG_SPEC_DRAFT_SAMPLING": "greedy"}, "greedy")[0] == "probabilistic"
    assert draft_sampling.effective(["llama-server"], {"LLAMA_ARG_SPEC_DRAFT_SAMPLING": "probabilistic"},
                                    "greedy") == ("probabilistic", "its environment (LLAMA_ARG_SPEC_DRAFT_SAMPLING)")
    assert draft_sampling.effective(["llama-server"], {}, "greedy")[0] == "greedy"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_it_is_read_from_the_running_process_not_from_what_we_meant():
    env = {**os.environ, "LLAMA_ARG_SPEC_DRAFT_SAMPLING": "probabilistic"}
    proc = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"], env=env,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "up\n"   # running: its /proc entries are set up
        # the command we "meant" says nothing; the process's environment chose it
        assert draft_sampling.of_process(proc.pid, ["llama-server"], "greedy") == (
            "probabilistic", "its environment (LLAMA_ARG_SPEC_DRAFT_SAMPLING)")
    finally:
        proc.kill()
        proc.wait()


def test_a_draft_sampled_otherwise_than_the_candidate_says_is_refused():
    cand = expand(config({"draft_sampling": "probabilistic"}).candidates[0])[0]
    combo = Combination(Role.SPECULATIVE, config({}).targets[0], cand)
    assert sampling_problem(combo, {"draft_sampling": "probabilistic", "draft_sampling_from": "its command line"}) \
        is None
    assert "samples its draft greedy" in (sampling_problem(combo, {"draft_sampling": "greedy",
                                                                   "draft_sampling_from": "its environment"}) or "")
    plain = Combination(Role.SPECULATIVE, combo.target, expand(config({}).candidates[0])[0])
    assert sampling_problem(plain, {"draft_sampling": "greedy", "draft_sampling_from": "the build's default"}) is None
    assert "not the build's default" in (sampling_problem(plain, {"draft_sampling": "probabilistic",
                                                                  "draft_sampling_from": "its environment (X)"}) or "")
