"""One row against the file it belongs to: every field the analysis derives for it — its speed-up against its
baseline (the staged one where its target was measured in stages), equivalence with the baseline's output, the
textbook model, the loop check, the pairs left out, what its draft says about k and its ceiling.

:class:`RowContext` is what a row's analysis reads of the file, gathered once: for the whole file
(``verdict.analyze``) or for the targets of a few rows (``verdict.analyze_rows``, what the sweep shows as it
goes: the cost of those targets' rows, not the file's). Everything is a pure function of the rows, so a
sweep, a resumed sweep and ``--chart-only`` reach the same numbers.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from ..results import theory
from ..results.file import ResultsFile, Row
from ..results.findings import Code, Finding
from ..results.kinds import Role
from ..results.speedup import Speedup
from ..results.theory import Theory
from . import stats
from .comparison import Judgements, compare, judged, session_spreads
from .concurrency import row_levels
from .decision import Decision
from .degenerate import assess as assess_loops
from .draft import best_k as kpredict
from .draft import ceiling, k_advice
from .pairing import CONTENDED, left_out
from .replication import THESE_PROMPTS
from .session import session_speedup
from .stage_evidence import estimate_stages

_ROW_FIELDS = frozenset(f.name for f in fields(Row))


def evolve(row: Row, **changes: Any) -> Row:
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


def compare_to_baseline(row: Row, baseline: Row, *, noise_floor: float) -> Speedup | None:
    """Speed-up with a CI (its own session spread; fresh prompts only, see comparison.py); the summary
    means' ratio for upstream rows (no CI there)."""
    return compare(row, baseline, noise_floor=noise_floor).speedup


def equivalence(row: Row, baseline: Row, *, temperature: float) -> dict | None:
    """Compare completions with the baseline's, per (prompt, repetition), at temperature 0."""
    if not row.requests or not baseline.requests:
        return None
    if temperature and temperature > 0:
        return {"checked": False, "reason": f"temperature is {temperature:g}: answers need not match above 0 (what "
                "can be checked is the output distribution: settings.distribution_samples)"}
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
    row = evolve(row, k_prediction=prediction, ceiling=summary)
    return evolve(row, diagnosis=k_advice.diagnosis(row, same_target))    # the one statement about k


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


def _floor_and_drift(results: ResultsFile) -> tuple[float, dict[tuple[str, int], float]]:
    """The file's noise floor, and per (target, streams) the drift its control baseline measured."""
    noise_floor = results.read_settings().noise_floor
    return noise_floor, {(target, n): value for n in row_levels(results)
                         for target, value in measured_drift(results, noise_floor=noise_floor, concurrency=n).items()}


def compared(row: Row) -> bool:
    """Whether the analysis measures ``row`` against its target's baseline (where there is one)."""
    return row.measured and row.role in (Role.SPECULATIVE, Role.CONTROL, Role.CEILING)


@dataclass(frozen=True)
class RowContext:
    """What analysing a row reads of its file: the noise floor and each control's drift, the temperature, the
    session spreads, the staged decisions, each draft measured alone (a lookup per row, not a scan)."""

    results: ResultsFile
    noise_floor: float
    drift: dict[tuple[str, int], float]
    temperature: float
    spreads: dict
    staged: Mapping[str, Decision]
    flags: dict[str, str]
    alone_by_draft: dict[str, Row]
    judgements: Judgements | None = None     # a sweep's: rows unchanged since it last judged them are not again

    @classmethod
    def of(cls, results: ResultsFile, staged: Mapping[str, Decision], judgements: Judgements | None = None
           ) -> RowContext:
        noise_floor, drift = _floor_and_drift(results)
        alone_by_draft: dict[str, Row] = {}
        for r in results.results:
            if r.role is Role.DRAFT_ALONE:
                alone_by_draft.setdefault(r.target, r)
        # the file's temperature (on the temperature axis a row carries its own: analyze_row reads that first)
        return cls(results, noise_floor, drift, results.read_settings().temperatures[0], session_spreads(results), staged,
                   stats.flags_of(results.made_by), alone_by_draft, judgements)


def analyze_all(ctx: RowContext, keys: Iterable[tuple] | None = None) -> list[Row]:
    """Every row of ``ctx``'s file analysed (``keys``: only those are returned): first each row against its
    baseline, then what a candidate's rows say of each other — its ceiling runs' speed-ups, its other k — read
    from those, so the result does not depend on the rows' order or on an earlier analysis."""
    own = [analyze_row(row, ctx) for row in ctx.results.results]
    by_candidate: dict[tuple[str, str | None], list[Row]] = {}
    by_target: dict[str, list[Row]] = {}
    for r in own:      # grouped once: a lookup per row, not a scan (O(rows), not O(rows²))
        by_candidate.setdefault((r.target, r.draft), []).append(r)
        by_target.setdefault(r.target, []).append(r)
    wanted = set(keys) if keys is not None else None
    out = []
    for row in own:
        if wanted is not None and row.key not in wanted:
            continue
        if row.role is Role.SPECULATIVE and row.concurrency == 1:     # per-position counts need one stream
            row = _inside_the_draft(row, ctx.results.baseline_for(row.target, row.concurrency),
                                    by_candidate[(row.target, row.draft)], by_target[row.target])
        out.append(row)
    return out


