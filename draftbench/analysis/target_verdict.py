"""Per target, the verdict: what to run, the figure to expect and what it is for (a :class:`TargetVerdict`).

A target measured in stages is decided by the staged rule (``stage_records`` → ``stage_verdict``: the
sweep's own decision, replayed from the file); a file measured before stages (blocks and a confirmation,
or upstream's sequence) keeps the rule it was measured under (:mod:`decision`). Either ends in a
:class:`Choice` and a sentence. Whatever decided, the verdict gets the same parts: drafts that rarely predict
the target, the control baseline's drift, speculation that never ran, the best per prompt type, the ceiling
and k advice, the session workload, the command that runs it, and, with several concurrency levels, the
crossover. The parts are computed first, then the verdict is built once; its sentence is the rule's, then
each part's, in that order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..common.percent import percent
from ..results.file import ResultsFile, Row
from ..results.kinds import Role, Status
from ..results.speedup import Speedup, interval_ends, rank
from . import decision, stats
from .categories import best_per_category, category_sentence
from .choice import BestPick, Choice
from .concurrency import primary_level, row_levels
from .crossover import crossover
from .draft import best_k as kpredict
from .draft import ceiling, k_advice
from .draft.evidence import why_slower
from .race_outcome import race_outcome
from .session import no_fresh_sentence, session_sentence, session_summary
from .stage_records import TargetStages
from .stage_verdict import StagedVerdict, Verdict, staged_verdict
from .summary import KPrediction, TargetVerdict
from .winning_command import how_to_run, runs_by_category


@dataclass(frozen=True)
class Decided:
    """What a target's rule decided: its choice, the sentence it starts the verdict with, the staged decision."""

    choice: Choice
    sentence: str
    stages: StagedVerdict | None = None


def recommend(results: ResultsFile, staged: dict[str, TargetStages]) -> tuple[TargetVerdict, ...]:
    """One verdict per target (``staged``: the targets measured in stages)."""
    targets = list(dict.fromkeys(r.target for r in results.results if r.role in (Role.BASELINE, Role.SPECULATIVE)))
    floor = results.read_settings().noise_floor
    out = []
    for target in targets:
        level = primary_level(results, target)
        decided = _decided(results, target, level, staged.get(target) if level == 1 else None, floor)
        out.append(_verdict(results, target, level, decided))
    return tuple(out)


def _decided(results: ResultsFile, target: str, level: int, stages: TargetStages | None, floor: float) -> Decided:
    baseline = results.baseline_for(target, level)
    if baseline is None:
        return Decided(Choice(), f"{target}: no baseline was measured, so no draft can be judged.")
    if stages is not None:        # the rows as analysed (their counters' bound)
        stages = replace(stages, rows={n: results.row(r.key) or r for n, r in stages.rows.items()})
        return _staged(staged_verdict(stages), stages, baseline)
    at_level = [r for r in results.rows_of(target) if r.concurrency == level]
    return _legacy(results, target, at_level, baseline, floor)


# --------------------------------------------------------------------------- measured in stages

def quote_speedup(verdict: StagedVerdict, noise_floor: float) -> Speedup | None:
    """The verdict's quote as a speed-up (its interval: 95% over every candidate and look together)."""
    q = verdict.quote
    if q is None:
        return None
    gains = verdict.verdict in (Verdict.RECOMMEND, Verdict.SHORTLIST) and q.low > 1 + noise_floor
    return Speedup(ratio=round(q.ratio, 4), **interval_ends(q.low, q.high),
                   significant=bool(gains or q.high < 1 / (1 + noise_floor)),
                   method="staged", percent=round((q.ratio - 1) * 100, 2), noise_floor=noise_floor,
                   question=q.question, interval=q.what())


def _staged(verdict: StagedVerdict, stages: TargetStages, baseline: Row) -> Decided:
    row = stages.rows.get(verdict.pick) if verdict.pick else None
    best_row = stages.rows.get(verdict.best) if verdict.best else None
    speed = quote_speedup(verdict, stages.rule.noise_floor)
    best = BestPick(verdict.best, best_row.draft if best_row else None, best_row.draft_max if best_row else None,
                    speed, verdict.verdict.value)
    choice = (Choice(row.draft, row.draft_max, speed, row.acceptance_rate, best) if row is not None
              else Choice(speedup=speed, best=best))
    return Decided(choice, verdict.sentence(baseline.mean_tps, row), verdict)


