"""Per target, the verdict entry of the summary: what to run, the figure to expect and what it is for.

A target measured in stages is decided by the staged rule (``stage_records`` → ``stage_verdict``: the
sweep's own decision, replayed from the file); a file measured before stages (blocks and a confirmation,
or upstream's sequence) keeps the rule it was measured under (:mod:`decision`). Whatever decided, the
entry gets the same extras: drafts that rarely predict the target, the control baseline's drift,
speculation that never ran, the best per prompt type, the ceiling and k advice, the session workload,
the command that runs it, and, with several concurrency levels, the crossover.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..common.percent import percent
from ..results.file import ResultsFile, Row
from ..results.kinds import Role, Status
from ..results.speedup import Speedup, plain, rank
from . import decision, stats
from .categories import best_per_category, category_sentence
from .concurrency import primary_level, row_levels
from .crossover import with_crossover
from .draft import best_k as kpredict
from .draft import ceiling, k_advice
from .draft.evidence import why_slower
from .race_outcome import race_outcome
from .session import no_fresh_sentence, session_sentence, session_summary
from .stage_records import TargetStages
from .stage_verdict import StagedVerdict, Verdict, staged_verdict
from .winning_command import add_how_to_run


def recommend(results: ResultsFile, staged: dict[str, TargetStages]) -> dict:
    """The summary's ``targets``: one entry per target (``staged``: the targets measured in stages)."""
    targets = list(dict.fromkeys(r.target for r in results.results if r.role in (Role.BASELINE, Role.SPECULATIVE)))
    floor = results.read_settings().noise_floor
    entries = []
    for target in targets:
        level = primary_level(results, target)
        entry = _decided(results, target, level, staged.get(target) if level == 1 else None, floor)
        _extras(entry, results, target, level)
        entries.append(with_crossover(results, entry) if len(row_levels(results, target)) > 1 else entry)
    # Entries are built from typed values (crossover and the ceiling verdict read them); the summary
    # itself is JSON, as loaded from a file: each speed-up becomes its object here.
    return {"targets": plain(entries)}


def _decided(results: ResultsFile, target: str, level: int, stages: TargetStages | None, floor: float) -> dict:
    baseline = results.baseline_for(target, level)
    at_level = [r for r in results.rows_of(target) if r.concurrency == level]
    entry: dict[str, Any] = {
        "target": target, "baseline_tps": baseline.mean_tps if baseline else None, "recommended_draft": None,
        "draft_max": None, "speedup": None, "acceptance_rate": None, "verdict": "",
        "inactive_drafts": [r.draft or "" for r in at_level
                            if r.role is Role.SPECULATIVE and r.ok and r.speculation_active is False]}
    if baseline is None:
        entry["verdict"] = f"{target}: no baseline was measured, so no draft can be judged."
    elif stages is not None:        # the rows as analysed (their counters' bound)
        stages = replace(stages, rows={n: results.row(r.key) or r for n, r in stages.rows.items()})
        _staged(entry, staged_verdict(stages), stages, baseline)
    else:
        _legacy(entry, results, target, at_level, baseline, floor)
    return entry


# --------------------------------------------------------------------------- measured in stages

def quote_speedup(verdict: StagedVerdict, noise_floor: float) -> Speedup | None:
    """The verdict's quote as a speed-up (its interval: 95% over every candidate and look together)."""
    q = verdict.quote
    if q is None:
        return None
    gains = verdict.verdict in (Verdict.RECOMMEND, Verdict.SHORTLIST) and q.low > 1 + noise_floor
    return Speedup(ratio=round(q.ratio, 4), ci95_low=round(q.low, 4), ci95_high=round(q.high, 4),
                   significant=bool(gains or q.high < 1 / (1 + noise_floor)),
                   method="staged", percent=round((q.ratio - 1) * 100, 2), noise_floor=noise_floor,
                   question=q.question, interval=q.what())


def _staged(entry: dict, verdict: StagedVerdict, stages: TargetStages, baseline: Row) -> None:
    row = stages.rows.get(verdict.pick) if verdict.pick else None
    best_row = stages.rows.get(verdict.best) if verdict.best else None
    speed = quote_speedup(verdict, stages.rule.noise_floor)
    if row is not None:
        entry.update(recommended_draft=row.draft, draft_max=row.draft_max, acceptance_rate=row.acceptance_rate)
    entry.update(speedup=speed, verdict=verdict.sentence(baseline.mean_tps, row), stages=verdict.to_dict(),
                 best={"name": verdict.best, "draft": best_row.draft if best_row else None,
                       "draft_max": best_row.draft_max if best_row else None, "speedup": speed,
                       "decision": verdict.verdict.value})


# --------------------------------------------------------------------------- measured before stages

def _legacy(entry: dict, results: ResultsFile, target: str, at_level: list[Row], baseline: Row,
            floor: float) -> None:
    """Files measured in blocks with a confirmation, or upstream's: the rule they were measured under."""
    candidates = [r for r in at_level if r.counts_as_speedup() and r.speedup]
    raced = [r for r in at_level if r.role is Role.SPECULATIVE and r.race]
    winners = decision.winners(candidates, raced, floor)
    if winners:
        _legacy_winner(entry, winners[0], baseline, len(candidates))
    elif candidates:
        _legacy_none(entry, results, target, candidates)
    elif eliminated := [r for r in results.rows_of(target) if r.status is Status.ELIMINATED and r.speedup]:
        best = max(eliminated, key=lambda r: rank(r.speedup))
        entry["verdict"] = (f"{target}: speculative decoding not recommended — the adaptive search eliminated "
                            f"every candidate (best probe: {best.draft}, {stats.describe_speedup(best.speedup)}).")
    elif session_summary(results, target, baseline.concurrency) is not None:
        entry["verdict"] = no_fresh_sentence(target)
    else:
        entry["verdict"] = f"{target}: speculative decoding not recommended — no draft produced a valid measurement."


