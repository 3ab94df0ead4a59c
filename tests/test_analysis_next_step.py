"""After an unresolved or shortlisted verdict, the command that measures on (analysis/next_step.py): what the
console, ``--chart-only``, the report and the exports print, and that running it really continues the sweep.
In-process backend: no servers."""

from __future__ import annotations

import io
import json
import re
from dataclasses import replace
from pathlib import Path

from draftbench.analysis.decision import Outcome
from draftbench.analysis.next_step import NextStep, for_the_sweep, next_step, rerun_of
from draftbench.analysis.settle import Projection
from draftbench.analysis.summary import verdicts_of
from draftbench.analysis.verdict import analyze
from draftbench.results.file import ResultsFile, load_results
from draftbench.share.export.markdown import export_markdown
from draftbench.share.export.table import results_table
from draftbench.sweep import Console, Sweep
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.session import RunOptions

from fakes.inprocess import FakeBackend, Script

TARGET, GOOD = "/m/target.gguf", "/m/good.gguf"
# a +6% draft in ±5% noise: two stages of three prompts leave it unresolved, sixteen more would settle it
SCRIPT = Script(tps={TARGET: 50.0}, speedup={GOOD: 1.06}, acceptance={GOOD: 0.5}, noise={GOOD: 0.05})


def config(tmp_path: Path, **settings):
    data = {"name": "unit", "hardware": "box", "backend": "llamacpp", "targets": [{"label": "7B", "path": TARGET}],
            "drafts": [{"label": "good", "path": GOOD}],
            "settings": {"max_tokens": 64, "prompts": "builtin", "port": 0, "stages": 2, "prompts_per_stage": 3,
                         **settings}}
    return validate_config(data, source=str(tmp_path / "c.json"), base_dir=str(tmp_path))


def unresolved_sweep(tmp_path: Path, more: int = 0) -> tuple[str, ResultsFile]:
    out = io.StringIO()
    Sweep(config(tmp_path), tmp_path / "r.json", None, reporter=Console(out), backend=FakeBackend(SCRIPT),
          options=RunOptions(more=more)).run()
    return out.getvalue(), load_results(tmp_path / "r.json")


def test_an_unresolved_verdict_ends_with_the_command_that_settles_it_and_that_command_continues(tmp_path):
    text, results = unresolved_sweep(tmp_path)
    verdict = analyze(results).summary.targets[0]
    assert verdict.stages is not None and verdict.stages.verdict is Outcome.UNRESOLVED
    step = verdict.next_step
    settle = verdict.stages.settle
    assert settle is not None and step is not None and step.more == step.stages
    assert step.stages == (settle.stages or settle.half)     # the projection's, or half the futures' where it has none
    # the console's verdict ends with it: the config, the results file (not the default) and --more S
    command = (f"python sweep.py --config {tmp_path / 'c.json'} --results {tmp_path / 'r.json'} "
               f"--more {step.more}")
    assert f"`{command}`" in text
    # the first look's interval is wide, and says why once; the later looks do not repeat it
    looks = [line for line in text.splitlines() if "— best so far" in line]
    assert "look 1 —" in looks[0] and "wide at the first looks, from few stages" in looks[0]
    assert all("wide at the first looks" not in line for line in looks[1:])
    assert re.search(re.escape(f"Next, to settle {step.settles} (as projected from what was measured; at most about ")
                     + r"\d+s on the machine the sweep ran on, at its pace so far\)", text)
    # the same command measures on from where it stopped, keeping every measurement
    before = {r.key: len(r.requests) for r in results.results}
    _, again = unresolved_sweep(tmp_path, more=step.more)
    stages = {r.block for r in again.rows_of("7B")[1].requests}
    assert len(stages) > 2 and all(len(r.requests) >= before[r.key] for r in again.results)


def test_the_report_and_the_exports_print_the_next_command_with_the_file_they_came_from(tmp_path):
    _, results = unresolved_sweep(tmp_path)
    analysed = analyze(results)
    step = verdicts_of(analysed)[0].next_step
    assert step is not None
    table = results_table(analysed, str(tmp_path / "r.json"))
    expected = f"python sweep.py --config YOUR_CONFIG.json --results {tmp_path / 'r.json'} --more {step.more}"
    assert expected in export_markdown(table)
    entry = table.meta["verdicts"][0]["next"]
    assert entry["command"] == expected and entry["more"] == step.more and entry["cost_s"] is not None
    summary = analysed.to_dict()["summary"]["targets"][0]
    assert summary["next"]["arguments"] == f"--more {step.more}"
    json.dumps(summary, allow_nan=False)       # strict JSON


