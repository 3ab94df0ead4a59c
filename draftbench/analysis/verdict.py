"""From request records to rows, and from rows to verdicts.

Everything here is a pure function of the data in a results file, so a sweep, a resumed
sweep and ``--chart-only`` all reach the same numbers.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import fields, replace
from typing import Any

from ..common.bulk import collector_paused
from ..results import fragments, method_stats, theory
from ..results.file import RequestRecord, ResultsFile, Row
from ..results.findings import Code, Finding
from ..results.kinds import Role
from ..results.speedup import Speedup
from ..results.theory import Theory
from . import context_length, stats
from .comparison import compare, judged, session_spreads
from .concurrency import level_summary, primary_level, row_levels  # noqa: F401 (the report reads levels here)
from .decision import Decision, decide
from .degenerate import assess as assess_loops
from .draft import best_k as kpredict
from .draft import ceiling, k_advice
from .draft import positions as perpos
from .pairing import CONTENDED, left_out
from .replication import THESE_PROMPTS
from .session import session_speedup
from .stage_evidence import estimate
from .summary import Summary
from .target_verdict import recommend


def _sum(values) -> int | None:
    vals = [v for v in values if v is not None]
    return sum(vals) if vals else None


def _mean(values) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.fmean(vals) if vals else None


def acceptance(records) -> tuple[int | None, int | None, float | None]:
    """Σ accepted / Σ drafted over all requests. None when nothing was measured; 0.0 is a real 0."""
    drafted = _sum(r.draft_n for r in records)
    accepted = _sum(r.draft_n_accepted for r in records)
    if drafted is None:
        return None, None, None
    if drafted == 0:
        return 0, accepted or 0, None
    return drafted, accepted, round((accepted or 0) / drafted, 4)


def summarize_records(records: list[RequestRecord], *, max_tokens: int, runs: int,
                      flags: dict[str, str] | None = None) -> dict:
    """Row fields computed from the measured requests. ``flags``: how warnings name the settings
    to change (see :func:`stats.stability_warnings`; default: the sweep config's keys)."""
    ok = [r for r in records if r.error is None]
    tps = stats.summarize(r.decode_tps for r in ok)
    drafted, accepted, rate = acceptance(ok)
    steps = _sum(r.verify_steps for r in ok)
    per_pos, per_pos_findings = perpos.row_positions(ok)
    by_prompt: dict[str, list[float]] = {}
    for r in ok:
        if r.decode_tps is not None:
            by_prompt.setdefault(r.prompt_id, []).append(r.decode_tps)
    by_category: dict[str, dict] = {}
    for category in dict.fromkeys(r.category for r in ok):
        group = [r for r in ok if r.category == category]
        _, _, cat_rate = acceptance(group)
        by_category[category] = {"n": len(group), "mean_tps": _round(_mean(r.decode_tps for r in group), 2),
                                 "acceptance_rate": cat_rate}
    run_cv = stats.run_to_run_cv(by_prompt)
    warnings = stats.stability_warnings(runs=runs, n_requests=len(ok), run_cv=run_cv, n_prompts=len(by_prompt),
                                        tps_values=[r.decode_tps for r in ok],
                                        completion_tokens=[r.completion_tokens for r in ok], max_tokens=max_tokens,
                                        flags=flags) + per_pos_findings
    server_tps = stats.summarize(r.server_decode_tps for r in ok)
    if tps and server_tps and tps["median"] and server_tps["median"]:
        gap = abs(tps["median"] / server_tps["median"] - 1)
        if gap > 0.05:
            warnings.append(Finding(Code.CLIENT_SERVER_GAP, f"client-side tok/s differs from the server's own "
                                    f"figure by {gap:.0%} — the network or a proxy may distort timings; benchmark on "
                                    "the server machine"))
    ttft = stats.summarize(r.ttft_s for r in ok)
    total = stats.summarize(r.total_s for r in ok)
    return {
        "mean_tps": _round(tps["mean"], 2) if tps else None,
        "median_tps": _round(tps["median"], 2) if tps else None,
        "mean_ttft": _round(ttft["mean"], 3) if ttft else None,
        "mean_total_time": _round(total["mean"], 2) if total else None,
        "acceptance_rate": rate,
        "draft_n": drafted, "draft_n_accepted": accepted, "verify_steps": steps,
        # llama-server's own "mean len": the target's token plus the accepted drafts, per verify step
        "mean_accepted_len": round(1 + accepted / steps, 3) if steps and accepted is not None else None,
        "accepted_per_pos": per_pos,
        "draft_fragments": fragments.summarize(r.draft_fragments for r in ok),
        "tps": tps, "server_tps": server_tps, "ttft_s": ttft, "total_s": total,
        "run_to_run_cv": _round(run_cv, 4), "by_category": by_category, "warnings": tuple(warnings),
        "method_stats": method_stats.aggregate(r.draft_details for r in ok),
    }


_ROW_FIELDS = frozenset(f.name for f in fields(Row))


def _evolve(row: Row, **changes: Any) -> Row:
    """``dataclasses.replace`` for what the analysis computed, whose values are already typed (a Speedup,
    a Theory, Findings): the same new row without running ``Row.__post_init__`` again — the analysis
    replaces a row up to four times, and that was a third of analysing a 50k-row file."""
    unknown = changes.keys() - _ROW_FIELDS
    if unknown:
        raise TypeError(f"Row has no field {', '.join(sorted(unknown))}")
    new = object.__new__(Row)
    new.__dict__.update(row.__dict__)
    new.__dict__.update(changes)
    return new


def _round(x, digits):
    return None if x is None else round(x, digits)


def compare_to_baseline(row: Row, baseline: Row, *, noise_floor: float) -> Speedup | None:
    """Speed-up with a CI (its own session spread; fresh prompts only, see comparison.py); the summary
    means' ratio for upstream rows (no CI there)."""
    return compare(row, baseline, noise_floor=noise_floor).speedup


def equivalence(row: Row, baseline: Row, *, temperature: float) -> dict | None:
    """Compare completions with the baseline's, per (prompt, repetition), at temperature 0."""
    if not row.requests or not baseline.requests:
        return None
    if temperature and temperature > 0:
        return {"checked": False, "reason": f"temperature is {temperature:g}; outputs are only comparable at 0"}
    base = {(r.prompt_id, r.run): r.text for r in baseline.requests if r.error is None and r.text is not None}
    compared, matched, mismatches = 0, 0, []
    for r in row.requests:
        key = (r.prompt_id, r.run)
        if r.error is not None or r.text is None or key not in base:
            continue
        compared += 1
        expected, got = base[key], r.text
        if expected == got:
            matched += 1
            continue
        pos = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b), min(len(expected), len(got)))
        mismatches.append({"prompt_id": r.prompt_id, "run": r.run, "char_pos": pos,
                           "baseline_len": len(expected), "candidate_len": len(got),
                           "baseline_excerpt": expected[max(0, pos - 20): pos + 40],
                           "candidate_excerpt": got[max(0, pos - 20): pos + 40]})
    if not compared:
        return None
    return {"checked": True, "compared": compared, "matched": matched, "match_rate": round(matched / compared, 4),
            "mismatches": mismatches}


