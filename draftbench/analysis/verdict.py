"""From request records to rows, and from rows to verdicts: :func:`analyze` derives every row's fields
(:mod:`row_analysis`, one row against its file) and each target's verdict (:mod:`target_verdict`, on the
staged decision of :mod:`decision`).

Everything here is a pure function of the data in a results file, so a sweep, a resumed
sweep and ``--chart-only`` all reach the same numbers.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import replace

from ..common.bulk import collector_paused
from ..results import fragments, method_stats
from ..results.file import RequestRecord, ResultsFile, Row
from ..results.findings import Code, Finding
from . import context_length, stats, temperature_axis
from .comparison import Judgements, judged
from .concurrency import level_summary, primary_level, row_levels  # noqa: F401 (the report reads levels here)
from .decision import Decider, Decision
from .draft import positions as perpos
from .row_analysis import RowContext, analyze_all, compared, evolve
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


def _round(x, digits):
    return None if x is None else round(x, digits)


def analyze(results: ResultsFile, decider: Decider | None = None) -> ResultsFile:
    """Recompute every derived field (speed-ups, equivalence, theory, summary) from the rows; ``decider``: the one
    that decided the sweep's looks on these rows as they grew (off the axes: each point is decided apart)."""
    with collector_paused():       # a row's new values hold no reference cycles (see common/bulk.py); each length apart
        if temperature_axis.on_axis(results):
            return temperature_axis.analyze_temperatures(results, _analyze)
        if context_length.on_axis(results):
            return context_length.analyze_lengths(results, _analyze)
        return _analyze(results, decider)


def analyze_speedups(results: ResultsFile) -> ResultsFile:
    """Only every row's speed-up, recomputed exactly as :func:`analyze` does (the same drift, noise-floor
    and counter rules): what a CSV export shows, at a fraction of the cost. The summary (the verdict) is
    dropped; the rows' other derived fields stay as the file holds them: read nothing but the speed-up."""
    if temperature_axis.on_axis(results):       # each temperature against its own baseline
        return temperature_axis.analyze_temperatures(results, _speedups)
    return _speedups(results)


def _speedups(results: ResultsFile) -> ResultsFile:
    with collector_paused():
        ctx = RowContext.of(results, {})
        rows = []
        for row in results.results:
            baseline = results.baseline_for(row.target, row.concurrency)
            if baseline is not None and compared(row):
                found = judged(row, baseline, ctx.noise_floor, ctx.drift, ctx.spreads, results.is_upstream)[0]
                row = evolve(row, speedup=found.speedup)
            rows.append(row)
        return replace(results, results=tuple(rows), summary=None)


def _analyze(results: ResultsFile, decider: Decider | None = None) -> ResultsFile:
    decider = decider or Decider()
    staged = decider.decide(results)
    results = replace(results, results=tuple(analyze_all(RowContext.of(results, staged, decider.judgements))))
    return replace(results, summary=Summary(recommend(results, staged), server_loads(results)))


def analyze_rows(results: ResultsFile, keys: Iterable[tuple], staged: Mapping[str, Decision] | None = None,
                 judgements: Judgements | None = None) -> list[Row]:
    """The rows of ``keys`` as :func:`analyze` would make them, read against their targets' rows only (and their
    drafts measured alone; on an axis, at their length or temperature); ``staged``: their targets' staged decisions,
    where the caller has them (else a staged row keeps its own speed-up against the target alone); ``judgements``:
    the sweep's (its final analysis then finds these rows judged). What the sweep shows as it goes: it costs those
    targets' rows, not the file's."""
    wanted = [row for key in keys if (row := results.row(key)) is not None]
    targets = {r.target for r in wanted} | {r.draft for r in wanted if r.draft}
    points = {(r.context_tokens, r.temperature) for r in wanted}
    part = replace(results, results=tuple(r for r in results.results if r.target in targets
                                          and (r.context_tokens, r.temperature) in points), summary=None)
    with collector_paused():
        ctx = RowContext.of(part, staged or {}, judgements)
        analysed = {r.key: r for r in analyze_all(ctx, [r.key for r in wanted])}
        return [analysed[r.key] for r in wanted]


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
