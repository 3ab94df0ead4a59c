"""What to run after a staged verdict that more measuring could change: the next command, and what it costs.

Read from the verdict's typed values, never re-derived: the :class:`~draftbench.analysis.decision.Outcome`, the
projection of :mod:`settle` (``Projection.stages``: server pairs per candidate still needed), the stages done and
planned. A recommendation or "nothing gains" is final, so it has no next step here (the verdict's own command runs
what it recommends). A shortlist or an unresolved target does:

* ``--more S`` — S stages beyond those planned for every target left unresolved or shortlisted (raising
  ``settings.stages`` instead would change a measurement setting, and the file would no longer resume); a
  target the budget stopped before its planned stages first runs those, so only the rest is asked of ``--more``;
* ``--budget B`` — where ``settings.budget_s`` would stop it first: B covers the time already spent (a resumed
  budget goes on) and the stages asked for, at this sweep's pace;
* the cost — the stages asked for at this target's pace so far (its measuring time over the stages done) on the
  machine the sweep ran on: a race that has left candidates behind measures fewer, so it is at most that.

Rendered at the edge (the console, ``--chart-only``, the report, the Markdown export) through :meth:`NextStep.text`,
with the command that ran the sweep where the renderer knows it.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..common.numbers import duration_text
from ..config.settings import DEFAULTS
from ..results.file import ResultsFile
from .decision import Outcome
from .settle import MAX_EXTRA
from .stage_verdict import StagedVerdict

CONFIG_PLACEHOLDER = "YOUR_CONFIG.json"     # where the renderer does not know the config that made the file
BUDGET_STEP_S = 60                          # a budget the command asks for is rounded up to whole minutes
LOOPS_FIRST = (" But the best's figure rests on the target's looping output: more stages would measure the loops more "
               "precisely — fix them first (an instruct model with its chat template, a larger max_tokens, or prompts "
               "the target answers without looping).")


@dataclass(frozen=True)
class NextStep:
    """A staged target's next command: ``--more``/``--budget``, what it would settle and what it costs here."""

    target: str
    outcome: Outcome
    more: int                      # --more STAGES (0: the stages still planned are enough)
    budget_s: int | None           # --budget SECONDS, where the sweep's budget would stop it first
    stages: int | None             # stages it measures in all (None: more than settle's cap would be needed)
    pace_s: float | None           # this target's measuring time per stage so far
    settles: str                   # what it would settle ("ngram-simple's gain over the +2.0% floor")
    loops: bool = False            # the best's figure rests on the target's looping output: fix that first
    near: bool = False             # what blocks is the margin between two drafts (their gap, as measured so far)

    @property
    def cost_s(self) -> float | None:
        return None if self.stages is None or self.pace_s is None else self.stages * self.pace_s

    def to_dict(self) -> dict[str, Any]:
        """As the summary entry keeps it (``next``)."""
        return {"more": self.more, "budget_s": self.budget_s, "stages": self.stages,
                "pace_s": None if self.pace_s is None else round(self.pace_s, 1),
                "cost_s": None if self.cost_s is None else round(self.cost_s, 1), "settles": self.settles,
                "arguments": self.arguments()}

    def arguments(self) -> str:
        return " ".join(([f"--more {self.more}"] if self.more else [])
                        + ([f"--budget {self.budget_s}"] if self.budget_s is not None else []))

    def command(self, rerun: str) -> str:
        """``rerun`` (the command that ran the sweep, without ``--more`` and ``--budget``) with this step's flags."""
        return f"{rerun} {self.arguments()}".strip()

    def lead(self) -> str:
        """What the command settles and what it costs here, or why no command is given."""
        if self.stages is None:
            return (f"Next: more stages are unlikely to settle {self.settles}: more than {MAX_EXTRA} more server pairs "
                    "per candidate would be needed at the spread measured here"
                    + (" and the gap measured so far (a larger true gap settles sooner)" if self.near else "")
                    + (f" (over {duration_text(MAX_EXTRA * self.pace_s)} on this machine at this sweep's pace)"
                       if self.pace_s else ""))
        cost = self.cost_s
        # the share of futures the projection promises is settle's to say (and docs/statistics.md's to measure)
        return (f"Next, to settle {self.settles} (as projected from what was measured"
                + (f"; at most about {duration_text(cost)} on the machine the sweep ran on, at its pace so far"
                   if cost is not None else "") + ")")

    def text(self, rerun: str) -> str:
        """'Next, to settle ngram-simple's gain over the +2.0% floor (as projected …; at most about 25m00s on the
        machine the sweep ran on, at its pace so far): `python sweep.py --config X --more 10`'."""
        text = f"{self.lead()}." if self.stages is None else f"{self.lead()}: `{self.command(rerun)}`"
        return text + (("" if self.stages is None else ".") + LOOPS_FIRST if self.loops else "")