def _file_size(path: str | None) -> int | None:
    try:
        return os.path.getsize(path) if path else None
    except OSError:
        return None


def theory_for(row: Row, baseline: Row, draft_alone: Row | None) -> Theory | None:
    if not row.is_speculative or row.acceptance_rate is None:
        return None
    cost, cost_source = None, None
    if draft_alone and draft_alone.ok and draft_alone.mean_tps and baseline.mean_tps:
        cost, cost_source = baseline.mean_tps / draft_alone.mean_tps, "measured (draft alone vs target alone)"
    else:
        ds, ts = _file_size(row.draft_path), _file_size(row.target_path)
        if ds and ts:
            cost, cost_source = ds / ts, "estimated from file sizes (set settings.draft_alone to measure it)"
    k_mean = None
    if row.draft_n and row.verify_steps:
        k_mean = row.draft_n / row.verify_steps
    elif row.draft_max:
        k_mean = float(row.draft_max)
    return theory.evaluate(acceptance_rate=row.acceptance_rate, mean_accepted_len=row.mean_accepted_len,
                           k_mean=k_mean, cost_ratio=cost, cost_source=cost_source,
                           measured_ratio=row.speedup.ratio if row.speedup else None)


def _inside_the_draft(row: Row, baseline: Row | None, same_candidate: list[Row], same_target: list[Row]) -> Row:
    """Per-position diagnosis, the k predicted from this row, and this draft against its ceiling.
    ``same_candidate``: the rows of this target and candidate (other k, ceiling runs); ``same_target``:
    every row of this target (a hybrid's draft measured alone)."""
    prediction = kpredict.predict(row, baseline) if row.ok else None
    if prediction is not None:
        prediction = kpredict.with_measured(prediction, kpredict.siblings(row, same_candidate))
    summary = ceiling.summarize(row, ceiling.ceiling_rows(same_candidate, row)) if row.ok else None
    row = _evolve(row, k_prediction=prediction, ceiling=summary)
    return _evolve(row, diagnosis=k_advice.diagnosis(row, same_target))    # the one statement about k


