"""What to measure, in what order.

A :class:`Combination` is one server configuration to measure: a target alone, the target with
one draft at one draft length, the target again (drift control), or a draft alone. The planner
decides the list and its order; the runner executes whatever it is handed. Other search
strategies (adaptive racing) and more axes (concurrency) plug in here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import ModelRef, SweepConfig
from ..results import Role, combination_title


@dataclass(frozen=True)
class Combination:
    role: Role
    target: ModelRef                 # the model the server loads as its main model
    draft: ModelRef | None = None
    draft_max: int | None = None

    @property
    def key(self) -> tuple:
        """The same identity a results row has (see ``results.Row.key``): what resume matches on."""
        return (self.role.value, self.target.label, self.draft.label if self.draft else None, self.draft_max)

    @property
    def is_speculative(self) -> bool:
        return self.draft is not None

    def title(self, show_k: bool) -> str:
        return combination_title(self.role, self.target.label, self.draft.label if self.draft else None,
                                 self.draft_max, show_k=show_k)


def plan(config: SweepConfig) -> list[Combination]:
    """Upstream's order: each target's baseline, then its drafts (× draft lengths), then the
    optional control; draft-alone runs (for the cost ratio) last."""
    out: list[Combination] = []
    for target in config.targets:
        out.append(Combination(Role.BASELINE, target))
        for draft in config.drafts:
            for k in config.draft_max_values:
                out.append(Combination(Role.SPECULATIVE, target, draft, k))
        if config.settings.get("control_baseline"):
            out.append(Combination(Role.CONTROL, target))
    if config.settings.get("draft_alone"):
        for draft in config.drafts:
            out.append(Combination(Role.DRAFT_ALONE, draft))
    return out


def shows_k(config: SweepConfig) -> bool:
    """Name the draft length in titles only when several are swept."""
    return len(config.draft_max_values) > 1
