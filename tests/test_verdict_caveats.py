"""The verdict line carries its own caveat (issue 43): a recommendation whose gain rests on the target's looping
output, or on one prompt type, says so in the line itself, with the figure on the rest. Synthetic rows; no servers."""

from __future__ import annotations

import math
import random

from draftbench.analysis.decision import Outcome, Rule, decide_target
from draftbench.analysis.machine_spread import MachineSpread
from draftbench.analysis.spending import Spending
from draftbench.analysis.stage_evidence import StageSample
from draftbench.analysis.stage_records import TargetStages
from draftbench.analysis.stage_verdict import Quote, StagedVerdict, staged_verdict
from draftbench.results.file import RequestRecord, Row


def test_a_gain_that_rests_on_looping_output_says_so_in_the_verdict_line_with_the_figure_on_the_rest():
    """make demo (2026-11-29) ended "347M: use ngram-simple — expect +18.9% [+10.9%, +27.5%]" while the row's own
    diagnosis said the target loops on 9 of 12 requests and "on the other requests: −2.7% [−7.2%, +2.0%]"."""
    row = Row(target="347M", draft="ngram-simple", degenerate_output={
        "looping_requests": 9, "requests": 12, "prompts": ["a", "b"], "max_loop_share": 0.9, "limit": 0.3,
        "speedup_without_loops": {"ratio": 0.973, "ci95_low": 0.928, "ci95_high": 1.02, "significant": False,
                                  "method": "paired-t-log", "n_pairs": 3}})
    verdict = StagedVerdict("347M", Outcome.RECOMMEND, "ngram-simple", "ngram-simple",
                            Quote(1.189, 1.109, 1.275, 1.189, None, 4, 3, "prompts like these"), candidates=4, stages=3)
    line = verdict.sentence(30.0, row)
    assert line.startswith("347M: use ngram-simple — expect +18.9% [+10.9%, +27.5%]")
    assert "rests on looping output" in line and "9 of 12 requests" in line
    assert "on the other requests: -2.7% [-7.2%, +2.0%]" in line and "95% for this candidate alone" in line
    assert "rests on" not in StagedVerdict("347M", Outcome.RECOMMEND, "ngram-simple", "ngram-simple",
                                           verdict.quote, candidates=4, stages=3).sentence(30.0, Row(target="347M"))


def _stages(rng: random.Random, code_gain: float, other_gain: float, n_stages: int = 6) -> tuple[StageSample, ...]:
    out = []
    for k in range(n_stages):
        prompts = tuple(f"p{k}-{i}" for i in range(6))
        values = tuple((code_gain if i < 3 else other_gain) + rng.gauss(0, 0.01) for i in range(6))
        out.append(StageSample(k, prompts, values, 10 * k))
    return out and tuple(out)


def test_a_gain_that_rests_on_one_prompt_type_says_so_with_the_figure_on_the_other_prompts():
    rng = random.Random(2)
    series = {"ngram": _stages(rng, math.log(1.3), 0.0)}
    requests = tuple(RequestRecord(prompt_id=p, category="code" if p.endswith(("-0", "-1", "-2")) else "prose", run=0)
                     for s in series["ngram"] for p in s.prompts)
    rows = {"ngram": Row(target="T", draft="ngram", requests=requests)}
    evidence = TargetStages("T", 6, 6, series, rows, {}, {}, MachineSpread({("T", "ngram"): series["ngram"]}))
    decision = decide_target(evidence, Rule(Spending(6, 1), noise_floor=0.02))
    assert decision.outcome is Outcome.RECOMMEND
    verdict = staged_verdict(decision)
    assert verdict.rests_on is not None and verdict.rests_on.startswith("its gain rests on code prompts: on the others")
    assert "95% for this candidate alone" in verdict.rests_on
    assert "but its gain rests on code prompts" in verdict.sentence(30.0, rows["ngram"])
    even = {"ngram": _stages(rng, math.log(1.3), math.log(1.25))}           # it gains on every type: nothing to say
    evidence = TargetStages("T", 6, 6, even, rows, {}, {}, MachineSpread({("T", "ngram"): even["ngram"]}))
    assert staged_verdict(decide_target(evidence, Rule(Spending(6, 1), noise_floor=0.02))).rests_on is None


