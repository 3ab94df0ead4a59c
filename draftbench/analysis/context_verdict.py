"""The context axis of a target's verdict, typed: each prompt length's verdict, timings and memory, and up
to which length each candidate pays (built by :mod:`context_length`; kept in ``TargetVerdict.context``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..results.memory import ServerMemory
from ..results.speedup import Speedup
from .crossover import LevelOutcome
from .stage_verdict import StagedVerdict


@dataclass(frozen=True)
class Timing:
    """Medians over a row's requests: time to first token, the server's prefill, decode; and a request of the
    typical output length end to end (modelled from the two)."""

    ttft_s: float | None = None
    prefill_s: float | None = None
    prefill_tps: float | None = None
    decode_tps: float | None = None
    prompt_tokens: float | None = None
    end_to_end_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"ttft_s": self.ttft_s, "prefill_s": self.prefill_s, "prefill_tps": self.prefill_tps,
                "decode_tps": self.decode_tps, "prompt_tokens": self.prompt_tokens, "end_to_end_s": self.end_to_end_s}


@dataclass(frozen=True)
class LengthPoint:
    """One server at one prompt length: the target alone (``candidate`` None) or a candidate against it."""

    timing: Timing
    memory: ServerMemory | None            # the row's ``memory`` (MiB)
    candidate: str | None = None
    outcome: LevelOutcome | None = None
    speedup: Speedup | None = None
    extra_ttft_s: float | None = None      # its first token later than the baseline's, on the same prompts
    end_to_end_ratio: float | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.candidate is None:
            return {**self.timing.to_dict(), "memory": self.memory.to_dict() if self.memory else None}
        return {"candidate": self.candidate, "outcome": self.outcome.value if self.outcome else None,
                "speedup": self.speedup.to_dict() if self.speedup else None, **self.timing.to_dict(),
                "extra_ttft_s": self.extra_ttft_s, "end_to_end_ratio": self.end_to_end_ratio,
                "memory": self.memory.to_dict() if self.memory else None}


@dataclass(frozen=True)
class LengthVerdict:
    """The verdict at one prompt length, with each server's timings there."""

    context_tokens: int
    verdict: str
    recommended_draft: str | None
    speedup: Speedup | None
    baseline: LengthPoint
    candidates: tuple[LengthPoint, ...]
    stages: StagedVerdict | None = None      # measured in stages: the staged decision at this length (not written)

    def to_dict(self) -> dict[str, Any]:
        return {"context_tokens": self.context_tokens, "verdict": self.verdict,
                "recommended_draft": self.recommended_draft,
                "speedup": self.speedup.to_dict() if self.speedup else None, "baseline": self.baseline.to_dict(),
                "candidates": [c.to_dict() for c in self.candidates]}


@dataclass(frozen=True)
class LengthReach:
    """Per candidate, the longest length at which it pays there and at every shorter length (None: none); per
    length, the candidates that pay there."""

    reach: dict[str, int | None]
    paying: dict[int, list[str]]

    def to_dict(self) -> dict[str, Any]:
        return {"reach": dict(self.reach), "paying": {str(n): list(found) for n, found in self.paying.items()}}


@dataclass(frozen=True)
class ContextAxis:
    """A target measured at several prompt lengths: every length's verdict, and with more than one length each
    candidate's reach."""

    lengths: tuple[int, ...]
    typical_output_tokens: int | None
    per_length: tuple[LengthVerdict, ...]
    reach: LengthReach | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"lengths": list(self.lengths), "typical_output_tokens": self.typical_output_tokens,
                "per_length": [p.to_dict() for p in self.per_length],
                **(self.reach.to_dict() if self.reach is not None else {})}
