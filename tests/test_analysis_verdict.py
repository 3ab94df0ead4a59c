"""Verdict logic on synthetic rows: drift measured by the control baseline raises the noise floor."""

from __future__ import annotations

import pytest
from draftbench.analysis.summary import verdicts_of
from draftbench.analysis.verdict import analyze
from draftbench.results.file import RequestRecord, ResultsFile, Row

PROMPTS = ("code", "json", "list")


def row(role: str, tps: float, draft: str | None = None, acceptance: float | None = None, *,
        drafts: int = 90, drafted: int = 360) -> Row:
    # A little per-request spread so the paired CI is tight but not degenerate; 9 requests of 64 tokens.
    requests = tuple(RequestRecord(prompt_id=p, category=p, run=run, decode_tps=tps * (1 + 0.002 * (i - 1)),
                                   completion_tokens=64, text="same")
                     for run in range(3) for i, p in enumerate(PROMPTS))
    counts = {"draft_n": drafted, "draft_n_accepted": round(drafted * acceptance),
              "verify_steps": drafts} if acceptance is not None else {}
    return Row(target="T", draft=draft, role=role, mean_tps=tps, acceptance_rate=acceptance,
               speculation_active=True if draft else None, requests=requests, **counts)


def results(*rows: Row) -> ResultsFile:
    return ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="f",
                       settings={"noise_floor": 0.02, "temperature": 0.0}, results=rows)


def by_draft(res: ResultsFile) -> dict:
    return {r.draft: r for r in res.results if r.role == "speculative"}


def test_gain_smaller_than_the_measured_drift_is_not_significant():
    res = analyze(results(row("baseline", 100), row("speculative", 110, "small gain", 0.7),
                          row("speculative", 130, "big gain", 0.8), row("control", 115)))
    rows = by_draft(res)
    assert rows["small gain"].speedup.significant is False
    assert "drift" in rows["small gain"].speedup.note
    assert rows["big gain"].speedup.significant is True
    verdict = verdicts_of(res)[0].verdict
    assert "use big gain" in verdict and "drifted" in verdict


def test_without_drift_the_configured_noise_floor_applies():
    res = analyze(results(row("baseline", 100), row("speculative", 110, "small gain", 0.7), row("control", 100.5)))
    assert by_draft(res)["small gain"].speedup.significant is True
    assert "drifted" not in verdicts_of(res)[0].verdict


def test_well_accepted_but_slower_draft_is_explained_and_useless_draft_named():
    res = analyze(results(row("baseline", 100), row("speculative", 60, "good but slow", 0.8),
                          row("speculative", 30, "useless", 0.02)))
    verdict = verdicts_of(res)[0].verdict
    assert "not recommended" in verdict
    assert "compute-bound" in verdict
    assert "under 10% accepted): useless" in verdict


def test_a_slowdown_is_blamed_on_verifying_only_where_the_row_drafted_enough():
    """Issue 37: "mostly accepted (100%) … compute-bound" for a row that drafted 20 tokens in 2 of 288 steps."""
    few = analyze(results(row("baseline", 100), row("speculative", 60, "rare", 1.0, drafts=2, drafted=20)))
    verdict = verdicts_of(few)[0].verdict
    assert "compute-bound" not in verdict
    assert "Its acceptance (100%) says nothing about why it is slower: it drafted only 20 tokens in 2 drafts over " \
           "556 decoding steps" in verdict
    seldom = analyze(results(row("baseline", 100), row("speculative", 60, "seldom", 1.0, drafts=30, drafted=120)))
    verdict = verdicts_of(seldom)[0].verdict
    assert "compute-bound" not in verdict and "drafted on only 7% of the decoding steps" in verdict
    unsure = analyze(results(row("baseline", 100), row("speculative", 99.5, "unsure", 0.9)))   # within the floor
    assert "compute-bound" not in verdicts_of(unsure)[0].verdict


def test_drift_is_measured_and_applied_per_concurrency_level():
    """A control at 2 streams is compared with the baseline at 2 streams, and its drift raises the noise floor
    of that level only; measured_drift keeps its per-target shape for one stream."""
    from dataclasses import replace

    from draftbench.analysis.row_analysis import measured_drift
    at2 = [replace(r, concurrency=2) for r in (row("baseline", 100), row("speculative", 110, "small gain", 0.7),
                                               row("control", 115))]
    res = results(row("baseline", 100), row("speculative", 110, "small gain", 0.7), row("control", 100.5), *at2)
    assert measured_drift(res, noise_floor=0.02) == {}
    assert measured_drift(res, noise_floor=0.02, concurrency=2)["T"] == pytest.approx(0.15, abs=0.01)
    gains = {r.concurrency: r.speedup for r in analyze(res).results if r.role == "speculative"}
    assert gains[1].significant is True and gains[1].note is None
    assert gains[2].significant is False and "drift" in gains[2].note


def test_an_export_recomputes_every_speed_up_as_the_full_analysis_does():
    """--export runs analyze_speedups, not the whole analysis: its speed-ups (drift, speculation not active,
    ceilings, several concurrency levels, rows without a baseline) and so every exported record are the full
    analysis's; the verdict, which an export does not show, is dropped rather than kept from the file."""
    from dataclasses import replace

    from draftbench.analysis.verdict import analyze_speedups
    from draftbench.share.export import results_table

    from share_data import box_a, box_b

    inactive = replace(row("speculative", 130, "inactive", 0.0), speculation_active=False)
    ceiling = replace(row("ceiling", 140, "big gain", 0.9), synthetic={"level": "full", "synth_len": 9.0, "k": 8})
    at2 = [replace(r, concurrency=2) for r in (row("baseline", 100), row("speculative", 110, "small gain", 0.7),
                                               row("control", 115))]
    stale = replace(row("speculative", 120, "no baseline", 0.7), target="U")
    drifted = results(row("baseline", 100), row("speculative", 110, "small gain", 0.7),
                      row("speculative", 130, "big gain", 0.8), row("control", 115), inactive, ceiling, stale, *at2)
    for source in (drifted, box_a(), box_b()):
        full, quick = analyze(source), analyze_speedups(source)
        assert [r.speedup for r in quick.results] == [r.speedup for r in full.results]
        assert results_table(quick, "f").records == results_table(full, "f").records
        assert quick.summary is None
    notes = [r.speedup.note for r in analyze_speedups(drifted).results if r.speedup and r.speedup.note]
    assert any("drift" in n for n in notes) and any("not active" in n for n in notes)
