"""How much drafting a row's statements about its drafts rest on: say nothing a few drafts cannot tell.

A row that drafted 20 tokens in 2 of 288 decoding steps has "100% acceptance", and nothing about it
is known: not that its drafts are good, not where they fail, not that verifying them is what made it
slower. Every diagnosis of a row's drafts (acceptance by position, the k advice, "mostly accepted …
compute-bound") first asks :func:`too_little`; where the drafts are too few it says so, and why,
instead of reading the rate.

A *decoding step* is one forward pass of the target over the answer: each yields one token of its
own plus the draft tokens it accepted, so a row's steps are its generated tokens minus its accepted
ones. A *draft* is a verify step that checked drafted tokens (llama-server's ``num_drafts``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...common.percent import percent
from ...results.file import Row
from .positions import MIN_DRAFTS

MIN_DRAFTED_TOKENS = 50      # drafted tokens: an acceptance rate of fewer is a handful of coin flips
# Verifying explains a slowdown only where drafting happened on a fair share of the decoding steps
# (a method that drafted on 2 of 288 steps spent its time decoding like the target alone).
MIN_DRAFTING_SHARE = 0.25
MOSTLY_ACCEPTED = 0.5


@dataclass(frozen=True)
class Drafting:
    """A row's drafting, as its counters say it (None: not reported)."""

    drafts: int | None           # verify steps that checked drafted tokens
    drafted: int | None          # drafted tokens
    accepted: int | None         # accepted drafted tokens
    decoding_steps: int | None   # the target's forward passes over the answers (generated − accepted)

    @classmethod
    def of(cls, row: Row) -> Drafting:
        generated = [r.completion_tokens for r in row.requests if r.error is None]
        steps = None
        if generated and all(g is not None for g in generated) and row.draft_n_accepted is not None:
            steps = max(0, sum(g or 0 for g in generated) - row.draft_n_accepted)
        return cls(row.verify_steps, row.draft_n, row.draft_n_accepted, steps)

    @property
    def share(self) -> float | None:
        """Share of the decoding steps that checked a draft."""
        if self.drafts is None or not self.decoding_steps:
            return None
        return min(1.0, self.drafts / self.decoding_steps)

    def describe(self) -> str:
        """'20 tokens in 2 of 288 decoding steps' (as much of it as was reported)."""
        text = f"{self.drafted} token{'s' if self.drafted != 1 else ''}"
        if self.drafts is not None:
            text += f" in {self.drafts} draft{'s' if self.drafts != 1 else ''}"
            if self.decoding_steps:
                text += f" over {self.decoding_steps} decoding steps"
        return text

    def too_little(self) -> str | None:
        """Why these drafts are too few to say anything about them ('it drafted only …'); None when enough."""
        if self.drafted is None:
            return "the server reported no draft counters"
        if self.drafted < MIN_DRAFTED_TOKENS or (self.drafts is not None and self.drafts < MIN_DRAFTS):
            return (f"it drafted only {self.describe()} (at least {MIN_DRAFTED_TOKENS} tokens in {MIN_DRAFTS} "
                    "drafts are needed to tell)")
        return None


def too_little(row: Row) -> str | None:
    """Why ``row``'s drafts are too few for a diagnosis; None when there are enough."""
    return Drafting.of(row).too_little()


def why_slower(row: Row) -> str:
    """One sentence (with its leading space) explaining a *significant* slowdown by its drafts being
    mostly accepted — verifying them is what costs, the target is compute-bound — only where the row's
    drafting can carry that; where it cannot, why not. '' where there is nothing to explain (not
    significantly slower, or its drafts mostly rejected: that is said elsewhere)."""
    s = row.speedup
    rate = row.acceptance_rate
    if s is None or s.significant is not True or s.ratio >= 1 or rate is None or rate < MOSTLY_ACCEPTED:
        return ""
    drafting = Drafting.of(row)
    few = drafting.too_little()
    if few is not None:
        return (f" Its acceptance ({percent(rate)}) says nothing about why it is slower: {few}.")
    share = drafting.share
    if share is not None and share < MIN_DRAFTING_SHARE:
        return (f" Its drafts were mostly accepted ({percent(rate)}), but it drafted on only {share:.0%} of the "
                "decoding steps, so verifying them cannot explain the slowdown (the method's own cost per step, or "
                "the machine's load, may).")
    return (f" Its drafts were mostly accepted ({percent(rate)}), so the time goes into verifying them: the target "
            "is likely compute-bound on this hardware (typical of CPUs), where a verify step costs nearly as much "
            "per token as generating. The same pair may pay on a GPU.")
