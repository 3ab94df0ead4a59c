"""A request measured while other programs took a burst of the machine measured the contention, not the
method: its pair is left out, whichever side it was on, and the row says so. The share is what neither
side's server causes (read around each request), never the request's speed; bursts hit both sides alike, so
where the sides' bursts differ more than chance allows they are one side's own load (a helper outside its
server's process tree) and nothing is left out. Synthetic rows in a stage's shape (a shared baseline server
answering each prompt beside the candidate's server)."""

from __future__ import annotations

import math

from draftbench.analysis.pairing import CONTENDED, LeftOut, left_out, loaded_more, pairs
from draftbench.analysis.verdict import analyze
from draftbench.results.file import RequestRecord, ResultsFile, Row
from draftbench.results.findings import Code

PROMPTS = ("code", "json", "prose", "edit")


def request(pid: str, tps: float, session: str, share: float | None, *, beside: str | None = None,
            compared: list[str] | None = None, block: int = 0) -> RequestRecord:
    return RequestRecord(prompt_id=pid, category=pid, run=0, decode_tps=tps, completion_tokens=96, text="t",
                         session=session, block=block, beside=beside, compared_with=compared, other_cpu_share=share)


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


def test_a_burst_on_either_side_leaves_its_pair_out_and_is_counted():
    row, baseline = stage([0.02, 0.01, 0.6, 0.02], [0.02, 0.55, 0.01, 0.02], slow={"json": 10.0, "prose": 8.0})
    assert ratios(row, baseline) == {"code": 1.2, "edit": 1.2}      # json and prose measured the contention
    assert left_out(row, baseline) == LeftOut(2, 0)


def test_a_burst_on_the_target_alones_side_leaves_its_pair_out_too():
    row, baseline = stage([0.02, 0.01, 0.6, 0.02], [0.02, 0.01, 0.03, 0.02], slow={"prose": 8.0})
    assert ratios(row, baseline) == {"code": 1.2, "json": 1.2, "edit": 1.2}
    assert left_out(row, baseline) == LeftOut(1, 0)


def test_a_burst_on_the_candidates_side_alone_may_be_its_own_load_and_is_kept():
    """Until the target alone's side has met a burst too, a share that rose during a candidate's request may be
    the candidate's own helper (outside its server's process tree): its slow request is what it costs."""
    row, baseline = stage([0.02, 0.01, 0.03, 0.02], [0.02, 0.55, 0.01, 0.02], slow={"json": 10.0})
    assert ratios(row, baseline) == {"code": 1.2, "json": 0.12, "prose": 1.2, "edit": 1.2}
    assert left_out(row, baseline) == LeftOut(0, 0)


def test_a_steadily_busy_machine_leaves_nothing_out():
    """Steady load is a session effect (the stages' spread carries it), not a burst."""
    row, baseline = stage([0.5, 0.52, 0.49, 0.5], [0.51, 0.5, 0.5, 0.48])
    assert len(pairs(row, baseline)) == 4 and left_out(row, baseline) == LeftOut(0, 0)


def test_a_rise_below_the_threshold_and_files_without_the_share_leave_nothing_out():
    row, baseline = stage([0.02, 0.02, 0.02, 0.02], [0.02, 0.02 + CONTENDED - 0.01, 0.02, 0.02])
    assert len(pairs(row, baseline)) == 4
    row, baseline = stage([None] * 4, [None] * 4)
    assert len(pairs(row, baseline)) == 4 and left_out(row, baseline) == LeftOut(0, 0)


def test_the_row_says_how_many_requests_were_left_out_and_why():
    row, baseline = stage([0.02, 0.01, 0.6, 0.02], [0.02, 0.55, 0.01, 0.02], slow={"json": 10.0, "prose": 8.0})
    results = ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="f",
                          settings={"noise_floor": 0.02, "temperature": 0.0}, results=(baseline, row),
                          schema_version=4)
    analysed = analyze(analyze(results))          # analysed twice: the finding is replaced, never repeated
    found = [w for w in analysed.results[1].warnings if w.code is Code.PAIRS_LEFT_OUT]
    assert len(found) == 1
    assert found[0].message.startswith("2 of 4 requests are left out of the comparison: they ran while other programs")
    assert not any(w.code is Code.PAIRS_LEFT_OUT for w in analysed.results[0].warnings)


def test_a_request_record_keeps_the_share_and_an_older_file_writes_back_without_it():
    r = request("code", 30.0, "s1", 0.125)
    assert RequestRecord.from_dict(r.to_dict()).other_cpu_share == 0.125
    assert "other_cpu_share" not in request("code", 30.0, "s1", None).to_dict()