def measured_drift(results: ResultsFile, *, noise_floor: float, concurrency: int = 1) -> dict[str, float]:
    """Per target, |ratio − 1| of a control baseline against the first one (both at ``concurrency``
    streams), where significant."""
    drift: dict[str, float] = {}
    for row in results.results:
        baseline = results.baseline_for(row.target, concurrency)
        if row.ok and row.role is Role.CONTROL and row.concurrency == concurrency and baseline is not None:
            speed = compare_to_baseline(row, baseline, noise_floor=noise_floor)
            if speed and speed.significant:
                drift[row.target] = max(drift.get(row.target, 0.0), abs(speed.ratio - 1.0))
    return drift


def analyze(results: ResultsFile) -> ResultsFile:
    """Recompute every derived field (speed-ups, equivalence, theory, summary) from the rows."""
    with collector_paused():       # a row's new values hold no reference cycles (see common/bulk.py); each length apart
        return context_length.analyze_lengths(results, _analyze) if context_length.on_axis(results) else _analyze(results)


def analyze_speedups(results: ResultsFile) -> ResultsFile:
    """Only every row's speed-up, recomputed exactly as :func:`analyze` does (the same drift, noise-floor
    and counter rules): what a CSV export shows, at a fraction of the cost. The summary (the verdict) is
    dropped; the rows' other derived fields stay as the file holds them: read nothing but the speed-up."""
    with collector_paused():
        noise_floor, drift = _floor_and_drift(results)
        spreads = session_spreads(results)
        rows = []
        for row in results.results:
            baseline = results.baseline_for(row.target, row.concurrency)
            if baseline is not None and _compared(row):
                found = judged(row, baseline, noise_floor, drift, spreads, results.is_upstream)[0]
                row = _evolve(row, speedup=found.speedup)
            rows.append(row)
        return replace(results, results=tuple(rows), summary=None)


def _floor_and_drift(results: ResultsFile) -> tuple[float, dict[tuple[str, int], float]]:
    """The file's noise floor, and per (target, streams) the drift its control baseline measured."""
    noise_floor = results.read_settings().noise_floor
    return noise_floor, {(target, n): value for n in row_levels(results)
                         for target, value in measured_drift(results, noise_floor=noise_floor, concurrency=n).items()}


def _compared(row: Row) -> bool:
    """Whether the analysis measures ``row`` against its target's baseline (where there is one)."""
    return row.measured and row.role in (Role.SPECULATIVE, Role.CONTROL, Role.CEILING)


def _analyze(results: ResultsFile) -> ResultsFile:
    noise_floor, drift = _floor_and_drift(results)
    temperature = results.read_settings().temperature
    spreads = session_spreads(results)
    staged = decide(results)
    alone_by_draft: dict[str, Row] = {}
    by_candidate: dict[tuple[str, str | None], list[Row]] = {}
    by_target: dict[str, list[Row]] = {}
    for r in results.results:      # grouped once: a lookup per row, not a scan (O(rows), not O(rows²))
        if r.role is Role.DRAFT_ALONE:
            alone_by_draft.setdefault(r.target, r)
        by_candidate.setdefault((r.target, r.draft), []).append(r)
        by_target.setdefault(r.target, []).append(r)
    rows = []
    for row in results.results:
        baseline = results.baseline_for(row.target, row.concurrency)
        if baseline is not None and _compared(row):
            found, floor = judged(row, baseline, noise_floor, drift, spreads, results.is_upstream)
            speed, by_category, confirmed = found.speedup, found.by_category, found.confirmed
            if row.target in staged and row.role is Role.SPECULATIVE and row.concurrency == 1:
                speed = staged_speedup(staged[row.target], row, speed)
            # A ceiling row's text is not valid output (synthetic acceptance): never compared.
            row = _evolve(row, speedup=speed, counter_bound=found.counter_bound, confirmed=confirmed,
                          equivalence=None if row.role is Role.CEILING else
                          equivalence(row, baseline, temperature=temperature),
                          speedup_by_category=None if row.role is Role.CEILING else by_category,
                          speedup_in_session=None if row.role is Role.CEILING else
                          session_speedup(row, baseline, noise_floor=floor))
            if row.role is Role.SPECULATIVE and row.concurrency == 1:   # the theory models one stream
                alone = alone_by_draft.get(row.draft) if row.draft is not None else None
                row = _evolve(row, theory=theory_for(row, baseline, alone))
        if row.ok and baseline is not None and row.role is not Role.CEILING:
            row = _with_loop_check(row, baseline, noise_floor, stats.flags_of(results.made_by))
        if baseline is not None and _compared(row):
            row = _with_left_out(row, baseline)
        if row.role is Role.SPECULATIVE and row.concurrency == 1:     # per-position counts need one stream
            row = _inside_the_draft(row, baseline, by_candidate[(row.target, row.draft)], by_target[row.target])
        rows.append(row)
    results = replace(results, results=tuple(rows))
    return replace(results, summary=Summary(recommend(results, staged), server_loads(results)))


