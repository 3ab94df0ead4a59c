"""Per prompt category: speed-ups against the baseline, and the best configuration for each category.

Methods differ most by workload: an n-gram method can double the speed of a code edit (the answer
repeats the prompt) and do nothing for a story, while a draft model helps both a little. So every
row's requests are also compared with the baseline's per category (``analysis/comparison.py``), and the verdict names the best
configuration per category when they differ ("for code-edit: ngram-mod; for chat: 135M (k=4)").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..results.file import ResultsFile, Row
from ..results.speedup import Speedup, rank
from .before_stages.rule import simultaneous_bounds
from .degenerate import looping_requests
from .session import category_label
from .stats import TOO_FEW, describe_subset, too_few_to_tell


@dataclass(frozen=True)
class CategoryBest:
    """The best measured configuration on one prompt category; ``candidate`` None when nothing beat the target
    alone there (``too_few``: too few requests to name one)."""

    candidate: str | None
    looping: bool                          # the target's own output loops on this category
    draft: str | None = None
    draft_max: int | None = None
    speedup: Speedup | None = None
    significant_gain: bool = False
    too_few: bool = False

    def to_dict(self) -> dict[str, Any]:
        if self.too_few:
            return {"candidate": None, "too_few": True, "looping": self.looping}
        if self.candidate is None:
            return {"candidate": None, "looping": self.looping}
        return {"candidate": self.candidate, "draft": self.draft, "draft_max": self.draft_max,
                "speedup": self.speedup.to_dict() if self.speedup else None,
                "significant_gain": self.significant_gain, "looping": self.looping}


def never_drafted(row: Row, category: str) -> bool:
    """True when the server said the row drafted no token on any of the category's requests: its
    difference from the baseline there is noise, not speculation (an n-gram method on a story)."""
    counts = [r.draft_n for r in row.requests if r.category == category and r.error is None]
    return bool(counts) and all(n == 0 for n in counts)


def candidate_name(row: Row) -> str:
    """How the verdict names a configuration: its label, with k when one is recorded."""
    return (row.draft or "") + (f" (k={row.draft_max})" if row.draft_max else "")


def best_per_category(results: ResultsFile, target: str) -> dict[str, CategoryBest]:
    """category → the best measured configuration on it (its ``candidate`` None when nothing beat the target
    alone there).
    Only rows that count as speed-ups take part, and on a category only rows that drafted there;
    significant gains rank first."""
    baseline = results.baseline_for(target)
    rows = [r for r in results.rows_of(target) if r.counts_as_speedup() and r.speedup_by_category]
    if baseline is None or not rows:
        return {}
    loops = {pid for pid, _run in looping_requests(baseline)}
    looping_categories = {r.category for r in baseline.requests if r.prompt_id in loops}
    out: dict[str, CategoryBest] = {}
    categories = dict.fromkeys(c for r in rows for c in (r.speedup_by_category or {}))
    # a claim per category is one of categories × candidates: each is judged at 1 − 0.05 / (K·C), both sides
    comparisons = max(1, len(categories) * len(rows))
    floor = results.read_settings().noise_floor
    for category in categories:
        scored = [(r, (r.speedup_by_category or {})[category]) for r in rows
                  if category in (r.speedup_by_category or {}) and not never_drafted(r, category)]
        if scored and all(too_few_to_tell(speed) for _, speed in scored):
            # two requests give an interval of [-96%, +7300%]: nothing to name as best there
            out[category] = CategoryBest(None, category in looping_categories, too_few=True)
            continue
        scored = [(r, speed) for r, speed in scored if not too_few_to_tell(speed)]
        gains = [(r, s) for r, s in scored if s.ratio > 1]
        significant = [(r, s) for r, s in gains if s.significant and _clears(s, comparisons, floor)]
        pool = significant or gains
        if not pool:
            out[category] = CategoryBest(None, category in looping_categories)
            continue
        best, speed = max(pool, key=lambda rs: rank(rs[1]))
        out[category] = CategoryBest(candidate_name(best), category in looping_categories, best.draft,
                                     best.draft_max, speed, bool(significant))
    return out


def _clears(speed: Speedup, comparisons: int, floor: float) -> bool:
    """The speed-up's lower bound at 1 − 0.05 / ``comparisons`` (both sides) clears 1 + floor."""
    bounds = simultaneous_bounds(speed, comparisons)
    return bounds is not None and bounds[0] > 1.0 + floor


def category_sentence(best: dict[str, CategoryBest]) -> str:
    """'Best per prompt type: for code-edit: ngram-mod (+45.0% […]); for chat: 135M (k=4) (…).' when the
    categories' best configurations differ; '' when one configuration is best everywhere."""
    names = {choice.candidate for choice in best.values() if not choice.too_few}
    if len(best) < 2 or len(names) < 2:
        return ""
    parts = []
    for category, choice in best.items():
        if choice.too_few:
            text = TOO_FEW
        elif choice.candidate is None:
            text = "nothing beats the target alone"
        else:
            text = f"{choice.candidate} ({describe_subset(choice.speedup)})"
        if choice.looping:
            text += " [the target's output loops here]"
        parts.append(f"for {category_label(category)}: {text}")
    if not any(choice.significant_gain for choice in best.values()):
        # Noise can differ by category too: say that no per-category gain was shown to be real.
        return ("Best measured per prompt type (exploratory: no gain shown once corrected for the categories × "
                "candidates compared): " + "; ".join(parts) + ".")
    return ("Best per prompt type (a gain is named only where it holds at 95% over the categories × candidates "
            "compared; the rest are exploratory): " + "; ".join(parts) + ".")
