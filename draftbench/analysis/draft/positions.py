"""Acceptance by draft position: where a draft's tokens are rejected.

llama-server and vLLM count, for every draft position i (0 = the first drafted token), how many
verify steps accepted the token at i. Accepting position i needs every position before it, so
the counts never grow with i, and over a row

    reach(i)                = accepted_at(i) / verify steps   (share of steps that accept position i)
    Σ_i accepted_at(i)      = accepted draft tokens
    mean accepted length    = 1 + accepted / verify steps     (llama-server's "mean len": the
                                                               target's own token plus the accepted drafts)

Early rejections (position 0 rarely accepted) point at a mismatch between draft and target —
tokenizer or chat template —; late ones at a draft that loses the thread. What that means for the
draft length k is said in one place, :mod:`k_advice`, with the other evidence about k.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ...results.file import RequestRecord
from ...results.findings import Code, Finding

# Position 0 accepted on fewer than this share of steps: the draft is wrong from its first token.
EARLY_REJECTION_BELOW = 0.4
# Positions accepted on fewer than this share of steps are drafted mostly in vain.
WORTH_DRAFTING_FROM = 0.25
# Fewer verified drafts than this tell nothing about where drafts fail (:mod:`evidence` uses it too).
MIN_DRAFTS = 20


def row_positions(records: Iterable[RequestRecord]) -> tuple[list[int] | None, list[Finding]]:
    """Σ accepted tokens by draft position over a row's successful requests, and any finding about
    the counts. None when the server does not report them, or did not for a request that drafted
    (a partial sum would understate every position)."""
    ok = [r for r in records if r.error is None]
    vectors: list[list[int]] = []
    for r in ok:
        if r.accepted_per_pos is None:
            if r.draft_n:
                return None, []
            continue
        vectors.append([int(v) for v in r.accepted_per_pos])
    if not vectors:
        return None, []
    mismatched = [r for r in ok if r.accepted_per_pos is not None and r.draft_n_accepted is not None
                  and sum(r.accepted_per_pos) != r.draft_n_accepted]
    if mismatched:
        r = mismatched[0]
        return None, [Finding(Code.PER_POSITION_MISMATCH, f"the server's per-position counts do not add up to its "
                              f"accepted total on {len(mismatched)} request(s) (e.g. {r.prompt_id}: "
                              f"{sum(r.accepted_per_pos or [])} vs {r.draft_n_accepted}): another client may have "
                              "used the server meanwhile; acceptance by position is not shown for this row")]
    length = max(len(v) for v in vectors)
    return [sum(v[i] for v in vectors if i < len(v)) for i in range(length)], []


def reach(per_pos: Sequence[int], steps: int) -> list[float]:
    """Share of verify steps that accepted each position (non-increasing, each in [0, 1])."""
    return [a / steps for a in per_pos] if steps else []


def drafted_positions(per_pos: Sequence[int], k: int | None = None) -> list[int]:
    """The counts of the positions known to have been drafted: up to the last one at which any token was
    accepted. llama-server exports every position up to the method's maximum (``ngram-mod``'s n-max 64)
    whether or not a draft ever reached it, so a trailing 0 may be a position never drafted; nothing is
    said about those (but every draft has a first position). ``k`` (the draft length, where known) bounds
    them too."""
    counts = list(per_pos[:k] if k else per_pos)
    last = max((i for i, accepted in enumerate(counts) if accepted), default=0)
    return counts[:last + 1]


def diagnose(per_pos: Sequence[int] | None, steps: int | None, *, model_free: bool = False,
             k: int | None = None, too_few: str | None = None) -> Finding | None:
    """Where a row's drafted tokens are rejected, in one line of facts (no advice about k: what to do
    about the draft length is decided in one place, :mod:`k_advice`, from every source at once); None
    without per-position counts. ``model_free``: n-gram proposals, which share no tokenizer to check;
    ``k``: the draft length where known; ``too_few``: why the row's drafts are too few to tell
    (:func:`evidence.too_little`), said instead of a diagnosis."""
    if not per_pos or not steps:
        return None
    if too_few is None and steps < MIN_DRAFTS:
        too_few = f"only {steps} drafts were verified (at least {MIN_DRAFTS} are needed to tell)"
    if too_few is not None:
        return Finding(Code.TOO_FEW_DRAFTS, f"too few drafts to tell where they are rejected: {too_few}")
    shares = reach(per_pos, steps)
    if shares[0] < EARLY_REJECTION_BELOW:
        if model_free:
            return Finding(Code.EARLY_REJECTIONS, f"its proposals are mostly rejected: only {shares[0]:.0%} of verify "
                           "steps accept even the first proposed token")
        return Finding(Code.EARLY_REJECTIONS, f"rejections are early: only {shares[0]:.0%} of verify steps accept "
                       "even the first drafted token — check that draft and target share the tokenizer and chat "
                       "template (same model family and version)")
    drafted = reach(drafted_positions(per_pos, k), steps)
    n = len(drafted)
    never = f"; no token past position {n} was ever accepted (k={k})" if k and n < k else ""
    kept = first_in_vain(drafted)
    if kept < n:
        return Finding(Code.ACCEPTANCE_DECAYS, f"acceptance decays after position {kept}: only {drafted[kept]:.0%} of "
                       f"verify steps get to position {kept + 1} (tokens were accepted up to position {n}){never}")
    if never:
        return Finding(Code.ACCEPTANCE_DECAYS, f"acceptance holds to position {n}: {drafted[-1]:.0%} of verify steps "
                       f"get there{never}")
    if k:
        return Finding(Code.ACCEPTANCE_HOLDS, f"acceptance holds to the last position: {drafted[-1]:.0%} of verify "
                       f"steps accept all {n} drafted tokens")
    return Finding(Code.ACCEPTANCE_HOLDS, f"acceptance holds to the furthest position reached: {drafted[-1]:.0%} of "
                   f"verify steps get to position {n}, the last at which any token was accepted")


def first_in_vain(shares: Sequence[float]) -> int:
    """The first position accepted on fewer than :data:`WORTH_DRAFTING_FROM` of the steps (len: none)."""
    return next((i for i, share in enumerate(shares) if share < WORTH_DRAFTING_FROM), len(shares))
