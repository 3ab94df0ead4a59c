"""Ceiling runs need the acceptance their draft measured: complete them from the results so far.

The planner puts every ceiling run after the real runs of its target, so by the time one runs,
the row of its draft is in the results file (or is not, and the ceiling is skipped, saying why).
"""

from __future__ import annotations

from dataclasses import replace

from ..analysis.draft.ceiling import SYNTH_LEN, Level, synth_length
from ..results.file import ResultsFile
from ..results.kinds import Role
from .plan import Combination


def resolve(combo: Combination, results: ResultsFile | None) -> tuple[Combination, str]:
    """The ceiling run with its synthetic length as a candidate parameter (llama.cpp
    ``--spec-synth-len``) and its settings recorded, or the combination and why it cannot run."""
    cand = combo.candidate
    if cand is None or combo.synthetic is None:
        return combo, "skipped: a ceiling run needs a draft"
    level = Level(combo.synthetic["level"])
    key: tuple = (Role.SPECULATIVE, combo.target.label, cand.label, cand.draft_max)
    real = results.row(key if combo.context_tokens is None else (*key, ("context", combo.context_tokens))) \
        if results else None
    length, k, why = synth_length(level, real, cand.draft_max)
    if length is None:
        return replace(combo, synthetic={**combo.synthetic, "k": k}), why
    synthetic = {"level": level.value, SYNTH_LEN: round(length, 4), "k": k,
                 "from_mean_accepted_len": real.mean_accepted_len if real else None}
    params = tuple((n, v) for n, v in cand.params if n != SYNTH_LEN) + ((SYNTH_LEN, synthetic[SYNTH_LEN]),)
    return replace(combo, candidate=replace(cand, params=params), synthetic=synthetic), ""