def _legacy_winner(entry: dict, best: Row, baseline: Row, n_candidates: int) -> None:
    label = (best.draft or best.target) + (f" (k={best.draft_max})" if best.draft_max else "")
    quoted = best.confirmed or best.speedup
    entry.update(recommended_draft=best.draft, draft_max=best.draft_max, speedup=quoted,
                 acceptance_rate=best.acceptance_rate)
    entry["verdict"] = (f"{best.target}: use {label} — expect {stats.describe_speedup(quoted)} "
                        f"({baseline.mean_tps:.1f} → {best.mean_tps:.1f} tok/s, "
                        f"{percent(best.acceptance_rate)} of drafted tokens accepted)"
                        + (decision.confirmed_text(best, n_candidates) if best.confirmed else
                           decision.at_least_text(best, n_candidates)) + ".")
    if best.degenerate_output:
        entry["verdict"] += (f" Caution: the target's own output loops on "
                             f"{best.degenerate_output['looping_requests']} of "
                             f"{best.degenerate_output['requests']} requests, which flatters this "
                             "speed-up (see the row's warning).")


def _legacy_none(entry: dict, results: ResultsFile, target: str, candidates: list[Row]) -> None:
    best = max(candidates, key=lambda r: rank(r.speedup))
    if results.is_upstream or (best.speedup is not None and best.speedup.significant is None):
        entry.update(recommended_draft=best.draft, speedup=best.speedup, acceptance_rate=best.acceptance_rate)
        why = ("this file has no per-request data" if results.is_upstream or not best.requests else
               "too few requests were measured for a confidence interval")
        entry["verdict"] = (f"{target}: best measured draft is {best.draft} ({stats.describe_speedup(best.speedup)}); "
                            f"{why}, so significance cannot be judged.")
        return
    entry["verdict"] = (f"{target}: speculative decoding not recommended — no draft was significantly faster than "
                        f"the baseline (best: {best.draft}, {stats.describe_speedup(best.speedup)}).")
    confirming = decision.confirmed_row(candidates)
    if confirming is not None:
        entry["verdict"] += decision.not_confirmed_text(confirming)
    entry["verdict"] += why_slower(best)     # only where its drafting can carry the reason


# --------------------------------------------------------------------------- what every verdict adds

def _extras(entry: dict, results: ResultsFile, target: str, level: int) -> None:
    at_level = [r for r in results.rows_of(target) if r.concurrency == level]
    candidates = [r for r in at_level if r.counts_as_speedup() and r.speedup]
    useless = [r.draft or "" for r in candidates if r.acceptance_rate is not None and r.acceptance_rate < 0.1]
    if useless:
        entry["verdict"] += (" Drafts that rarely predict this target (under 10% accepted): "
                             f"{', '.join(dict.fromkeys(useless))}.")
    control = next((r for r in at_level if r.role is Role.CONTROL and r.speedup), None)
    if control and control.speedup and control.speedup.significant:
        entry["verdict"] += (f" Warning: the baseline measured again differed by "
                             f"{stats.describe_speedup(control.speedup)} — the machine drifted during the sweep, "
                             "so gains smaller than that are treated as noise; close other programs and rerun.")
    if entry["inactive_drafts"]:
        entry["verdict"] += f" Speculation never ran with: {', '.join(entry['inactive_drafts'])}."
    by_category = best_per_category(results, target) if not results.is_upstream else {}
    if by_category:
        entry["by_category"] = by_category
        sentence = category_sentence(by_category)
        if sentence:
            entry["verdict"] += " " + sentence
    _add_inside_the_draft(entry, results, target)
    if (in_session := session_summary(results, target, level)) is not None:
        entry["within_session"] = in_session
        entry["verdict"] += " " + session_sentence(in_session)
    add_how_to_run(entry, results, target, level)
    if "stages" not in entry and (outcome := race_outcome(results, target, entry)) is not None:
        entry["race"] = outcome.to_dict()       # a race of the blocks era, in the verdict's words


def _add_inside_the_draft(entry: dict, results: ResultsFile, target: str) -> None:
    """The ceiling verdict and the recommended draft's best k from one run (see ceiling.py, kpredict.py)."""
    cannot_pay = ceiling.no_draft_can_pay(results.rows_of(target), target, results.read_settings().noise_floor)
    speed: Speedup | None = entry.get("speedup")
    if speed and speed.significant and speed.ratio > 1:
        cannot_pay = None     # a real draft was measured faster: noise in a ceiling row must not deny it
    entry["no_draft_can_pay"] = cannot_pay is not None
    if cannot_pay:
        entry["verdict"] += " " + cannot_pay
    rec = entry.get("recommended_draft")
    leading = {r.draft: r for r in kpredict.leading_rows(results.rows_of(target))}
    prediction = leading[rec].k_prediction if rec in leading else None
    entry["k_prediction"] = None
    if prediction and entry.get("speedup"):
        entry["k_prediction"] = {k: prediction[k] for k in ("from_k", "recommended_k", "recommended_tps",
                                                             "mean_abs_error_pct", "compared")}
    row = next((r for r in results.rows_of(target) if r.draft == rec and r.concurrency == 1
                and r.draft_max == entry.get("draft_max") and r.role == "speculative"), None) if rec else None
    advice = k_advice.advise(row, results.results) if row is not None and entry.get("speedup") else None
    if advice is not None and advice.k is not None and advice.k != (row.draft_max if row else None):
        entry["verdict"] += f" {rec}'s {advice.text}."     # the row's own statement about k
