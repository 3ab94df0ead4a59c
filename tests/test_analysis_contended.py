"""A request measured while other programs took a burst of the machine measured the contention, not the
method: its pair is left out, whichever side it was on, and the row says so. The share is the machine's
(read around each request), never the request's speed, so the rule cannot favour a side. Synthetic rows
in a stage's shape (a shared baseline server answering each prompt beside the candidate's server)."""

from __future__ import annotations

import math

from draftbench.analysis.pairing import CONTENDED, left_out, pairs
from draftbench.analysis.verdict import analyze
from draftbench.results.file import RequestRecord, ResultsFile, Row
from draftbench.results.findings import Code

PROMPTS = ("code", "json", "prose", "edit")


def request(pid: str, tps: float, session: str, share: float | None, *, beside: str | None = None,
            compared: list[str] | None = None) -> RequestRecord:
    return RequestRecord(prompt_id=pid, category=pid, run=0, decode_tps=tps, completion_tokens=96, text="t",
                         session=session, block=0, beside=beside, compared_with=compared, other_cpu_share=share)


def stage(base_shares, cand_shares, *, base_tps=30.0, cand_tps=36.0, slow: dict[str, float] | None = None):
    """One stage: the baseline server s1 beside the candidate's s2; ``slow``: a prompt's rate divided by so much
    on the side whose share is the burst (the contention's effect)."""
    slow = slow or {}
    base = tuple(request(p, base_tps / (slow.get(p, 1.0) if s and s > 0.3 else 1.0), "s1", s, beside="s2")
                 for p, s in zip(PROMPTS, base_shares))
    cand = tuple(request(p, cand_tps / (slow.get(p, 1.0) if s and s > 0.3 else 1.0), "s2", s, compared=["s1"])
                 for p, s in zip(PROMPTS, cand_shares))
    baseline = Row(target="T", role="baseline", mean_tps=base_tps, requests=base)
    row = Row(target="T", draft="d", role="speculative", mean_tps=cand_tps, speculation_active=True,
              candidate={"label": "d", "method": ["ngram-simple"]}, requests=cand)
    return row, baseline


def ratios(row: Row, baseline: Row) -> dict[str, float]:
    return {p.prompt_id: round(math.exp(p.log_ratio), 3) for p in pairs(row, baseline)}


def test_a_candidate_request_during_a_burst_is_left_out_and_counted():
    row, baseline = stage([0.02, 0.01, 0.03, 0.02], [0.02, 0.55, 0.01, 0.02], slow={"json": 10.0})
    assert ratios(row, baseline) == {"code": 1.2, "prose": 1.2, "edit": 1.2}      # json measured the contention
    assert left_out(row, baseline) == (0, 1)


def test_a_burst_on_the_target_alones_side_leaves_its_pair_out_too():
    row, baseline = stage([0.02, 0.01, 0.6, 0.02], [0.02, 0.01, 0.03, 0.02], slow={"prose": 8.0})
    assert ratios(row, baseline) == {"code": 1.2, "json": 1.2, "edit": 1.2}
    assert left_out(row, baseline) == (0, 1)


def test_a_steadily_busy_machine_leaves_nothing_out():
    """Steady load is a session effect (the stages' spread carries it), not a burst."""
    row, baseline = stage([0.5, 0.52, 0.49, 0.5], [0.51, 0.5, 0.5, 0.48])
    assert len(pairs(row, baseline)) == 4 and left_out(row, baseline) == (0, 0)


def test_a_rise_below_the_threshold_and_files_without_the_share_leave_nothing_out():
    row, baseline = stage([0.02, 0.02, 0.02, 0.02], [0.02, 0.02 + CONTENDED - 0.01, 0.02, 0.02])
    assert len(pairs(row, baseline)) == 4
    row, baseline = stage([None] * 4, [None] * 4)
    assert len(pairs(row, baseline)) == 4 and left_out(row, baseline) == (0, 0)


def test_the_row_says_how_many_requests_were_left_out_and_why():
    row, baseline = stage([0.02, 0.01, 0.03, 0.02], [0.02, 0.55, 0.01, 0.02], slow={"json": 10.0})
    results = ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="f",
                          settings={"noise_floor": 0.02, "temperature": 0.0}, results=(baseline, row),
                          schema_version=4)
    analysed = analyze(analyze(results))          # analysed twice: the finding is replaced, never repeated
    found = [w for w in analysed.results[1].warnings if w.code is Code.PAIRS_LEFT_OUT]
    assert len(found) == 1
    assert found[0].message.startswith("1 of 4 requests are left out of the comparison: 1 ran while other programs")
    assert not any(w.code is Code.PAIRS_LEFT_OUT for w in analysed.results[0].warnings)


def test_a_request_record_keeps_the_share_and_an_older_file_writes_back_without_it():
    r = request("code", 30.0, "s1", 0.125)
    assert RequestRecord.from_dict(r.to_dict()).other_cpu_share == 0.125
    assert "other_cpu_share" not in request("code", 30.0, "s1", None).to_dict()