def analyze_row(row: Row, ctx: RowContext) -> Row:
    """``row`` against its baseline: every field the analysis derives for it but what its candidate's other rows
    say (:func:`analyze_all` adds those)."""
    noise_floor, results = ctx.noise_floor, ctx.results
    baseline = results.baseline_for(row.target, row.concurrency)
    if baseline is not None and compared(row):
        judge = ctx.judgements.judged if ctx.judgements is not None else judged
        found, floor = judge(row, baseline, noise_floor, ctx.drift, ctx.spreads, results.is_upstream)
        speed, by_category, confirmed = found.speedup, found.by_category, found.confirmed
        if row.target in ctx.staged and row.role is Role.SPECULATIVE and row.concurrency == 1:
            speed = staged_speedup(ctx.staged[row.target], row, speed)
        # A ceiling row's text is not valid output (synthetic acceptance): never compared.
        row = evolve(row, speedup=speed, counter_bound=found.counter_bound, confirmed=confirmed,
                      equivalence=None if row.role is Role.CEILING else
                      equivalence(row, baseline, temperature=ctx.temperature if row.temperature is None
                                  else row.temperature),
                      speedup_by_category=None if row.role is Role.CEILING else by_category,
                      speedup_in_session=None if row.role is Role.CEILING else
                      session_speedup(row, baseline, noise_floor=floor))
        if row.role is Role.SPECULATIVE and row.concurrency == 1:   # the theory models one stream
            alone = ctx.alone_by_draft.get(row.draft) if row.draft is not None else None
            row = evolve(row, theory=theory_for(row, baseline, alone))
    if row.ok and baseline is not None and row.role is not Role.CEILING:
        row = _with_loop_check(row, baseline, noise_floor, ctx.flags)
    if baseline is not None and compared(row):
        row = _with_left_out(row, baseline)
    return _with_summary_behind(row)


def summary_behind(row: Row) -> int:
    """How many answered requests a row holds that its summarised fields do not count (its categories count each
    once): 0 for a row summarised whole, or one with no categories (files before them, upstream's)."""
    if not row.by_category:
        return 0
    counted = sum(c.get("n") or 0 for c in row.by_category.values() if isinstance(c, dict))
    return sum(1 for r in row.requests if r.error is None) - counted


def _with_summary_behind(row: Row) -> Row:
    """Say so where a row's summarised fields (tok/s, acceptance, categories) leave out requests it holds: a sweep
    summarises a row's fields as each step ends, and one killed in the middle of a step saved that step's requests
    without them (its speed-up counts them: it is computed from the requests; a resumed sweep summarises them)."""
    kept = tuple(w for w in row.warnings if w.code is not Code.SUMMARY_BEHIND)
    behind = summary_behind(row) if row.ok else 0
    if behind <= 0:
        return row if len(kept) == len(row.warnings) else evolve(row, warnings=kept)
    answered = sum(1 for r in row.requests if r.error is None)
    return evolve(row, warnings=kept + (Finding(Code.SUMMARY_BEHIND, (
        f"its tok/s, acceptance and per-category figures leave out its last {behind} of {answered} requests: the "
        "sweep stopped in the middle of a step before summarising them (its speed-up counts them) — run the same "
        "sweep command again to resume; it summarises them first")),))


def _with_loop_check(row: Row, baseline: Row, noise_floor: float, flags: dict[str, str]) -> Row:
    """Mark a row measured on the target's looping output (recomputed on every analysis, so the
    finding is replaced, never repeated)."""
    info, finding = assess_loops(row, baseline, noise_floor=noise_floor, flags=flags)
    kept = tuple(w for w in row.warnings if w.code is not Code.DEGENERATE_OUTPUT)
    return evolve(row, degenerate_output=info, warnings=kept + ((finding,) if finding else ()))


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
    return evolve(row, warnings=kept + tuple(findings))


def staged_speedup(decision: Decision, row: Row, measured: Speedup | None) -> Speedup | None:
    """A staged row's own speed-up: its stages against the target alone with the machine's pooled session
    spread, 95% for this candidate alone (the verdict's quote is the one corrected for choosing among many);
    a row that is not a speed-up keeps its note; a floor raised to the control's drift is kept, with its note."""
    stages, rule = decision.evidence, decision.rule
    name = next((n for n, r in stages.rows.items() if r.key == row.key), None)
    series = stages.series.get(name) if name is not None else None
    est = estimate_stages(series, stages.spread.pair) if series else None
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


