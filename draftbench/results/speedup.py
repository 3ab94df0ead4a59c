"""A speed-up over the target alone, as a frozen, self-validating value (see :func:`stats.speedup`).

Rows hold one in ``Row.speedup`` and one per prompt category in ``Row.speedup_by_category``. In a
results file it is the object :meth:`Speedup.to_dict` writes — the keys and their order are part of
the file format, so files written before this class existed read and write back byte for byte.
JSON-valued fields (a row's ``ceiling`` and ``degenerate_output``) store that object;
:meth:`Speedup.from_value` reads it back (the verdict, ``analysis.summary``, holds typed speed-ups).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .bounds import MAX_RATIO
from .json_types import (
    BOOL,
    NUM,
    STR,
    Int,
    Num,
    check_fields,
    checked_instance,
    checked_values,
    declare,
    read_fields,
    write_fields,
)


@dataclass(frozen=True)
class Speedup:
    """``ratio`` = candidate tok/s ÷ baseline tok/s; a 95% interval and significance where measured."""

    ratio: float = declare(Num(nullable=False, minimum=0, maximum=MAX_RATIO), "×", required=True)
    ci95_low: float | None = declare(NUM, "×")
    ci95_high: float | None = declare(NUM, "×")
    significant: bool | None = declare(BOOL)      # None: too few requests to judge (or an upstream file)
    method: str | None = declare(STR)             # paired-log-by-prompt, paired-t-log, welch-t-log, single-sample, …
    n_pairs: int | None = declare(Int(minimum=0), "requests")
    percent: float | None = declare(NUM, "%")   # (ratio - 1) * 100, rounded to 2 decimals
    # not written when None (single-sample and ratio-of-means never had them):
    noise_floor: float | None = declare(NUM, "×", omit_when_none=True)
    note: str | None = declare(STR, omit_when_none=True)   # why significance was overridden
    # What the interval answers and how it was built (analysis/replication.py); schema 4, not written
    # when None, so files from before they existed read and write back unchanged.
    question: str | None = declare(STR, omit_when_none=True)     # "prompts like these" or "these prompts"
    interval: str | None = declare(STR, omit_when_none=True)     # what the interval is: "95% over 6 candidates …"
    se_log: float | None = declare(Num(minimum=0), "log", omit_when_none=True)   # standard error of the mean
    df: float | None = declare(Num(minimum=0), omit_when_none=True)   # its degrees of freedom (Satterthwaite)
    prompts: int | None = declare(Int(minimum=0), "prompts", omit_when_none=True)   # prompts it averages over
    sessions: int | None = declare(Int(minimum=0), "sessions", omit_when_none=True)  # the candidate's sessions

    def __post_init__(self) -> None:
        check_fields(self, "speed-up")
        _check_interval(self.ci95_low, self.ci95_high)

    @property
    def has_interval(self) -> bool:
        return self.ci95_low is not None and self.ci95_high is not None

    def to_dict(self) -> dict[str, Any]:
        return write_fields(self)

    @classmethod
    def from_dict(cls, data: dict) -> Speedup:
        """Read what :meth:`to_dict` wrote (unknown keys are ignored, as in request records)."""
        if not isinstance(data, dict):
            raise ValueError(f"a speed-up must be an object, not {type(data).__name__}")
        if "ratio" not in data:
            raise ValueError("a speed-up needs a 'ratio'")
        return cls(**read_fields(cls, data))

    @classmethod
    def from_checked(cls, data: dict) -> Speedup:
        """A speed-up from an object the results schema has accepted (its values are not checked again:
        see :func:`json_types.checked_instance`); the rule between its fields still is."""
        values = checked_values(cls, data)
        _check_interval(values["ci95_low"], values["ci95_high"])
        return checked_instance(cls, values)

    @classmethod
    def from_value(cls, value: Speedup | dict | None) -> Speedup | None:
        """A speed-up from a row field or a JSON value that may hold one (None stays None)."""
        if value is None or isinstance(value, Speedup):
            return value
        return cls.from_dict(value)


def _check_interval(low: float | None, high: float | None) -> None:
    if (low is None) != (high is None):
        raise ValueError("a speed-up's interval needs both ci95_low and ci95_high, or neither")


def rank(speed: Speedup | None) -> tuple[float, float]:
    """How every verdict orders speed-ups (the best has the highest key): by how surely faster — the
    95% interval's low end, else the ratio — then by the ratio. No speed-up ranks below every one."""
    if speed is None:
        return -math.inf, -math.inf
    return (speed.ci95_low if speed.ci95_low is not None else speed.ratio), speed.ratio


def plain(value: Any) -> Any:
    """``value`` with every :class:`Speedup` inside dicts and lists written as its JSON object: for
    JSON-valued fields built from typed values (the summary, a row's ceiling)."""
    if isinstance(value, Speedup):
        return value.to_dict()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