# --------------------------------------------------------------------------- measured before stages

def _legacy(results: ResultsFile, target: str, at_level: list[Row], baseline: Row, floor: float) -> Decided:
    """Files measured in blocks with a confirmation, or upstream's: the rule they were measured under."""
    candidates = [r for r in at_level if r.counts_as_speedup() and r.speedup]
    raced = [r for r in at_level if r.role is Role.SPECULATIVE and r.race]
    winners = decision.winners(candidates, raced, floor)
    if winners:
        return _legacy_winner(winners[0], baseline, len(candidates))
    if candidates:
        return _legacy_none(results, target, candidates)
    if eliminated := [r for r in results.rows_of(target) if r.status is Status.ELIMINATED and r.speedup]:
        best = max(eliminated, key=lambda r: rank(r.speedup))
        return Decided(Choice(), f"{target}: speculative decoding not recommended — the adaptive search eliminated "
                                 f"every candidate (best probe: {best.draft}, {stats.describe_speedup(best.speedup)}).")
    if session_summary(results, target, baseline.concurrency) is not None:
        return Decided(Choice(), no_fresh_sentence(target))
    # bench.py --url: each server it measured is a row of its own, by design (its A/B, --target, has candidates)
    if results.made_by == "bench.py" and not any(r.role is Role.SPECULATIVE for r in results.results):
        speed = f"{baseline.mean_tps:.1f} tok/s, " if baseline.mean_tps else ""
        return Decided(Choice(), f"{target}: {speed}one server measured by bench.py — a measurement, not a verdict: no "
                                 "candidate was compared with the target alone in this file (bench.py --target, or a "
                                 "sweep, does that).")
    return Decided(Choice(), f"{target}: speculative decoding not recommended — no draft produced a valid measurement.")


def _legacy_winner(best: Row, baseline: Row, n_candidates: int) -> Decided:
    label = (best.draft or best.target) + (f" (k={best.draft_max})" if best.draft_max else "")
    quoted = best.confirmed or best.speedup
    sentence = (f"{best.target}: use {label} — expect {stats.describe_speedup(quoted)} "
                f"({baseline.mean_tps:.1f} → {best.mean_tps:.1f} tok/s, "
                f"{percent(best.acceptance_rate)} of drafted tokens accepted)"
                + (decision.confirmed_text(best, n_candidates) if best.confirmed else
                   decision.at_least_text(best, n_candidates)) + ".")
    if best.degenerate_output:
        sentence += (f" Caution: the target's own output loops on "
                     f"{best.degenerate_output['looping_requests']} of "
                     f"{best.degenerate_output['requests']} requests, which flatters this "
                     "speed-up (see the row's warning).")
    return Decided(Choice(best.draft, best.draft_max, quoted, best.acceptance_rate), sentence)


def _legacy_none(results: ResultsFile, target: str, candidates: list[Row]) -> Decided:
    best = max(candidates, key=lambda r: rank(r.speedup))
    if results.is_upstream or (best.speedup is not None and best.speedup.significant is None):
        why = ("this file has no per-request data" if results.is_upstream or not best.requests else
               "too few requests were measured for a confidence interval")
        return Decided(Choice(best.draft, None, best.speedup, best.acceptance_rate),
                       f"{target}: best measured draft is {best.draft} ({stats.describe_speedup(best.speedup)}); "
                       f"{why}, so significance cannot be judged.")
    sentence = (f"{target}: speculative decoding not recommended — no draft was significantly faster than "
                f"the baseline (best: {best.draft}, {stats.describe_speedup(best.speedup)}).")
    confirming = decision.confirmed_row(candidates)
    if confirming is not None:
        sentence += decision.not_confirmed_text(confirming)
    return Decided(Choice(), sentence + why_slower(best))     # only where its drafting can carry the reason


