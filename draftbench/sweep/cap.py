"""How many combinations a config makes, counted without expanding them, and the cap on that count.

Parameter lists multiply: six lists of ten values are a million candidates, which would take
years to measure and gigabytes to merely list. The count is a product of list lengths, so it is
known at once, before anything is expanded; beyond ``settings.max_combinations`` the config is
refused with the count, the lists that multiply and the setting that raises the cap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..analysis.concurrency import levels
from ..analysis.context_length import lengths as context_lengths
from ..common.errors import Problem
from ..config.candidates import CandidateSpec
from ..config.settings import COMMON_SETTINGS, Settings

CAP_KEY = "max_combinations"
LISTS_NAMED = 4            # the biggest multipliers named in the message; the rest are counted


@dataclass(frozen=True)
class Count:
    total: int
    candidates: int
    targets: int
    levels: int
    lists: tuple[tuple[int, str], ...]     # (candidates it makes, how), biggest first
    lengths: int = 1                       # context lengths ($.settings.context_tokens)
    temperatures: int = 1                  # temperatures of the axis ($.settings.temperature as a list)

    def describe(self) -> str:
        per_target = f"1 baseline + {self.candidates:,} candidate{'s' if self.candidates != 1 else ''}"
        shape = f"{self.targets:,} target{'s' if self.targets != 1 else ''} × ({per_target})"
        if self.levels > 1:
            shape += f" × {self.levels} concurrency levels ($.settings.concurrency)"
        if self.lengths > 1:
            shape += f" × {self.lengths} prompt lengths ($.settings.context_tokens)"
        if self.temperatures > 1:
            shape += f" × {self.temperatures} temperatures ($.settings.temperature)"
        return shape


def _values(value: object) -> int:
    return len(value) if isinstance(value, list) and value else 1


def candidates_of(spec: CandidateSpec) -> int:
    """Concrete candidates ``spec`` expands to: the product of its parameter lists' lengths."""
    return math.prod(_values(v) for v in spec.params.values())


def _how(spec: CandidateSpec) -> str:
    swept = [f"{name} ({len(v)} values)" for name, v in sorted(spec.params.items())
             if isinstance(v, list) and len(v) > 1]
    where = f"{spec.where}.params" if spec.where.startswith("$.candidates") else f"{spec.where} × $.settings.draft_max"
    return f"{where}: {' × '.join(swept)}"


def count(n_targets: int, specs: tuple[CandidateSpec, ...], settings: Settings, n_drafts: int) -> Count:
    """What :func:`draftbench.sweep.plan.plan` would make, as arithmetic (the same rules, no lists built)."""
    per_spec = [(candidates_of(s), s) for s in specs]
    n_candidates = sum(n for n, _ in per_spec)
    with_draft = sum(n for n, s in per_spec if s.draft is not None)
    steps = levels(settings)
    per_level = 1 + n_candidates + (1 if settings.control_baseline else 0)
    ceiling = 2 * with_draft if settings.ceiling and 1 in steps else 0
    n_lengths = len(context_lengths(settings)) or 1
    heats = len(settings.temperatures) if settings.temperature_axis else 1
    total = n_targets * n_lengths * heats * (len(steps) * per_level + ceiling) + (n_drafts if settings.draft_alone
                                                                                    else 0)
    lists = sorted(((n, _how(s)) for n, s in per_spec if n > 1), key=lambda item: -item[0])
    return Count(total, n_candidates, n_targets, len(steps), tuple(lists), n_lengths, heats)


def cap_problem(found: Count, settings: Settings) -> Problem | None:
    """The problem to report when ``found`` is beyond the cap (None within it)."""
    cap = settings.max_combinations
    if found.total <= cap:
        return None
    most = COMMON_SETTINGS[CAP_KEY].max or cap
    raise_it = (f"to run them all, raise settings.{CAP_KEY} to at least {found.total}" if found.total <= most else
                f"settings.{CAP_KEY} goes up to {most:,} at most, so split the sweep into several configs")
    named = "; ".join(f"{how} = {n:,} candidates" for n, how in found.lists[:LISTS_NAMED])
    more = len(found.lists) - LISTS_NAMED
    lists = (f". The lists that multiply: {named}" + (f" (and {more} more)" if more > 0 else "")) if named else ""
    return Problem(f"$.settings.{CAP_KEY}",
                   f"the config makes {found.total:,} combinations ({found.describe()}), more than "
                   f"settings.{CAP_KEY} ({cap:,}){lists}",
                   f"shorten those lists or split them over several configs; {raise_it}")
