"""Counters bound the gain: a speculative row cannot be faster than tokens / (tokens − accepted) times
the target alone; a measurement above that, or requests that drafted nothing yet ran faster (an A/A
check), say the machine's speed changed — never a speed-up. A row whose speculation is unknown is
not a speed-up either. Synthetic rows; the real-server checks are in test_sweep_schedule_llama.py."""

from __future__ import annotations

import io
import math

import pytest
from draftbench.analysis.pairing import request_bound
from draftbench.analysis.summary import verdicts_of
from draftbench.analysis.verdict import analyze
from draftbench.results.file import RequestRecord, ResultsFile, Row
from draftbench.sweep.console import Console

PROMPTS = (("code", "code"), ("json", "json"), ("story", "prose"), ("chat", "chat"))


def requests(tps: float, *, drafted: dict[str, int] | None = None, accepted: dict[str, int] | None = None,
             factor: dict[str, float] | None = None, tokens: int = 49) -> tuple[RequestRecord, ...]:
    out = []
    for run in range(3):
        for i, (pid, category) in enumerate(PROMPTS):
            rate = tps * (factor or {}).get(pid, 1.0) * (1 + 0.003 * ((i + run) % 3 - 1))
            out.append(RequestRecord(prompt_id=pid, category=category, run=run, decode_tps=rate,
                                     completion_tokens=tokens,
                                     draft_n=None if drafted is None else drafted.get(pid, 0),
                                     draft_n_accepted=None if accepted is None else accepted.get(pid, 0), text="t"))
    return tuple(out)


def results(*rows: Row, upstream: bool = False) -> ResultsFile:
    return ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="f",
                       settings={"noise_floor": 0.02, "temperature": 0.0}, results=rows,
                       schema_version=None if upstream else 4)


BASELINE = Row(target="T", role="baseline", mean_tps=50.0, requests=requests(50.0))


def spec(label: str, reqs: tuple[RequestRecord, ...], active: bool | None = True) -> Row:
    return Row(target="T", draft=label, role="speculative", mean_tps=60.0, speculation_active=active,
               candidate={"label": label, "method": ["ngram-simple"]}, requests=reqs)


def test_a_request_cannot_beat_its_target_steps():
    r = RequestRecord("p", "c", 0, completion_tokens=49, draft_n=10, draft_n_accepted=8)
    assert request_bound(r) == pytest.approx(48 / 40)
    assert request_bound(RequestRecord("p", "c", 0, completion_tokens=49, draft_n=0, draft_n_accepted=0)) == 1.0
    assert request_bound(RequestRecord("p", "c", 0, completion_tokens=49)) is None       # no counters: no bound


def test_a_gain_above_what_the_counters_allow_is_the_machine_not_speculation():
    # 8 of 48 decoded tokens drafted and accepted on every request: at most 48/40 = +20%; measured +50%
    fast = spec("ngram-simple", requests(75.0, drafted={p: 8 for p, _ in PROMPTS}, accepted={p: 8 for p, _ in PROMPTS}))
    res = analyze(results(BASELINE, fast))
    row = res.results[1]
    bound = row.counter_bound
    assert bound["ratio"] == pytest.approx(1.2, abs=1e-3) and bound["speed_changed"] is True
    assert bound["excess"]["low"] > 1.0 and "speed changed" in bound["text"]
    assert row.speedup.ratio == pytest.approx(1.5, abs=0.01) and row.speedup.ci95_low > 1.2
    assert row.speedup.significant is False and "counters" in row.speedup.note
    assert all(s.significant is False for s in row.speedup_by_category.values())
    verdict = verdicts_of(res)[0]
    assert verdict.recommended_draft is None and "not recommended" in verdict.verdict
    out = io.StringIO()
    Console(out).row_recorded(row)
    text = out.getvalue()
    assert "counters allow at most +20.0%" in text and "! Not a speed-up:" in text


def test_requests_that_drafted_nothing_are_a_free_a_a_check():
    # code repeats a lot (bound 48/8 = 6x); the other prompts drafted nothing yet ran 40% faster
    drafted = {"code": 40}
    fast = spec("ngram-mod", requests(50.0, drafted=drafted, accepted=drafted,
                                      factor={"code": 2.0, "json": 1.4, "story": 1.4, "chat": 1.4}))
    row = analyze(results(BASELINE, fast)).results[1]
    bound = row.counter_bound
    assert bound["no_drafts"]["requests"] == 9 and bound["no_drafts"]["low"] > 1.3
    assert bound["excess"]["high"] > 1.0                 # the excess alone would not tell …
    assert bound["speed_changed"] is True                # … the A/A check does
    assert "drafted nothing" in bound["text"] and row.speedup.significant is False


