"""One story about the draft length k: the one place that decides what a row's diagnosis says about k.

Four sources know something about k, and they used to speak separately (and contradict each other):
the k values measured (a ``draft_max`` list), the prediction from one run's per-position counts and
timings (:mod:`best_k`), where acceptance falls off by position (:mod:`positions`), and the
textbook model (:mod:`draftbench.results.theory`, which takes verifying as free). Here they feed
one statement per row, strongest evidence first, the rest named as evidence:

* measured k values decide when there are two or more;
* else the one-run prediction;
* else the per-position counts (a smaller k does as well when late positions are rarely reached; a
  larger k may pay when even the last one mostly is);
* else the textbook model, said to be only that.

k is the length of a *draft model's* drafts: an n-gram method's proposals are as long as its own
n-gram settings allow, so model-free rows get no advice about k. A hybrid's k is its draft's: its
per-position counts mix the draft's tokens with the n-gram method's, so the advice names the draft
and rests on that draft measured alone, where it was.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ...results.file import Row
from ...results.findings import Code, Finding
from . import best_k
from .evidence import too_little
from .positions import EARLY_REJECTION_BELOW, diagnose, drafted_positions, first_in_vain, reach

K_SETTING = "draft_max (settings.draft_max, or the candidate's params.draft_max)"


@dataclass(frozen=True)
class Advice:
    """One statement about k and the k it advises (None: keep it, or nothing to advise)."""

    text: str
    k: int | None = None


def kind(row: Row) -> str:
    """``draft`` (a draft model alone), ``hybrid`` (a draft model and an n-gram method) or ``model-free``."""
    if row.draft_path is None:
        return "model-free"
    return "draft" if best_k.drafts_greedily(row) else "hybrid"


def _measured(rows: Iterable[Row], like: Row, *, same_candidate: bool) -> dict[int, float]:
    """k → tok/s of the rows measured with the same target and draft model (the same candidate, or the
    draft model alone), one stream."""
    out: dict[int, float] = {}
    for r in rows:
        if (r.target != like.target or r.concurrency != 1 or not r.counts_as_speedup() or r.draft_max is None
                or not r.mean_tps):
            continue
        if (r.draft == like.draft) if same_candidate else (r.draft_path == like.draft_path and kind(r) == "draft"):
            out[r.draft_max] = r.mean_tps
    return out


def _measured_text(measured: dict[int, float]) -> tuple[int, str]:
    best = max(measured, key=lambda k: measured[k])
    others = ", ".join(f"{best_k.tok_s(v)} at k={k}" for k, v in sorted(measured.items()) if k != best)
    return best, f"k={best} ran fastest of the k measured: {best_k.tok_s(measured[best])}, against {others}"


def _theory_text(row: Row) -> str | None:
    t = row.theory
    if t is None or t.best_k is None or t.predicted_at_best_k is None:
        return None
    return (f"the textbook model, which takes verifying as free, says k={t.best_k} → {t.predicted_at_best_k:.2f}×"
            + (", but verifying is not free on this hardware" if t.measured_speedup is not None and t.predicted_speedup
               and t.measured_speedup < 0.8 * t.predicted_speedup else ""))


def advise(row: Row, rows: Iterable[Row]) -> Advice | None:
    """What to do about k for this row, with its evidence, in one sentence; None where k is not a
    draft length (model-free methods) or nothing is known."""
    rows = list(rows)
    what = kind(row)
    if what == "model-free":
        return None
    if what == "hybrid":
        draft = (row.candidate or {}).get("draft") or row.draft_path
        alone = _measured(rows, row, same_candidate=False)
        k_now = f" (k={row.draft_max} here)" if row.draft_max else ""
        if len(alone) >= 2:
            best, text = _measured_text(alone)
            return Advice(f"draft length: k is its draft {draft}'s{k_now}: {draft} alone, {text}", best)
        return Advice(f"draft length: k is its draft {draft}'s{k_now}; the per-position counts mix {draft}'s tokens "
                      f"with the n-gram method's, so they cannot tell its best k — measure {draft} alone at several k "
                      "(draft_max: [2, 4, 8])")
    evidence: list[str] = []
    measured = _measured(rows, row, same_candidate=True)
    # a prediction from too few drafts is no evidence (evidence.py); measured k are, however few their drafts
    prediction = row.k_prediction if too_little(row) is None else None
    k: int | None = None
    if len(measured) >= 2:
        k, head = _measured_text(measured)
        if prediction:
            evidence.append(f"predicted from k={prediction['from_k']}: " + _prediction_text(prediction))
    elif prediction:
        k, head = prediction.get("recommended_k"), _prediction_text(prediction)
    elif row.accepted_per_pos and row.verify_steps:
        if too_little(row) is not None:
            return None     # too few drafts to read the positions (the diagnosis says so)
        shares = reach(drafted_positions(row.accepted_per_pos, row.draft_max), row.verify_steps)
        kept = first_in_vain(shares)
        if shares[0] < EARLY_REJECTION_BELOW:
            return None     # the draft is wrong from its first token: its k is not the question
        if kept < len(shares) or (row.draft_max and len(shares) < row.draft_max):
            smaller = max(1, min(kept, len(shares)))
            k, head = smaller, f"a smaller k (k={smaller}) should do as well for less drafting"
        else:
            head = "a larger k may pay (even the last position is mostly accepted)"
    else:
        theory = _theory_text(row)
        return Advice(f"draft length: {theory}; not measured here") if theory else None
    theory = _theory_text(row)
    if theory:
        evidence.append(theory)
    return Advice(f"draft length: {head}" + (f" ({'; '.join(evidence)})" if evidence else ""), k)


def _prediction_text(prediction: dict) -> str:
    if prediction.get("recommended_k") is None:
        return "no k is predicted to beat the target alone, from this run's per-position counts and timings"
    speedup = prediction["recommended_tps"] / prediction["baseline_tps"] - 1 if prediction.get("baseline_tps") else 0.0
    return (f"k={prediction['recommended_k']} predicted fastest from this run, "
            f"{best_k.tok_s(prediction['recommended_tps'])} or {speedup:+.0%} vs the target alone")


def diagnosis(row: Row, rows: Iterable[Row]) -> Finding | None:
    """The row's one-line diagnosis: where its tokens are rejected, then what that and everything else
    known says about k (one statement; see the module's docstring)."""
    what = kind(row)
    pattern = diagnose(row.accepted_per_pos, row.verify_steps, model_free=what == "model-free",
                       k=row.draft_max if what == "draft" else None,
                       too_few=too_little(row) if row.accepted_per_pos and row.verify_steps else None)
    advice = advise(row, rows)
    about_k = advice.text if advice else None
    if pattern is None and about_k is None:
        return None
    if pattern is None:
        return Finding(Code.DRAFT_LENGTH, about_k[0].upper() + about_k[1:], K_SETTING) if about_k else None
    if about_k is None or pattern.code in (Code.EARLY_REJECTIONS, Code.TOO_FEW_DRAFTS):
        return pattern
    return Finding(pattern.code, f"{pattern.message}; {about_k}", K_SETTING)