def test_an_unresolved_best_or_a_shortlists_leader_whose_figure_rests_on_looping_output_says_so_before_more_is_asked():
    """make demo (2026-11-29) ended "347M: unresolved — best so far ngram-simple, +3.7% [−1.1%, +8.6%]" and
    "run the same command with --more 20" while the row's diagnosis said the target loops on 12 of 16 requests and
    "on the other requests: −14.4% [−16.4%, −12.4%]": the line now says so before it suggests more stages."""
    row = Row(target="347M", draft="ngram-simple", degenerate_output={
        "looping_requests": 12, "requests": 16, "prompts": ["a"], "max_loop_share": 0.95, "limit": 0.3,
        "speedup_without_loops": {"ratio": 0.856, "ci95_low": 0.836, "ci95_high": 0.876, "significant": True,
                                  "method": "paired-t-log", "n_pairs": 4}})
    quote = Quote(1.037, 0.989, 1.086, 1.037, None, 4, 4, "prompts like these")
    unresolved = StagedVerdict("347M", Outcome.UNRESOLVED, None, "ngram-simple", quote, candidates=4, stages=4)
    line = unresolved.sentence(30.0, row)
    assert line.startswith("347M: unresolved — best so far ngram-simple, +3.7% [-1.1%, +8.6%]")
    assert "— but its figure rests on looping output" in line and "12 of 16 requests" in line
    assert "on the other requests: -14.4% [-16.4%, -12.4%]" in line
    shortlist = StagedVerdict("347M", Outcome.SHORTLIST, None, "ngram-simple", quote, shortlist=("ngram-simple", "d"),
                              candidates=4, stages=4)
    leader = shortlist.sentence(30.0, row).split("Leader: ")[1]
    assert leader.startswith("ngram-simple, +3.7% [-1.1%, +8.6%]") and "— but its figure rests on looping output" in leader
    assert "rests on" not in unresolved.sentence(30.0, Row(target="347M")) and "rests on" not in \
        unresolved.sentence(30.0, None)


def test_the_loop_check_pairs_a_staged_row_as_its_speed_up_does_each_request_with_its_own_stages_baseline():
    """make demo (2026-11-29, 347M): each stage's baseline server measured the same (prompt, run) beside every
    candidate; the loop check matched by (prompt, run) alone, kept one of those baseline requests at random, found
    −10.8% where the row's pairs said +4.1% — and said nothing, though the gain rested on the looping requests."""
    from draftbench.analysis.comparison import own_speedup
    from draftbench.analysis.degenerate import assess
    from draftbench.results.kinds import Role
    looping, plain = "the same line again. " * 40, "A short and varied answer about trees, rivers and light."
    base, mine = [], []
    for stage in range(2):
        for prompt, text, gain in (("loop-a", looping, 1.6), ("loop-b", looping, 1.6), ("prose", plain, 0.8)):
            speed = 20.0 * (1.5 if stage else 1.0)         # stage 2's baseline server ran on a faster machine
            base.append(RequestRecord(prompt_id=prompt, category="x", run=stage, text=text, decode_tps=speed,
                                      session=f"b{stage}", block=stage, beside=f"c{stage}"))
            # beside the next stage's baseline, the last one written: a (prompt, run) match took it for every pair
            base.append(RequestRecord(prompt_id=prompt, category="x", run=stage, text=text, decode_tps=speed * 3,
                                      session=f"b{stage}", block=stage, beside=f"other{stage}"))
            mine.append(RequestRecord(prompt_id=prompt, category="x", run=stage, text=text, decode_tps=speed * gain,
                                      session=f"c{stage}", block=stage, compared_with=[f"b{stage}"], draft_n=10))
    baseline = Row(target="T", role=Role.BASELINE, requests=tuple(base))
    row = Row(target="T", draft="ngram", role=Role.SPECULATIVE, requests=tuple(mine), speculation_active=True,
              draft_n=60)
    own = own_speedup(row, baseline, noise_floor=0.02)
    assert own is not None and own.ratio > 1.2                 # the row's pairs: each beside its own stage's baseline
    info, finding = assess(row, baseline, noise_floor=0.02)
    assert info is not None and finding is not None and "rests on looping output" in finding.message
    assert info["looping_requests"] == 4 and info["speedup_without_loops"]["ratio"] < 1.0


