"""The verdict's last word: the command (or, for LM Studio, the settings) that runs what it recommends.

Built from the command each row recorded, less draftbench's plumbing (see
:mod:`draftbench.backends.how_to_run`): the recommended configuration; the target alone when
nothing was shown to be faster; and, where the best configuration differs by prompt type, one
command per configuration with the types it is best for. Kept in the target's verdict
(``TargetVerdict.run``, ``run_by_category``) so the console, the report and ``--export md`` print the same lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..backends import get_backend
from ..backends.how_to_run import RunAdvice, advise
from ..results.file import ResultsFile, Row
from .categories import CategoryBest
from .choice import Choice

# What the command runs, as the verdict says it.
RECOMMENDED, TARGET_ALONE, BEST_MEASURED = "recommended", "target alone", "best measured"
SHORTLIST_LEADER = "shortlist leader"


def _advice(results: ResultsFile, row: Row | None) -> RunAdvice | None:
    if row is None:
        return None
    try:
        backend = get_backend(results.backend)
    except KeyError:            # a file from a backend this version does not know: no command to give
        return None
    return advise(backend, row, results.read_settings(backend.settings_class))


def _row(results: ResultsFile, target: str, draft: str | None, draft_max: int | None, level: int) -> Row | None:
    """The measured row of a configuration at ``level`` streams (the target alone when ``draft`` is None)."""
    if draft is None:
        return results.baseline_for(target, level)
    rows = [r for r in results.rows_of(target) if r.role == "speculative" and r.draft == draft
            and r.ok and r.concurrency == level]
    exact = next((r for r in rows if r.draft_max == draft_max), None)
    # a verdict that names no k (significance unknown) means the fastest of that label's rows
    return exact or max(rows, key=lambda r: r.speedup.ratio if r.speedup else 0.0, default=None)


@dataclass(frozen=True)
class RunLine:
    """The command (LM Studio: the settings) that runs what the verdict recommends, and what it runs."""

    what: str                              # RECOMMENDED, TARGET_ALONE, BEST_MEASURED or SHORTLIST_LEADER
    advice: RunAdvice

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, **self.advice.to_dict()}


@dataclass(frozen=True)
class CategoryRun:
    """One configuration that is best on some prompt types, with the command that runs it."""

    categories: tuple[str, ...]
    candidate: str
    advice: RunAdvice

    def to_dict(self) -> dict[str, Any]:
        return {"categories": list(self.categories), "candidate": self.candidate, **self.advice.to_dict()}


def how_to_run(results: ResultsFile, target: str, level: int, choice: Choice) -> RunLine | None:
    """The command for the recommended configuration (else the target alone, or the best measured when
    significance could not be judged, or a staged shortlist's leader)."""
    speed, rec, best = choice.speedup, choice.recommended_draft, choice.best
    if choice.shown_faster:
        what, row = RECOMMENDED, _row(results, target, rec, choice.draft_max, level)
    elif best is not None and best.decision == "shortlist" and best.draft:
        what, row = SHORTLIST_LEADER, _row(results, target, best.draft, best.draft_max, level)
    elif rec and speed and speed.significant is None:
        what, row = BEST_MEASURED, _row(results, target, rec, choice.draft_max, level)
    else:
        what, row = TARGET_ALONE, results.baseline_for(target, level)
    advice = _advice(results, row)
    return RunLine(what, advice) if advice else None


def runs_by_category(best: dict[str, CategoryBest], results: ResultsFile, target: str) -> tuple[CategoryRun, ...]:
    """One command per distinct best configuration, when they differ by prompt type (per-category speed-ups
    are one-stream figures)."""
    groups: dict[tuple, list[str]] = {}
    for category, choice in best.items():
        if choice.too_few or (choice.candidate is not None and not choice.significant_gain):
            continue            # no command for a category measured too little, or whose best is not shown to gain
        groups.setdefault((choice.draft, choice.draft_max, choice.candidate), []).append(category)
    if len(groups) < 2:
        return ()
    out = []
    for (draft, draft_max, name), categories in groups.items():
        advice = _advice(results, _row(results, target, draft, draft_max, 1))
        if advice is not None:
            out.append(CategoryRun(tuple(categories), name or TARGET_ALONE, advice))
    return tuple(out)


_LEADS = {RECOMMENDED: "Run it", TARGET_ALONE: "Run the target alone",
          BEST_MEASURED: "To try the best measured (not shown to be faster)",
          SHORTLIST_LEADER: "Run the shortlist's leader (each in it is shown faster than the target alone; "
                            "which is fastest is not settled)"}


def run_commands(run: RunLine | None, by_category: tuple[CategoryRun, ...]) -> list[tuple[str, str]]:
    """(what it runs, the command or settings) that end a target's verdict (console, report, Markdown)."""
    out = []
    if run is not None:
        lead = _LEADS.get(run.what, "Run it")
        out.append((lead + ("" if run.advice.kind == "command" else " in LM Studio"), run.advice.text))
    for group in by_category:
        out.append((f"For {', '.join(group.categories)} ({group.candidate})", group.advice.text))
    return out


def command_lines(run: RunLine | None, by_category: tuple[CategoryRun, ...]) -> list[str]:
    """:func:`run_commands` as lines of text."""
    return [f"{lead}: {text}" for lead, text in run_commands(run, by_category)]
