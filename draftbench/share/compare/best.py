"""Each file's own answer, side by side: per target, its baseline rate and the best candidate the
file's analysis found (speed-up over that file's own baseline).

This table needs no matching rows, so files that measured different targets (a 72B file next to
a 7B file, a fresh sweep of other models) still compare on what each one concluded.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...analysis.summary import verdicts_of
from ...results.speedup import Speedup
from .match import ComparedFile


@dataclass(frozen=True)
class BestForTarget:
    letter: str
    target: str
    baseline_tps: float | None
    best: str | None                  # the recommended candidate's label, None when none pays
    draft_max: int | None
    speedup: Speedup | None           # as in a row's ``speedup`` (ratio, CI, significance)
    acceptance_rate: float | None
    memory: str | None = None         # what the best costs in memory over the target alone ("+0.9 GiB on CUDA0")


def best_per_target(files: list[ComparedFile] | tuple[ComparedFile, ...]) -> list[BestForTarget]:
    """One entry per target of every file, in file order (read from each file's analysed summary)."""
    out = []
    for f in files:
        for verdict in verdicts_of(f.results):
            label = verdict.choice.recommended_label
            cost = verdict.memory.costs.get(label) if verdict.memory is not None and label else None
            out.append(BestForTarget(f.letter, verdict.target, verdict.baseline_tps, verdict.recommended_draft,
                                     verdict.draft_max, verdict.speedup, verdict.acceptance_rate,
                                     cost.text() if cost is not None else None))
    return out
