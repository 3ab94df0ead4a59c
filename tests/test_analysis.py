"""Verdict logic on synthetic rows: drift measured by the control baseline raises the noise floor."""

from __future__ import annotations

from draftbench.analysis import analyze
from draftbench.results import RequestRecord, ResultsFile, Row

PROMPTS = ("code", "json", "list")


def row(role: str, tps: float, draft: str | None = None, acceptance: float | None = None) -> Row:
    # A little per-request spread so the paired CI is tight but not degenerate.
    requests = tuple(RequestRecord(prompt_id=p, category=p, run=run, decode_tps=tps * (1 + 0.002 * (i - 1)),
                                   completion_tokens=64, text="same")
                     for run in range(3) for i, p in enumerate(PROMPTS))
    return Row(target="T", draft=draft, role=role, mean_tps=tps, acceptance_rate=acceptance,
               speculation_active=True if draft else None, requests=requests)


def results(*rows: Row) -> ResultsFile:
    return ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="f",
                       settings={"noise_floor": 0.02, "temperature": 0.0}, results=rows)


def by_draft(res: ResultsFile) -> dict:
    return {r.draft: r for r in res.results if r.role == "speculative"}


def test_gain_smaller_than_the_measured_drift_is_not_significant():
    res = analyze(results(row("baseline", 100), row("speculative", 110, "small gain", 0.7),
                          row("speculative", 130, "big gain", 0.8), row("control", 115)))
    rows = by_draft(res)
    assert rows["small gain"].speedup["significant"] is False
    assert "drift" in rows["small gain"].speedup["note"]
    assert rows["big gain"].speedup["significant"] is True
    verdict = res.summary["targets"][0]["verdict"]
    assert "use big gain" in verdict and "drifted" in verdict


def test_without_drift_the_configured_noise_floor_applies():
    res = analyze(results(row("baseline", 100), row("speculative", 110, "small gain", 0.7), row("control", 100.5)))
    assert by_draft(res)["small gain"].speedup["significant"] is True
    assert "drifted" not in res.summary["targets"][0]["verdict"]


def test_well_accepted_but_slower_draft_is_explained_and_useless_draft_named():
    res = analyze(results(row("baseline", 100), row("speculative", 60, "good but slow", 0.8),
                          row("speculative", 30, "useless", 0.02)))
    verdict = res.summary["targets"][0]["verdict"]
    assert "not recommended" in verdict
    assert "compute-bound" in verdict
    assert "under 10% accepted): useless" in verdict
