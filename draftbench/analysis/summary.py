"""The verdict as a typed value: one frozen :class:`TargetVerdict` per target, in one frozen :class:`Summary`.

:func:`analysis.verdict.analyze` builds it (``target_verdict.recommend``; ``context_length`` per prompt
length) and keeps it in ``ResultsFile.summary``; the console, the report, the exports and ``--compare`` read
its attributes. Each part is typed where it is computed (the staged decision, the best per prompt type, the
session's figure, the command that runs it, the race, the crossover, the context axis); ``None`` is "not
measured". :meth:`Summary.to_dict` writes the results file's ``summary`` object (its keys and their order
are the file format). A file's stored summary is never read back into this type: every view analyses the
rows again (see ``results.file.StoredSummary``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..results.file import ResultsFile
from ..results.speedup import Speedup
from .axis_points import Point
from .before_stages.race import RaceOutcome
from .categories import CategoryBest
from .choice import BestPick, Choice
from .context_verdict import ContextAxis
from .crossover import Crossover
from .memory_cost import TargetMemory
from .next_step import NextStep
from .session import SessionBest
from .stage_verdict import StagedVerdict
from .temperature_verdict import TemperatureAxis
from .winning_command import CategoryRun, RunLine, command_lines, run_commands


@dataclass(frozen=True)
class KPrediction:
    """The recommended draft's best k, predicted from one run at ``from_k`` (``draft.best_k``)."""

    from_k: int | None
    recommended_k: int | None
    recommended_tps: float | None
    mean_abs_error_pct: float | None
    compared: int | None

    @classmethod
    def from_row(cls, prediction: dict) -> KPrediction:
        """From a row's ``k_prediction`` (the row's own format)."""
        return cls(prediction.get("from_k"), prediction.get("recommended_k"), prediction.get("recommended_tps"),
                   prediction.get("mean_abs_error_pct"), prediction.get("compared"))

    def to_dict(self) -> dict[str, Any]:
        return {"from_k": self.from_k, "recommended_k": self.recommended_k, "recommended_tps": self.recommended_tps,
                "mean_abs_error_pct": self.mean_abs_error_pct, "compared": self.compared}


def _optional(value: Any) -> Any:
    return value.to_dict() if value is not None else None


@dataclass(frozen=True)
class TargetVerdict:
    """One target's verdict: the sentence, the configuration it recommends and the figure it quotes, and the
    parts it was built from."""

    target: str
    verdict: str                                   # the sentence every view prints
    choice: Choice = field(default_factory=Choice)   # what the rule chose (recommended_draft … best)
    baseline_tps: float | None = None
    inactive_drafts: tuple[str, ...] = ()          # speculation never ran with these
    stages: StagedVerdict | None = None            # measured in stages: the staged decision (else None)
    by_category: dict[str, CategoryBest] = field(default_factory=dict)
    no_draft_can_pay: bool = False
    k_prediction: KPrediction | None = None
    within_session: SessionBest | None = None
    run: RunLine | None = None
    run_by_category: tuple[CategoryRun, ...] = ()
    race: RaceOutcome | None = None                # a race of the blocks era
    crossover: Crossover | None = None             # with several concurrency levels
    context: ContextAxis | None = None             # with several prompt lengths
    temperature: TemperatureAxis | None = None     # with several temperatures
    memory: TargetMemory | None = None             # what each candidate costs in memory; None: no server said
    next_step: NextStep | None = None              # unresolved or a shortlist: the command that measures on

    @property
    def recommended_draft(self) -> str | None:
        return self.choice.recommended_draft

    @property
    def draft_max(self) -> int | None:
        return self.choice.draft_max

    @property
    def speedup(self) -> Speedup | None:
        return self.choice.speedup

    @property
    def acceptance_rate(self) -> float | None:
        return self.choice.acceptance_rate

    @property
    def best(self) -> BestPick | None:
        return self.choice.best

    def run_commands(self) -> list[tuple[str, str]]:
        """(what it runs, the command or settings) that end the verdict."""
        return run_commands(self.run, self.run_by_category)

    def command_lines(self) -> list[str]:
        return command_lines(self.run, self.run_by_category)

    def to_dict(self) -> dict[str, Any]:
        """The results file's summary entry (the order of its keys is the file format's)."""
        out: dict[str, Any] = {
            "target": self.target, "baseline_tps": self.baseline_tps, "recommended_draft": self.recommended_draft,
            "draft_max": self.draft_max, "speedup": _optional(self.speedup), "acceptance_rate": self.acceptance_rate,
            "verdict": self.verdict, "inactive_drafts": list(self.inactive_drafts)}
        if self.stages is not None:
            out.update(stages=self.stages.to_dict(), best=_optional(self.best))
        if self.by_category:
            out["by_category"] = {category: best.to_dict() for category, best in self.by_category.items()}
        out.update(no_draft_can_pay=self.no_draft_can_pay, k_prediction=_optional(self.k_prediction))
        if self.within_session is not None:
            out["within_session"] = self.within_session.to_dict()
        out.update(run=_optional(self.run), run_by_category=[r.to_dict() for r in self.run_by_category])
        for name, part in (("race", self.race), ("crossover", self.crossover), ("context", self.context),
                           ("temperature", self.temperature), ("memory", self.memory), ("next", self.next_step)):
            if part is not None:
                out[name] = part.to_dict()
        return out


@dataclass(frozen=True)
class Summary:
    """What the analysis concludes from a results file: each target's verdict and the servers it started."""

    targets: tuple[TargetVerdict, ...]
    server_loads: int

    def to_dict(self) -> dict[str, Any]:
        return {"targets": [t.to_dict() for t in self.targets], "server_loads": self.server_loads}


def summary_of(results: ResultsFile) -> Summary | None:
    """The analysed summary of ``results`` (None before :func:`analysis.verdict.analyze`, or for a file as loaded:
    its stored summary is only ever written back)."""
    return results.summary if isinstance(results.summary, Summary) else None


def staged_verdicts(results: ResultsFile) -> dict[str, StagedVerdict]:
    """The staged decision of each target measured in stages, by its label (on an axis, one per point, as
    ``axis_points.Point.name`` keys it: ``"<label> at <N> tokens"``, ``"<label> at temperature <T>"``), as the
    analysis said it (none before the analysis)."""
    out: dict[str, StagedVerdict] = {}
    for verdict in verdicts_of(results):
        if verdict.context is not None:
            out.update({Point(context_tokens=length.context_tokens).name(verdict.target): length.stages
                        for length in verdict.context.per_length if length.stages is not None})
        elif verdict.temperature is not None:
            out.update({Point(temperature=heat.temperature).name(verdict.target): heat.stages
                        for heat in verdict.temperature.per_temperature if heat.stages is not None})
        elif verdict.stages is not None:
            out[verdict.target] = verdict.stages
    return out


def verdicts_of(results: ResultsFile) -> tuple[TargetVerdict, ...]:
    """Each target's verdict, in file order (none before the analysis)."""
    summary = summary_of(results)
    return summary.targets if summary is not None else ()