# --------------------------------------------------------------------------- what every verdict adds

def _verdict(results: ResultsFile, target: str, level: int, decided: Decided) -> TargetVerdict:
    """The verdict of ``decided`` with every part, built once; its sentence: the rule's, then each part's."""
    choice, at_level = decided.choice, [r for r in results.rows_of(target) if r.concurrency == level]
    inactive = tuple(r.draft or "" for r in at_level
                     if r.role is Role.SPECULATIVE and r.ok and r.speculation_active is False)
    by_category = best_per_category(results, target) if not results.is_upstream else {}
    cannot_pay, k_prediction, k_text = _inside_the_draft(results, target, choice)
    in_session = session_summary(results, target, level)
    sentences = [decided.sentence, *_warnings(at_level, inactive), category_sentence(by_category), cannot_pay or "",
                 k_text, session_sentence(in_session) if in_session is not None else ""]
    several_levels = len(row_levels(results, target)) > 1
    crossed, crossing = crossover(results, target, choice) if several_levels else (None, "")
    verdict = " ".join(s for s in sentences if s)
    baseline = results.baseline_for(target, level)
    return TargetVerdict(
        target, f"{verdict} {crossing}".strip() if several_levels else verdict, choice,
        baseline_tps=baseline.mean_tps if baseline else None,
        inactive_drafts=inactive, stages=decided.stages, by_category=by_category,
        no_draft_can_pay=cannot_pay is not None, k_prediction=k_prediction, within_session=in_session,
        run=how_to_run(results, target, level, choice), run_by_category=runs_by_category(by_category, results, target),
        race=race_outcome(results, target, choice) if decided.stages is None else None,   # a race of the blocks era
        crossover=crossed)


def _warnings(at_level: list[Row], inactive: tuple[str, ...]) -> list[str]:
    """Drafts that rarely predict the target, the control baseline's drift, speculation that never ran."""
    out = []
    candidates = [r for r in at_level if r.counts_as_speedup() and r.speedup]
    useless = [r.draft or "" for r in candidates if r.acceptance_rate is not None and r.acceptance_rate < 0.1]
    if useless:
        out.append("Drafts that rarely predict this target (under 10% accepted): "
                   f"{', '.join(dict.fromkeys(useless))}.")
    control = next((r for r in at_level if r.role is Role.CONTROL and r.speedup), None)
    if control and control.speedup and control.speedup.significant:
        out.append(f"Warning: the baseline measured again differed by {stats.describe_speedup(control.speedup)} — the "
                   "machine drifted during the sweep, so gains smaller than that are treated as noise; close other "
                   "programs and rerun.")
    if inactive:
        out.append(f"Speculation never ran with: {', '.join(inactive)}.")
    return out


def _inside_the_draft(results: ResultsFile, target: str, choice: Choice) -> tuple[str | None, KPrediction | None, str]:
    """The ceiling verdict (its sentence, or None), and the recommended draft's best k from one run with what the
    verdict says of k (see ceiling.py, best_k.py, k_advice.py)."""
    cannot_pay = ceiling.no_draft_can_pay(results.rows_of(target), target, results.read_settings().noise_floor)
    speed: Speedup | None = choice.speedup
    if speed and speed.significant and speed.ratio > 1:
        cannot_pay = None     # a real draft was measured faster: noise in a ceiling row must not deny it
    rec = choice.recommended_draft
    leading = {r.draft: r for r in kpredict.leading_rows(results.rows_of(target))}
    prediction = leading[rec].k_prediction if rec in leading else None
    k_prediction = KPrediction.from_row(prediction) if prediction and speed else None
    row = next((r for r in results.rows_of(target) if r.draft == rec and r.concurrency == 1
                and r.draft_max == choice.draft_max and r.role == "speculative"), None) if rec else None
    advice = k_advice.advise(row, results.results) if row is not None and speed else None
    k_text = ""
    if advice is not None and advice.k is not None and advice.k != (row.draft_max if row else None):
        k_text = f"{rec}'s {advice.text}."     # the row's own statement about k
    return cannot_pay, k_prediction, k_text