def next_step(results: ResultsFile, verdict: StagedVerdict | None, loops: bool = False) -> NextStep | None:
    """The next command of a staged target whose stages ended unresolved or with a shortlist (None otherwise, or
    where no projection says what would settle it and no budget stopped it early). ``loops``: the best's figure
    rests on the target's looping output (said with the command: fix the loops first)."""
    if verdict is None or verdict.verdict not in (Outcome.UNRESOLVED, Outcome.SHORTLIST):
        return None
    settings = results.read_settings()
    done, planned = verdict.stages, verdict.horizon
    spent = staged_seconds(results, verdict.target)
    pace = spent / done if done and spent else None
    budget = settings.budget_s
    stopped_early = budget is not None and done < planned     # the budget ran out before the planned stages
    projection = verdict.settle
    if projection is None and not stopped_early:
        return None
    if projection is not None and projection.stages is None and projection.half is None:
        return NextStep(verdict.target, verdict.verdict, 0, None, None, pace, projection.about, loops, projection.near)
    if projection is not None and projection.stages is None:
        # fewer futures than settle promises decide within its cap, but half do by `half`: the verdict's own offer
        wanted, about = projection.half or 0, f"{projection.about}, about half the time"
    else:
        wanted = projection.stages if projection is not None and projection.stages else max(0, planned - done)
        about = projection.about if projection is not None else "more of it: the budget ended it before its planned stages"
    more = max(0, wanted - max(0, planned - done)) if stopped_early else wanted
    need = None if pace is None else spent + wanted * pace
    raise_budget = budget is not None and need is not None and need > budget
    return NextStep(verdict.target, verdict.verdict, more,
                    BUDGET_STEP_S * math.ceil((need or 0) / BUDGET_STEP_S) if raise_budget else None,
                    wanted, pace, about, loops)


def staged_seconds(results: ResultsFile, target: str) -> float:
    """The measuring time a target's staged rows recorded (what its budget counts)."""
    return sum(r.wall_time or 0.0 for r in results.rows_of(target)
               if r.concurrency == 1 and r.design and r.design.get("horizon"))


def for_the_sweep(steps: Iterable[NextStep]) -> NextStep | None:
    """One command for every target with a next step: ``--more`` continues them all, so the most any asks for, the
    largest budget, and the cost of all of them at that many stages (None: no target has a command)."""
    runnable = [s for s in steps if s.stages is not None]
    if len(runnable) < 2:
        return runnable[0] if runnable else None
    more = max(s.more for s in runnable)
    budgets = [s.budget_s for s in runnable if s.budget_s is not None]
    paces = [s.pace_s for s in runnable]
    per_stage = sum(p for p in paces if p is not None) if all(p is not None for p in paces) else None
    stages = max(s.stages or 0 for s in runnable)
    return NextStep(", ".join(s.target for s in runnable), runnable[0].outcome, more, max(budgets) if budgets else None,
                    stages, per_stage, f"each of {len(runnable)} targets' questions")


def rerun_of(results: ResultsFile, config: str | None = None, results_path: str | None = None) -> str:
    """The command that continues ``results``: its config (a placeholder where unknown), the results file where
    given, and the search and design it was measured with where they are not the defaults (a file is only resumed
    with those)."""
    settings = results.read_settings()
    words = ["python", "sweep.py", "--config", config or CONFIG_PLACEHOLDER]
    if results_path:
        words += ["--results", results_path]
    for flag, key in (("--search", "search"), ("--design", "design")):
        value = getattr(settings, key)
        if value != getattr(DEFAULTS, key):
            words += [flag, value]
    return " ".join(shlex.quote(w) for w in words)