def test_the_loop_count_is_of_the_requests_the_figures_are_built_on():
    """"loops on N of M requests" counted every answered request, a session's turns and a confirmation block too,
    while the figures beside it are built on the fresh pairs alone: both now count those."""
    from draftbench.analysis.degenerate import assess
    from draftbench.config.workloads import SESSION_CATEGORY
    from draftbench.results.kinds import Role
    looping, plain = "the same line again. " * 40, "A short and varied answer about trees, rivers and light."
    base, mine = [], []
    for stage in range(2):
        for prompt, text, gain in (("loop-a", looping, 1.6), ("loop-b", looping, 1.6), ("prose", plain, 0.9)):
            base.append(RequestRecord(prompt_id=prompt, category="x", run=stage, text=text, decode_tps=20.0,
                                      session=f"b{stage}", block=stage))
            mine.append(RequestRecord(prompt_id=prompt, category="x", run=stage, text=text, decode_tps=20.0 * gain,
                                      session=f"c{stage}", block=stage, draft_n=10))
    for turn in range(3):       # a session's turns on a looping prompt: measured, but apart from the speed-up
        base.append(RequestRecord(prompt_id="chat", category=SESSION_CATEGORY, run=turn, text=looping,
                                  decode_tps=20.0, session="b9", block=9))
        mine.append(RequestRecord(prompt_id="chat", category=SESSION_CATEGORY, run=turn, text=looping,
                                  decode_tps=30.0, session="c9", block=9, draft_n=10))
    baseline = Row(target="T", role=Role.BASELINE, requests=tuple(base))
    row = Row(target="T", draft="ngram", role=Role.SPECULATIVE, requests=tuple(mine), speculation_active=True,
              draft_n=90)
    info, finding = assess(row, baseline, noise_floor=0.02)
    assert info is not None and finding is not None
    assert (info["looping_requests"], info["requests"]) == (4, 6) and "on 4 of 6 requests" in finding.message
    assert "chat" not in info["prompts"]


def test_the_next_prompts_top_end_is_held_at_the_most_a_measured_prompts_counters_allowed():
    """make demo (2026-11-29, 347M, 1 degree of freedom): "your next prompt: −92.3% to +1303.0%" beside "its
    counters allow at most +51.6%" — no quoted gain passes what the counters allow, one prompt's neither."""
    from draftbench.analysis.pairing import most_per_prompt
    rng = random.Random(3)
    series = {"ngram": _stages(rng, math.log(1.3), math.log(1.3), n_stages=2)}
    # 100 tokens after the first, 16 of them accepted drafts: each step at most 100 / 84 = 1.19× the target's
    requests = tuple(RequestRecord(prompt_id=p, category="code", run=0, completion_tokens=101, draft_n_accepted=16)
                     for s in series["ngram"] for p in s.prompts)
    rows = {"ngram": Row(target="T", draft="ngram", requests=requests)}
    assert most_per_prompt(rows["ngram"]) == 100 / 84
    evidence = TargetStages("T", 6, 6, series, rows, {}, {}, MachineSpread({("T", "ngram"): series["ngram"]}))
    quote = staged_verdict(decide_target(evidence, Rule(Spending(6, 1), noise_floor=0.02))).quote
    assert quote is not None and quote.next_prompt is not None and quote.next_held
    assert quote.next_prompt[1] == 100 / 84 and "its top end held at the most its counters allowed" in quote.text()
    free = {"ngram": Row(target="T", draft="ngram", requests=tuple(
        RequestRecord(prompt_id=p, category="code", run=0) for s in series["ngram"] for p in s.prompts))}
    evidence = TargetStages("T", 6, 6, series, free, {}, {}, MachineSpread({("T", "ngram"): series["ngram"]}))
    unheld = staged_verdict(decide_target(evidence, Rule(Spending(6, 1), noise_floor=0.02))).quote
    assert unheld is not None and not unheld.next_held and unheld.next_prompt[1] > 1.25  # type: ignore[index]
