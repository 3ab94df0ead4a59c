"""What to measure, in what order.

A :class:`Combination` is one server configuration to measure: a target alone, the target with
one speculative candidate (a draft at one draft length, a model-free method, a hybrid), the
target again (drift control), or a draft alone. The planner decides the list and its order; the
runner executes whatever it is handed. Other search strategies (adaptive racing) and more axes
(concurrency) plug in here.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..analysis.concurrency import levels
from ..analysis.context_length import lengths as context_lengths
from ..analysis.draft.ceiling import Level
from ..config.candidates import Candidate, expand
from ..config.model_ref import ModelRef
from ..results.file import combination_title
from ..results.kinds import Role
from ..results.row import row_key
from .config_file import SweepConfig


@dataclass(frozen=True)
class Combination:
    role: Role
    target: ModelRef                 # the model the server loads as its main model
    candidate: Candidate | None = None
    concurrency: int = 1             # requests in flight at once (the server gets as many slots)
    synthetic: dict | None = None    # ceiling runs: {"level": …}, completed by sweep.ceilings.resolve
    context_tokens: int | None = None   # the context axis: its prompts' length (None: the prompt set's own)
    temperature: float | None = None    # the temperature axis: its requests' temperature (None: settings.temperature)

    @property
    def draft(self) -> ModelRef | None:
        return self.candidate.draft if self.candidate else None

    @property
    def draft_max(self) -> int | None:
        return self.candidate.draft_max if self.candidate else None

    @property
    def key(self) -> tuple:
        """The same identity a results row has (see ``results.Row.key``): what resume matches on."""
        return row_key(self.role, self.target.label, self.candidate.label if self.candidate else None,
                       self.draft_max, synthetic=self.synthetic, concurrency=self.concurrency,
                       context_tokens=self.context_tokens, temperature=self.temperature)

    @property
    def name(self) -> str:
        """Its name among a target's candidates (unique per target: the row key's label and k)."""
        if self.role == Role.CONTROL:
            return "baseline again (A/A)"
        label = self.candidate.label if self.candidate else self.target.label
        level = (self.synthetic or {}).get("level")
        return (label + (f" (k={self.draft_max})" if self.draft_max is not None else "")
                + (f" [synthetic: {level}]" if level else ""))

    @property
    def is_speculative(self) -> bool:
        return self.candidate is not None

    def title(self, show_k: bool) -> str:
        return combination_title(self.role, self.target.label, self.candidate.label if self.candidate else None,
                                 self.draft_max, show_k=show_k, concurrency=self.concurrency,
                                 synthetic=(self.synthetic or {}).get("level"), context_tokens=self.context_tokens,
                                 temperature=self.temperature)


def candidates(config: SweepConfig) -> list[Candidate]:
    """Every concrete candidate: the drafts (× draft lengths), then the configured candidates (× their lists)."""
    return [c for spec in config.specs() for c in expand(spec)]


def plan(config: SweepConfig) -> list[Combination]:
    """Upstream's order: each target's baseline, then its candidates, then the optional ceiling runs
    (one stream, after the rows they read their acceptance from), then the optional control;
    draft-alone runs (for the cost ratio, one stream) last. With several concurrency levels, that
    order repeats per level within each target, so a level's baseline runs close to its candidates;
    with context lengths, per length (shortest first), each on its own long prompts; with temperatures, per
    temperature (coolest first)."""
    out: list[Combination] = []
    every = candidates(config)
    settings = config.settings
    for target in config.targets:
        # A draft "on the RPC devices" of a target that has none would be the local one again.
        concrete = [c for c in every if target.rpc or c.draft_placement != "rpc"]
        for heat in settings.temperatures if settings.temperature_axis else (None,):
            for length in context_lengths(settings) or (None,):
                out += _one_point(config, target, concrete, length, heat)
    if config.settings.draft_alone:
        out += [Combination(Role.DRAFT_ALONE, draft) for draft in config.drafts]
    return out


def _one_point(config: SweepConfig, target: ModelRef, concrete: list[Candidate], length: int | None,
               heat: float | None) -> list[Combination]:
    """A target's combinations at one prompt length and temperature: each level's baseline, candidates, ceiling
    runs (one stream) and control."""
    out: list[Combination] = []
    for n in levels(config.settings):
        out.append(Combination(Role.BASELINE, target, concurrency=n, context_tokens=length, temperature=heat))
        out += [Combination(Role.SPECULATIVE, target, c, concurrency=n, context_tokens=length, temperature=heat)
                for c in concrete]
        if n == 1 and config.settings.ceiling:
            out += ceiling_combinations(target, concrete, length)
        if config.settings.control_baseline:
            out.append(Combination(Role.CONTROL, target, concurrency=n, context_tokens=length, temperature=heat))
    return out


def ceiling_combinations(target: ModelRef, concrete: list[Candidate], length: int | None = None) -> list[Combination]:
    """Two synthetic-acceptance runs for every candidate with a draft model (see :mod:`draftbench.analysis.draft.ceiling`)."""
    return [Combination(Role.CEILING, target, c, synthetic={"level": level.value}, context_tokens=length)
            for c in concrete if c.draft is not None for level in Level]


def shows_k(config: SweepConfig) -> bool:
    """Name the draft length in titles only when one candidate is swept over several."""
    per_label = Counter(c.label for c in candidates(config))
    return any(n > 1 for n in per_label.values())