def test_a_gain_within_the_counters_is_kept():
    drafted = {p: 30 for p, _ in PROMPTS}
    good = spec("ngram-simple", requests(50.0, drafted=drafted, accepted={p: 24 for p, _ in PROMPTS},
                                          factor={p: 1.3 for p, _ in PROMPTS}))
    res = analyze(results(BASELINE, good))
    row = res.results[1]
    assert row.counter_bound["speed_changed"] is False and row.counter_bound["ratio"] == pytest.approx(2.0)
    assert row.speedup.significant is True
    assert verdicts_of(res)[0].recommended_draft == "ngram-simple"


def test_unknown_speculation_is_not_a_speedup_but_an_upstream_file_still_shows_its_best():
    unknown = spec("lmstudio-draft", requests(70.0), active=None)
    res = analyze(results(BASELINE, unknown))
    row = res.results[1]
    assert row.counter_bound is None and row.speedup.ratio == pytest.approx(1.4, abs=0.01)
    assert row.speedup.significant is False and "no draft counters" in row.speedup.note
    assert verdicts_of(res)[0].recommended_draft is None
    upstream = analyze(results(Row(target="T", role="baseline", mean_tps=50.0),
                               Row(target="T", draft="d", role="speculative", mean_tps=70.0), upstream=True))
    entry = verdicts_of(upstream)[0]
    assert entry.recommended_draft == "d" and "significance cannot be judged" in entry.verdict
    assert math.isclose(entry.speedup.ratio, 1.4)


def test_no_figure_quoted_passes_what_the_counters_allow():
    # one prompt pair left: +33.7% measured (too few to tell the machine changed), counters allow +0%
    one = (RequestRecord(prompt_id="code", category="code", run=0, decode_tps=66.85, completion_tokens=49,
                         draft_n=6, draft_n_accepted=0, text="t"),)
    base = Row(target="T", role="baseline", mean_tps=50.0,
               requests=(RequestRecord(prompt_id="code", category="code", run=0, decode_tps=50.0,
                                       completion_tokens=49, text="t"),))
    res = analyze(results(base, spec("ngram-simple", one)))
    row = res.results[1]
    assert row.counter_bound["ratio"] == pytest.approx(1.0) and row.counter_bound["speed_changed"] is False
    assert row.speedup.ratio == pytest.approx(1.0) and "capped at the +0.0% its counters allow" in row.speedup.note
    assert "measured +33.7%" in row.speedup.note
    assert all(s.ratio <= 1.0 for s in row.speedup_by_category.values())
    # within its counters, an interval is quoted as measured
    drafted = {p: 30 for p, _ in PROMPTS}
    good = spec("ngram-simple", requests(50.0, drafted=drafted, accepted={p: 24 for p, _ in PROMPTS},
                                          factor={p: 1.3 for p, _ in PROMPTS}))
    kept = analyze(results(BASELINE, good)).results[1]
    assert kept.speedup.note is None and kept.speedup.ratio == pytest.approx(1.3, abs=0.01)


def test_a_judgement_is_kept_only_while_what_it_was_judged_on_is_the_same(monkeypatch):
    """The sweep's judgements (comparison.Judgements): the same row and baseline objects judged with the same
    floor, drift, spread and provenance are judged once; any of those changed is judged afresh."""
    from dataclasses import replace

    from draftbench.analysis import comparison
    calls = []
    real = comparison.judged
    monkeypatch.setattr(comparison, "judged", lambda *a: calls.append(a) or real(*a))
    row = Row(target="T", draft="d", role="speculative", requests=requests(60.0, drafted={}, accepted={}),
              speculation_active=True, draft_n=10)
    memo = comparison.Judgements()
    first = memo.judged(row, BASELINE, 0.02, {}, {}, False)
    assert memo.judged(row, BASELINE, 0.02, {}, {}, False) is first and len(calls) == 1
    memo.judged(row, BASELINE, 0.05, {}, {}, False)                       # another floor
    memo.judged(row, BASELINE, 0.05, {("T", 1): 0.08}, {}, False)         # the control's drift now measured
    memo.judged(replace(row), BASELINE, 0.05, {("T", 1): 0.08}, {}, False)   # a new row object, the same fields
    assert len(calls) == 4
