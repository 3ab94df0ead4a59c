"""What a target's rule chose, before the verdict's extras: the recommended configuration and its figure.

The staged rule (:mod:`stage_verdict`) and the rules of files measured before stages (:mod:`decision`) both
end in a :class:`Choice`; the parts every verdict adds (the command that runs it, the crossover, the race's
outcome) read it, and :class:`~draftbench.analysis.summary.TargetVerdict` carries its fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..results.speedup import Speedup


@dataclass(frozen=True)
class BestPick:
    """Measured in stages: the one best the verdict names (the pick, else the leader) and what was decided."""

    name: str | None
    draft: str | None
    draft_max: int | None
    speedup: Speedup | None
    decision: str                       # a decision.Outcome's value

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "draft": self.draft, "draft_max": self.draft_max,
                "speedup": self.speedup.to_dict() if self.speedup else None, "decision": self.decision}


@dataclass(frozen=True)
class Choice:
    """The configuration a target's verdict recommends (None: none), the speed-up it quotes for it, and for
    a staged target its best (``best``)."""

    recommended_draft: str | None = None
    draft_max: int | None = None
    speedup: Speedup | None = None
    acceptance_rate: float | None = None
    best: BestPick | None = None

    @property
    def recommended_label(self) -> str | None:
        """'135M (k=4)': the recommended configuration as the verdict names it."""
        if not self.recommended_draft:
            return None
        return self.recommended_draft + (f" (k={self.draft_max})" if self.draft_max else "")

    @property
    def shown_faster(self) -> bool:
        """A configuration is recommended and shown faster than the target alone."""
        speed = self.speedup
        return bool(self.recommended_draft and speed is not None and speed.significant and speed.ratio > 1)
