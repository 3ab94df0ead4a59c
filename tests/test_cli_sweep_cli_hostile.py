"""Issue 45, every integer from the command line or a file is bounded: ``--more`` outside 0…1,000 is one line
(exit 2) before anything starts, ``--budget 1e308`` is said in a few characters, a results file with a request
in stage 10¹⁵ or a prompt of −10³⁰ tokens is refused on load with its JSON path, and ``--more`` ends as soon as
nothing is left to measure (it looped over every empty stage one by one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from draftbench.common.errors import ResultsFileError
from draftbench.results.file import load_results
from draftbench.sweep import Sweep
from draftbench.sweep.console import Reporter
from draftbench.sweep.run import TargetRun
from draftbench.sweep.session import RunOptions

from fakes.inprocess import FakeBackend
from helpers import REPO, run_cli
from test_sweep_stages import FAST, config, run, script


@pytest.mark.parametrize("value, shown", [("-1", "--more -1"), ("1001", "--more 1001"),
                                          ("1000000000000", "--more 1000000000000"),
                                          ("1" + "0" * 30, "--more (a 31-digit number)")])
def test_more_outside_its_bounds_is_one_line_before_anything_starts(tmp_path, value, shown):
    proc = run_cli("sweep.py", "--config", str(REPO / "configs" / "demo_sweep.json"), "--more", value,
                   "--results", str(tmp_path / "r.json"), cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first == f"Error: {shown}: must be a number of stages from 0 to 1,000", first
    assert not (tmp_path / "r.json").exists()


def test_a_huge_budget_is_said_in_a_few_characters(tmp_path):
    proc = run_cli("sweep.py", "--config", str(REPO / "configs" / "demo_sweep.json"), "--budget", "1e308",
                   "--dry-run", cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("Error: --budget 1e+308: is 1e+308; must be ≤ 1e+07")
    assert max(len(line) for line in proc.stderr.splitlines()) < 80, proc.stderr


def _file_with(tmp_path, mutate) -> str:
    cfg = config(tmp_path, drafts=(("fast", FAST),), stages=1)
    run(tmp_path, FakeBackend(script()), cfg)
    data = json.loads((tmp_path / "r.json").read_text())
    mutate(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_a_request_in_an_impossible_stage_is_refused_on_load(tmp_path):
    def far(data):
        data["results"][0]["requests"][0]["block"] = 10**15
    path = _file_with(tmp_path, far)
    with pytest.raises(ResultsFileError, match=r"\$\.results\[0\]\.requests\[0\]\.block"):
        load_results(path)
    # and --more 1 on it ends at once with that line, starting nothing (it hung)
    untouched = FakeBackend(script())
    with pytest.raises(ResultsFileError, match=r"requests\[0\]\.block"):
        Sweep(config(tmp_path, drafts=(("fast", FAST),), stages=1), Path(path), None, reporter=Reporter(),
              backend=untouched, options=RunOptions(more=1)).run()
    assert untouched.specs == []


def test_recorded_prompt_token_counts_are_held_to_what_a_request_can_be(tmp_path):
    def negative(data):
        data["prompt_set"] = {"context": {"filler": "documents", "targets": {"7B": {"512": {"long-code-512": -10**30}}}}}
    with pytest.raises(ResultsFileError, match=r"prompt_set\.context\.targets\.7B\.512\.long-code-512"):
        load_results(_file_with(tmp_path, negative))


def test_more_ends_when_nothing_is_left_to_measure(tmp_path, monkeypatch):
    """The only candidate is refused (its draft is missing): --more 1000 must not walk 1,000 empty stages."""
    cfg = config(tmp_path, drafts=(("fast", FAST),), stages=2)
    run(tmp_path, FakeBackend(script(missing={FAST})), cfg)
    looked: list[int] = []
    alive = TargetRun.alive
    monkeypatch.setattr(TargetRun, "alive", lambda *a: looked.append(1) or alive(*a))
    run(tmp_path, FakeBackend(script(missing={FAST})), cfg, options=RunOptions(more=1000))
    assert len(looked) <= 3, len(looked)
