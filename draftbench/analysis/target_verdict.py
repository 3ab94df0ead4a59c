"""Per target, the verdict: what to run, the figure to expect and what it is for (a :class:`TargetVerdict`).

A target measured in stages is decided by the staged rule (:mod:`decision`: the sweep's own decision, made
again on the file) and said by :mod:`stage_verdict`; a file measured before stages (blocks and a
confirmation, or upstream's sequence) keeps the rule it was measured under (:mod:`before_stages`). Either ends in a
:class:`Choice` and a sentence. Whatever decided, the verdict gets the same parts: drafts that rarely predict
the target, the control baseline's drift, speculation that never ran, the best per prompt type, the ceiling
and k advice, the session workload, the command that runs it, and, with several concurrency levels, the
crossover. The parts are computed first, then the verdict is built once; its sentence is the rule's, then
each part's, in that order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..results.file import ResultsFile, Row
from ..results.kinds import Role
from ..results.speedup import Speedup
from . import stats
from .before_stages.race import race_outcome
from .before_stages.verdict import before_stages
from .categories import best_per_category, category_sentence
from .choice import BestPick, Choice
from .concurrency import primary_level, row_levels
from .crossover import crossover
from .decision import Decision
from .draft import best_k as kpredict
from .draft import ceiling, k_advice
from .memory_cost import TargetMemory, cost_clause, target_memory, verdict_sentence
from .next_step import next_step
from .session import session_sentence, session_summary
from .stage_verdict import StagedVerdict, staged_verdict
from .summary import KPrediction, TargetVerdict
from .winning_command import how_to_run, runs_by_category


@dataclass(frozen=True)
class Decided:
    """What a target's rule decided: its choice, the sentence it starts the verdict with, the staged decision."""

    choice: Choice
    sentence: str
    stages: StagedVerdict | None = None
    loops: bool = False        # the best's figure rests on the target's looping output (its row's diagnosis)


def recommend(results: ResultsFile, staged: dict[str, Decision]) -> tuple[TargetVerdict, ...]:
    """One verdict per target (``staged``: the decisions of the targets measured in stages)."""
    targets = list(dict.fromkeys(r.target for r in results.results if r.role in (Role.BASELINE, Role.SPECULATIVE)))
    floor = results.read_settings().noise_floor
    out = []
    for target in targets:
        level = primary_level(results, target)
        memory = target_memory(results, target, level)
        decided = _decided(results, target, level, staged.get(target) if level == 1 else None, floor, memory)
        out.append(_verdict(results, target, level, decided, memory))
    return tuple(out)


def _decided(results: ResultsFile, target: str, level: int, decision: Decision | None, floor: float,
             memory: TargetMemory | None) -> Decided:
    baseline = results.baseline_for(target, level)
    if baseline is None:
        return Decided(Choice(), f"{target}: no baseline was measured, so no draft can be judged.")
    if decision is not None:
        verdict = staged_verdict(decision)
        return _staged(replace(verdict, memory=cost_clause(memory, verdict.pick)), decision, baseline, results)
    at_level = [r for r in results.rows_of(target) if r.concurrency == level]
    return Decided(*before_stages(results, target, at_level, baseline, floor))


def _staged(verdict: StagedVerdict, decision: Decision, baseline: Row, results: ResultsFile) -> Decided:
    rows = decision.evidence.rows

    def analysed(found: Row | None) -> Row | None:   # with its diagnosis (what its gain rests on), not as decided on
        return next((r for r in results.rows_of(found.target) if r.key == found.key), found) if found else None
    row = analysed(rows.get(verdict.pick) if verdict.pick else None)
    best_row = rows.get(verdict.best) if verdict.best else None
    shown = row or analysed(best_row)           # the pick's, else the best's figure so far
    speed = verdict.quote.speedup(decision.rule.noise_floor) if verdict.quote is not None else None
    best = BestPick(verdict.best, best_row.draft if best_row else None, best_row.draft_max if best_row else None,
                    speed, verdict.verdict.value)
    choice = (Choice(row.draft, row.draft_max, speed, row.acceptance_rate, best) if row is not None
              else Choice(speedup=speed, best=best))
    loops = shown is not None and "speedup_without_loops" in (shown.degenerate_output or {})
    return Decided(choice, verdict.sentence(baseline.mean_tps, shown), verdict, loops)


# --------------------------------------------------------------------------- what every verdict adds

def _verdict(results: ResultsFile, target: str, level: int, decided: Decided, memory: TargetMemory | None
             ) -> TargetVerdict:
    """The verdict of ``decided`` with every part, built once; its sentence: the rule's, then each part's."""
    choice, at_level = decided.choice, [r for r in results.rows_of(target) if r.concurrency == level]
    inactive = tuple(r.draft or "" for r in at_level
                     if r.role is Role.SPECULATIVE and r.ok and r.speculation_active is False)
    by_category = best_per_category(results, target) if not results.is_upstream else {}
    cannot_pay, k_prediction, k_text = _draft_parts(results, target, choice)
    in_session = session_summary(results, target, level)
    inline = decided.stages is not None and decided.stages.memory is not None
    sentences = [decided.sentence, verdict_sentence(memory, choice.recommended_label, inline), *_warnings(at_level, inactive),
                 category_sentence(by_category), cannot_pay or "",
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
        crossover=crossed, memory=memory, next_step=next_step(results, decided.stages, decided.loops))


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


def _draft_parts(results: ResultsFile, target: str, choice: Choice) -> tuple[str | None, KPrediction | None, str]:
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