def test_a_target_the_budget_stopped_early_asks_for_a_budget_and_only_the_stages_beyond_the_plan(tmp_path):
    _, results = unresolved_sweep(tmp_path)
    staged = verdicts_of(analyze(results))[0].stages
    assert staged is not None
    rows = tuple(replace(r, wall_time=300.0) for r in results.results)   # 2 rows × 300 s over 2 stages: 300 s a stage
    slow = replace(results, results=rows, settings={**results.settings, "budget_s": 600})
    # stopped after 2 of 6 planned stages; 10 more would settle it: 4 are still planned, so --more 6
    early = replace(staged, stages=2, horizon=6, settle=Projection(10, 30, 1.06, "a gain of +6.0% for good"))
    step = next_step(slow, early)
    assert step is not None and (step.more, step.stages, step.pace_s) == (6, 10, 300.0)
    assert step.budget_s == 600 + 10 * 300 and step.cost_s == 3000.0
    assert step.arguments() == "--more 6 --budget 3600"
    # within the planned stages: a larger budget alone
    near = next_step(slow, replace(early, settle=Projection(3, 9, 1.06, "x")))
    assert near is not None and near.arguments() == "--budget 1500"
    # no projection, but the budget stopped it: the planned stages, at this pace
    unknown = next_step(slow, replace(early, settle=None))
    assert unknown is not None and unknown.arguments() == "--budget 1800"


def test_decided_targets_have_no_next_step_and_an_unreachable_one_says_so_without_a_command(tmp_path):
    _, results = unresolved_sweep(tmp_path)
    staged = verdicts_of(analyze(results))[0].stages
    assert staged is not None
    for final in (Outcome.RECOMMEND, Outcome.NOTHING_GAINS):
        assert next_step(results, replace(staged, verdict=final)) is None
    far = next_step(results, replace(staged, settle=Projection(None, None, 1.01, "a gain of +1.0% for good")))
    assert far is not None and far.stages is None and far.cost_s is None
    assert "more than 60 more server pairs" in far.text("python sweep.py --config c.json") and "`" not in far.text("")
    assert "gap measured so far" not in far.text("")
    # blocked by the margin between two drafts: "unlikely" holds only at the gap measured so far (docs/statistics.md:
    # on a clear grid, every such sweep continued by 60 decided)
    close = next_step(results, replace(staged, settle=Projection(None, None, 1.05, "whether a is within 2% of b",
                                                                 near=True)))
    assert close is not None and close.text("").startswith("Next: more stages are unlikely to settle whether a is")
    assert "at the spread measured here and the gap measured so far (a larger true gap settles sooner)" in close.text("")
    # not sure within the cap, but half the simulated futures decide by 20 more: the verdict offers --more 20
    half = next_step(results, replace(staged, settle=Projection(None, None, 1.01, "a gain of +1.0% for good", half=20,
                                                                share=0.6)))
    assert half is not None and half.more == 20 and half.stages == 20
    assert "about half the time" in half.text("python sweep.py --config c.json") and "--more 20`" in half.text("")


def test_a_best_whose_figure_rests_on_looping_output_is_told_to_fix_the_loops_before_measuring_on(tmp_path):
    """make demo's 347M: "best so far ngram-simple, +3.7%" (−14.4% without the loops) was followed by "Next, to
    settle ngram-simple's gain … --more 20": more stages would only have measured the loops more precisely."""
    _, results = unresolved_sweep(tmp_path)
    staged = verdicts_of(analyze(results))[0].stages
    plain, looping = next_step(results, staged), next_step(results, staged, loops=True)
    assert plain is not None and looping is not None and looping.arguments() == plain.arguments()
    assert "looping" not in plain.text("python sweep.py --config c.json")
    assert "`. But the best's figure rests on the target's looping output" in looping.text("python sweep.py")
    assert looping.text("python sweep.py --config c.json").endswith(
        "fix them first (an instruct model with its chat template, a larger max_tokens, or prompts the target answers "
        "without looping).")


def test_one_command_continues_every_open_target_at_the_most_any_asks_for():
    a = NextStep("A", Outcome.UNRESOLVED, 4, None, 4, 100.0, "x")
    b = NextStep("B", Outcome.SHORTLIST, 9, 2000, 9, 50.0, "y")
    far = NextStep("C", Outcome.UNRESOLVED, 0, None, None, 10.0, "z")
    both = for_the_sweep([a, b, far])
    assert both is not None and both.arguments() == "--more 9 --budget 2000"
    assert both.cost_s == 9 * 150.0           # every open target, at the most stages any asks for
    assert for_the_sweep([a, far]) is a and for_the_sweep([far]) is None


def test_the_command_repeats_a_search_and_design_the_file_can_only_be_resumed_with(tmp_path):
    _, results = unresolved_sweep(tmp_path)
    adaptive = replace(results, settings={**results.settings, "search": "adaptive", "design": "bracketed"})
    assert rerun_of(adaptive, "my config.json") == ("python sweep.py --config 'my config.json' --search adaptive "
                                                   "--design bracketed")
    assert rerun_of(results) == "python sweep.py --config YOUR_CONFIG.json"