def stages(helper: dict[int, set[str]], *, n: int = 3, base_bursts: dict[int, set[str]] | None = None):
    """``n`` stages of four prompts, each on servers of its own (baseline s<2k+1>, candidate s<2k+2>); in stage k
    the candidate's own helper load (0.4 of the machine, read as another program's) on the prompts
    ``helper[k]``, slowing them to 0.6×; ``base_bursts``: bursts of other programs on the baseline's side."""
    base, cand = [], []
    for k in range(n):
        b, c = f"s{2 * k + 1}", f"s{2 * k + 2}"
        for p in PROMPTS:
            burst = p in (base_bursts or {}).get(k, set())
            base.append(request(p, 30.0 / (8 if burst else 1), b, 0.5 if burst else 0.02, beside=c, block=k))
            slow = p in helper.get(k, set())
            cand.append(request(p, 30.0 * (0.6 if slow else 1.0), c, 0.42 if slow else 0.02, compared=[b], block=k))
    baseline = Row(target="T", role="baseline", mean_tps=30.0, requests=tuple(base))
    row = Row(target="T", draft="d", role="speculative", mean_tps=30.0, speculation_active=True,
              candidate={"label": "d", "method": ["ngram-simple"]}, requests=tuple(cand))
    return row, baseline


def test_a_candidates_own_helper_load_is_not_a_burst_and_leaves_nothing_out():
    """Its helper lives outside its server's process tree, so its load reads as another program's — on the
    candidate's side only, stage after stage. Its slow requests are what the candidate costs: they stay; once
    the sides differ more than chance allows, the row says whose load it was."""
    row, baseline = stages({0: {"code", "json"}, 1: {"prose", "edit"}, 2: {"code", "json"}})
    assert left_out(row, baseline) == LeftOut(0, 4)            # stage 2: 6 of 12 against 0 of 12
    assert [round(math.exp(p.log_ratio), 3) for p in pairs(row, baseline)].count(0.6) == 6   # every slow one
    analysed = analyze(ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="f",
                                   settings={"noise_floor": 0.02, "temperature": 0.0}, results=(baseline, row),
                                   schema_version=4))
    found = {w.code: w.message for w in analysed.results[1].warnings}
    assert Code.PAIRS_LEFT_OUT not in found and "this candidate's requests" in found[Code.OWN_LOAD]
    assert "none of the 4 requests" in found[Code.OWN_LOAD]


def test_the_same_bursts_on_both_sides_are_left_out():
    row, baseline = stages({0: {"code"}, 1: {"json"}, 2: {"edit"}}, base_bursts={0: {"json"}, 1: {"edit"}, 2: {"code"}})
    assert left_out(row, baseline) == LeftOut(6, 0)
    assert len(pairs(row, baseline)) == 6


def test_a_stage_is_judged_on_the_stages_up_to_it_so_a_look_replayed_later_leaves_out_the_same():
    """A burst on each side in stage 0: left out. Then the candidate's side alone meets two a stage (its own
    helper): while chance could still explain the split they are left out too; at stage 4 it cannot (9 of 20
    against 1 of 20), and that stage leaves nothing out. Every stage stays as it was decided live."""
    helper = {0: {"code"}, 1: {"json", "prose"}, 2: {"code", "edit"}, 3: {"json", "edit"}, 4: {"code", "prose"}}
    full, baseline = stages(helper, n=5, base_bursts={0: {"json"}})
    assert left_out(full, baseline) == LeftOut(8, 4)
    for k in range(1, 6):
        live, live_base = stages({s: p for s, p in helper.items() if s < k}, n=k, base_bursts={0: {"json"}})
        replayed = [(p.prompt_id, p.block, round(p.log_ratio, 6)) for p in pairs(full, baseline) if p.block < k]
        assert replayed == [(p.prompt_id, p.block, round(p.log_ratio, 6)) for p in pairs(live, live_base)]


def test_bursts_split_between_the_sides_as_chance_allows_are_bursts():
    assert not loaded_more(1, 6, 0, 36) and not loaded_more(2, 12, 3, 72) and not loaded_more(0, 6, 0, 36)
    assert loaded_more(3, 6, 0, 36) and loaded_more(6, 12, 0, 12) and not loaded_more(3, 12, 1, 12)
    assert not loaded_more(0, 36, 3, 6)          # the target alone loaded more: its bursts are left out anyway


def test_a_slow_baseline_request_is_compared_like_a_slow_candidate_request():
    """No rule looks at a request's speed: the target alone's slow repeat of a request stays in, as a
    candidate's slow request does (the 'interrupted' rule dropped only the former: every estimate ran low)."""
    base = tuple(request("code", tps, "s1", 0.02, beside=c) for tps, c in ((30.0, "s2"), (30.0, "s3"), (12.0, "s4")))
    rows = [Row(target="T", draft=d, role="speculative", mean_tps=30.0, speculation_active=True,
                candidate={"label": d, "method": ["ngram-simple"]},
                requests=(request("code", 30.0, s, 0.02, compared=["s1"]),)) for d, s in (("a", "s2"), ("b", "s3"), ("c", "s4"))]
    baseline = Row(target="T", role="baseline", mean_tps=30.0, requests=base)
    assert ratios(rows[2], baseline) == {"code": 2.5} and left_out(rows[2], baseline) == LeftOut(0, 0)
