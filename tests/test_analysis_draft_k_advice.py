"""One story about k (issue 25): theory, per-position counts, the one-run prediction and measured k rows feed
one statement per row; none for n-gram methods; a hybrid's names its draft."""

from __future__ import annotations

from draftbench.analysis.draft import k_advice
from draftbench.results.file import Row
from draftbench.results.findings import Code
from draftbench.results.theory import Theory

DRAFT = "/m/135m.gguf"
STEPS = 40
HOLDS = [36, 36, 32, 32]                               # of 40 steps: even the last position mostly accepted
DECAYS = [36, 32, 28, 8, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4]    # falls off after position 3 (of 16)
TEXTBOOK = Theory(best_k=1, predicted_at_best_k=1.13, predicted_speedup=1.1, measured_speedup=0.4)


def row(label: str, *, method=(), draft_path=DRAFT, draft_max=None, per_pos=None, tps=10.0, **extra) -> Row:
    cand = {"label": label, "method": list(method), "draft": "135M" if draft_path else None, "params": {}}
    return Row(target="241M", draft=label, role="speculative", draft_path=draft_path, draft_max=draft_max,
               accepted_per_pos=per_pos, verify_steps=STEPS if per_pos else None, mean_tps=tps,
               draft_n=STEPS * len(per_pos) if per_pos else None, draft_n_accepted=sum(per_pos) if per_pos else None,
               speculation_active=True, candidate=cand, **extra)


def test_no_advice_about_k_for_an_ngram_method():
    ngram = row("ngram-mod", method=["ngram-mod"], draft_path=None, per_pos=HOLDS, theory=TEXTBOOK)
    finding = k_advice.diagnosis(ngram, [ngram])
    assert finding.code is Code.ACCEPTANCE_HOLDS and finding.setting is None
    assert "k" not in finding.message.replace("accept", "").replace("drafted", "").split()
    assert k_advice.advise(ngram, [ngram]) is None


def test_a_hybrids_advice_names_its_draft_and_not_the_ngram_positions():
    hybrid = row("135M + ngram-mod", method=["draft-simple", "ngram-mod"], draft_max=4, per_pos=DECAYS)
    text = k_advice.diagnosis(hybrid, [hybrid]).message
    assert "decays after position 3" in text and "k is its draft 135M's (k=4 here)" in text
    assert "smaller k" not in text and "measure 135M alone at several k" in text
    # the draft alone measured at several k: that is the evidence
    alone = [row("135M", draft_max=k, tps=tps) for k, tps in ((2, 11.0), (4, 12.5), (8, 9.0))]
    advice = k_advice.advise(hybrid, [hybrid, *alone])
    assert advice.k == 4 and "135M alone, k=4 ran fastest of the k measured: 12.5 tok/s, against" in advice.text


def test_measured_k_decide_and_the_rest_is_evidence():
    prediction = {"from_k": 8, "recommended_k": 2, "recommended_tps": 11.5, "baseline_tps": 10.0}
    rows = [row("135M", draft_max=k, tps=tps, theory=TEXTBOOK) for k, tps in ((2, 11.0), (4, 12.0))]
    rows.append(row("135M", draft_max=8, tps=9.5, per_pos=DECAYS[:8], k_prediction=prediction, theory=TEXTBOOK))
    advice = k_advice.advise(rows[2], rows)
    assert advice.k == 4
    assert advice.text.startswith("draft length: k=4 ran fastest of the k measured: 12.0 tok/s, against 11.0 tok/s "
                                  "at k=2, 9.50 tok/s at k=8 (")
    assert "predicted from k=8: k=2 predicted fastest from this run, 11.5 tok/s or +15% vs" in advice.text
    assert "the textbook model, which takes verifying as free, says k=1 → 1.13×" in advice.text


def test_one_run_and_textbook_no_longer_contradict():
    """The case from the issue: textbook k=1 (→ 1.13×) and 'no k beats the target alone' in one run."""
    prediction = {"from_k": 4, "recommended_k": None, "recommended_tps": None, "baseline_tps": 10.0}
    r = row("135M", draft_max=4, per_pos=HOLDS, k_prediction=prediction, theory=TEXTBOOK)
    finding = k_advice.diagnosis(r, [r])
    assert finding.message.count("draft length:") == 1 and "a larger k may pay" not in finding.message
    assert ("draft length: no k is predicted to beat the target alone, from this run's per-position counts and "
            "timings (the textbook model, which takes verifying as free, says k=1 → 1.13×, but verifying is not "
            "free on this hardware)") in finding.message
    assert k_advice.advise(r, [r]).k is None


def test_without_a_prediction_the_positions_speak_and_the_textbook_alone_is_said_to_be_only_that():
    r = row("135M", draft_max=16, per_pos=DECAYS)
    assert k_advice.advise(r, [r]).k == 3 and "a smaller k (k=3) should do as well" in k_advice.advise(r, [r]).text
    bare = row("135M", theory=TEXTBOOK)
    finding = k_advice.diagnosis(bare, [bare])
    assert finding.code is Code.DRAFT_LENGTH and finding.message.endswith("not measured here")


def test_a_row_that_drafted_twice_gets_no_diagnosis_but_the_reason():
    """Issue 37: 20 tokens drafted in 2 of 288 steps read as "mostly accepted" and a decay by position."""
    from draftbench.results.file import RequestRecord

    reqs = tuple(RequestRecord(f"p{i}", "code", 0, decode_tps=5.0, completion_tokens=n) for i, n in enumerate((150, 158)))
    r = row("ngram-mod", method=["ngram-mod"], draft_path=None, per_pos=[2, 2, 2, 2, 2, 2, 2, 2, 2, 2] + [0] * 54,
            requests=reqs)
    r = Row(**{**r.__dict__, "verify_steps": 2, "draft_n": 20, "draft_n_accepted": 20})
    finding = k_advice.diagnosis(r, [r])
    assert finding.code is Code.TOO_FEW_DRAFTS and "decays" not in finding.message
    assert "it drafted only 20 tokens in 2 drafts over 288 decoding steps" in finding.message
