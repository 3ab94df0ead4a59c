"""The verdict's last word: the command (or, for LM Studio, the settings) that runs what it recommends.

Built from the command each row recorded, less draftbench's plumbing (see
:mod:`draftbench.backends.how_to_run`): the recommended configuration; the target alone when
nothing was shown to be faster; and, where the best configuration differs by prompt type, one
command per configuration with the types it is best for. Stored in the verdict's summary entry
(``run``, ``run_by_category``) so the console, the report and ``--export md`` print the same lines.
"""

from __future__ import annotations

from ..backends import get_backend
from ..backends.how_to_run import RunAdvice, advise
from ..results.file import ResultsFile, Row
from ..results.speedup import Speedup

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


def add_how_to_run(entry: dict, results: ResultsFile, target: str, level: int) -> None:
    """``entry["run"]``: ``{what, kind, text}`` for the recommended configuration (else the target alone,
    or the best measured when significance could not be judged); ``entry["run_by_category"]``: one
    ``{categories, candidate, kind, text}`` per configuration that is best on some prompt types, when
    they differ."""
    speed = entry.get("speedup")
    speed = speed if isinstance(speed, Speedup) else Speedup.from_value(speed)
    rec = entry.get("recommended_draft")
    found = entry.get("best")
    best: dict = found if isinstance(found, dict) else {}
    if rec and speed and speed.significant and speed.ratio > 1:
        what, row = RECOMMENDED, _row(results, target, rec, entry.get("draft_max"), level)
    elif best.get("decision") == "shortlist" and best.get("draft"):
        what, row = SHORTLIST_LEADER, _row(results, target, best["draft"], best.get("draft_max"), level)
    elif rec and speed and speed.significant is None:
        what, row = BEST_MEASURED, _row(results, target, rec, entry.get("draft_max"), level)
    else:
        what, row = TARGET_ALONE, results.baseline_for(target, level)
    advice = _advice(results, row)
    entry["run"] = {"what": what, **advice.to_dict()} if advice else None
    entry["run_by_category"] = _by_category(entry.get("by_category") or {}, results, target)


def _by_category(best: dict[str, dict], results: ResultsFile, target: str) -> list[dict]:
    """One command per distinct best configuration (per-category speed-ups are one-stream figures)."""
    groups: dict[tuple, list[str]] = {}
    for category, choice in best.items():
        if choice.get("too_few") or (choice.get("candidate") is not None and not choice.get("significant_gain")):
            continue            # no command for a category measured too little, or whose best is not shown to gain
        groups.setdefault((choice.get("draft"), choice.get("draft_max"), choice.get("candidate")), []).append(category)
    if len(groups) < 2:
        return []
    out = []
    for (draft, draft_max, name), categories in groups.items():
        advice = _advice(results, _row(results, target, draft, draft_max, 1))
        if advice is not None:
            out.append({"categories": categories, "candidate": name or TARGET_ALONE, **advice.to_dict()})
    return out


def run_commands(entry: dict) -> list[tuple[str, str]]:
    """(what it runs, the command or settings) that end a target's verdict (console, report, Markdown)."""
    out = []
    run = entry.get("run") or {}
    advice = RunAdvice.from_value(run)
    if advice is not None:
        lead = {RECOMMENDED: "Run it", TARGET_ALONE: "Run the target alone",
                BEST_MEASURED: "To try the best measured (not shown to be faster)",
                SHORTLIST_LEADER: "Run the shortlist's leader (each in it is shown faster than the target alone; "
                                  "which is fastest is not settled)"}.get(str(run.get("what")), "Run it")
        out.append((lead + ("" if advice.kind == "command" else " in LM Studio"), advice.text))
    for group in entry.get("run_by_category") or []:
        advice = RunAdvice.from_value(group)
        if advice is not None:
            out.append((f"For {', '.join(group.get('categories') or [])} ({group.get('candidate')})", advice.text))
    return out


def command_lines(entry: dict) -> list[str]:
    """:func:`run_commands` as lines of text."""
    return [f"{lead}: {text}" for lead, text in run_commands(entry)]
