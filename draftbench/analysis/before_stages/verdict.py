"""The verdict's opening for a target not measured in stages: the rule its file was measured under
(:mod:`.rule`: a confirmation on fresh requests, or simultaneous bounds; upstream's files without intervals;
the servers of ``bench.py --url``, each a measurement and not a verdict)."""

from __future__ import annotations

from ...common.percent import percent
from ...results.file import ResultsFile, Row
from ...results.kinds import Role, Status
from ...results.speedup import rank
from .. import stats
from ..choice import Choice
from ..draft.evidence import why_slower
from ..session import no_fresh_sentence, session_summary
from . import rule


def before_stages(results: ResultsFile, target: str, at_level: list[Row], baseline: Row,
                  floor: float) -> tuple[Choice, str]:
    """A target not measured in stages (a file measured in blocks with a confirmation, upstream's, or bench.py
    --url's servers): what the rule it was measured under chose, and the verdict's opening sentence."""
    candidates = [r for r in at_level if r.counts_as_speedup() and r.speedup]
    raced = [r for r in at_level if r.role is Role.SPECULATIVE and r.race]
    winners = rule.winners(candidates, raced, floor)
    if winners:
        return _winner(winners[0], baseline, len(candidates))
    if candidates:
        return _none_recommended(results, target, candidates)
    if eliminated := [r for r in results.rows_of(target) if r.status is Status.ELIMINATED and r.speedup]:
        best = max(eliminated, key=lambda r: rank(r.speedup))
        return (Choice(), f"{target}: speculative decoding not recommended — the adaptive search eliminated "
                         f"every candidate (best probe: {best.draft}, {stats.describe_speedup(best.speedup)}).")
    if session_summary(results, target, baseline.concurrency) is not None:
        return (Choice(), no_fresh_sentence(target))
    # bench.py --url: each server it measured is a row of its own, by design (its A/B, --target, has candidates)
    if results.made_by == "bench.py" and not any(r.role is Role.SPECULATIVE for r in results.results):
        speed = f"{baseline.mean_tps:.1f} tok/s, " if baseline.mean_tps else ""
        return (Choice(), f"{target}: {speed}one server measured by bench.py — a measurement, not a verdict: no "
                         "candidate was compared with the target alone in this file (bench.py --target, or a "
                         "sweep, does that).")
    return (Choice(), f"{target}: speculative decoding not recommended — no draft produced a valid measurement.")


def _winner(best: Row, baseline: Row, n_candidates: int) -> tuple[Choice, str]:
    label = (best.draft or best.target) + (f" (k={best.draft_max})" if best.draft_max else "")
    quoted = best.confirmed or best.speedup
    sentence = (f"{best.target}: use {label} — expect {stats.describe_speedup(quoted)} "
                f"({baseline.mean_tps:.1f} → {best.mean_tps:.1f} tok/s, "
                f"{percent(best.acceptance_rate)} of drafted tokens accepted)"
                + (rule.confirmed_text(best, n_candidates) if best.confirmed else
                   rule.at_least_text(best, n_candidates)) + ".")
    if best.degenerate_output:
        sentence += (f" Caution: the target's own output loops on "
                     f"{best.degenerate_output['looping_requests']} of "
                     f"{best.degenerate_output['requests']} requests, which flatters this "
                     "speed-up (see the row's warning).")
    return (Choice(best.draft, best.draft_max, quoted, best.acceptance_rate), sentence)


def _none_recommended(results: ResultsFile, target: str, candidates: list[Row]) -> tuple[Choice, str]:
    best = max(candidates, key=lambda r: rank(r.speedup))
    if results.is_upstream or (best.speedup is not None and best.speedup.significant is None):
        why = ("this file has no per-request data" if results.is_upstream or not best.requests else
               "too few requests were measured for a confidence interval")
        return (Choice(best.draft, None, best.speedup, best.acceptance_rate),
            f"{target}: best measured draft is {best.draft} ({stats.describe_speedup(best.speedup)}); "
            f"{why}, so significance cannot be judged.")
    sentence = (f"{target}: speculative decoding not recommended — no draft was significantly faster than "
                f"the baseline (best: {best.draft}, {stats.describe_speedup(best.speedup)}).")
    confirming = rule.confirmed_row(candidates)
    if confirming is not None:
        sentence += rule.not_confirmed_text(confirming)
    return (Choice(), sentence + why_slower(best))     # only where its drafting can carry the reason