def _significant(row: Row) -> bool | None:
    return row.speedup.significant if row.speedup else None


def _with_loop_check(row: Row, baseline: Row, noise_floor: float, flags: dict[str, str]) -> Row:
    """Mark a row measured on the target's looping output (recomputed on every analysis, so the
    finding is replaced, never repeated)."""
    info, finding = assess_loops(row, baseline, noise_floor=noise_floor, flags=flags)
    kept = tuple(w for w in row.warnings if w.code is not Code.DEGENERATE_OUTPUT)
    return _evolve(row, degenerate_output=info, warnings=kept + ((finding,) if finding else ()))


def _with_left_out(row: Row, baseline: Row) -> Row:
    """Say how many of the row's requests the comparison leaves out, and why — or keeps although other programs'
    share rose, because it rose on one side only (see analysis/pairing.py)."""
    found = left_out(row, baseline)
    kept = tuple(w for w in row.warnings if w.code not in (Code.PAIRS_LEFT_OUT, Code.OWN_LOAD))
    measured = sum(1 for r in row.requests if r.error is None)
    findings = []
    if found.contended:
        findings.append(Finding(Code.PAIRS_LEFT_OUT, f"{found.contended} of {measured} requests are left out of the "
                                f"comparison: they ran while other programs took a burst of the CPU (at least "
                                f"{CONTENDED:.0%} of the machine above the stage's usual, on one side or the other) — "
                                "they measured the machine, not the method; close other programs while a sweep runs"))
    if found.own_load:
        findings.append(Finding(Code.OWN_LOAD, "other programs' share of the CPU rose during this candidate's "
                                "requests far more often than during the target alone's: that is load the candidate "
                                "brings itself (a helper process outside its server's process tree?), not bursts of "
                                f"other programs, so none of the {found.own_load} requests of those stages is left "
                                "out — their speed is what the candidate costs"))
    if not findings and len(kept) == len(row.warnings):
        return row
    return _evolve(row, warnings=kept + tuple(findings))


def staged_speedup(decision: Decision, row: Row, measured: Speedup | None) -> Speedup | None:
    """A staged row's own speed-up: its stages against the target alone with the machine's pooled session
    spread, 95% for this candidate alone (the verdict's quote is the one corrected for choosing among many);
    a row that is not a speed-up keeps its note; a floor raised to the control's drift is kept, with its note."""
    stages, rule = decision.evidence, decision.rule
    name = next((n for n, r in stages.rows.items() if r.key == row.key), None)
    series = stages.series.get(name) if name is not None else None
    est = estimate(series, stages.spread.pair) if series else None
    if est is None or measured is None:
        return measured
    floor = max(rule.noise_floor, measured.noise_floor or 0.0)
    found = stats.from_estimate(est, noise_floor=floor, n_pairs=measured.n_pairs or 0)
    if rule.spending.horizon and (row.design or {}).get("fixed_prompts"):
        found = replace(found, question=THESE_PROMPTS)
    found = replace(found, interval=f"95% for this candidate alone, for the average on {found.question}")
    if measured.note and floor > rule.noise_floor and measured.noise_floor == floor:
        return replace(found, note=measured.note)          # judged against the drift: significance still says
    return replace(found, significant=False, note=measured.note) if measured.note else found


def server_loads(results: ResultsFile) -> int:
    """Servers the sweep started: every server session its requests record (schema 4), else one per
    row that reached a server, more for rows a race measured over several loads (``race.loads``)."""
    sessions = {r.session for row in results.results for r in row.requests if r.session}
    total = len(sessions)
    for row in results.results:
        if any(r.session for r in row.requests):
            continue
        loads = (row.race or {}).get("loads")
        if isinstance(loads, int):
            total += loads
        elif row.server and row.server.get("command"):
            total += 1
    return total
