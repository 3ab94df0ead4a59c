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

from ..common.percent import change_text
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
    # Why the interval has no upper end (its ci95_high is then null, its ci95_low a number): see ``interval_ends``.
    unbounded: str | None = declare(STR, omit_when_none=True)

    def __post_init__(self) -> None:
        check_fields(self, "speed-up")
        _check_interval(self.ci95_low, self.ci95_high, self.unbounded)

    @property
    def has_interval(self) -> bool:
        return self.ci95_low is not None and (self.ci95_high is not None or self.unbounded is not None)

    @property
    def high(self) -> float | None:
        """The interval's upper end for comparisons: ``inf`` where it is unbounded, None without an interval."""
        return math.inf if self.unbounded is not None else self.ci95_high

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
        _check_interval(values["ci95_low"], values["ci95_high"], values["unbounded"])
        return checked_instance(cls, values)

    @classmethod
    def from_value(cls, value: Speedup | dict | None) -> Speedup | None:
        """A speed-up from a row field or a JSON value that may hold one (None stays None)."""
        if value is None or isinstance(value, Speedup):
            return value
        return cls.from_dict(value)


def _check_interval(low: float | None, high: float | None, unbounded: str | None) -> None:
    if unbounded is not None:
        if low is None or high is not None:
            raise ValueError("a speed-up unbounded above has a ci95_low and a null ci95_high")
    elif (low is None) != (high is None):
        raise ValueError("a speed-up's interval needs both ci95_low and ci95_high, or neither")


UNBOUNDED_WHY = ("the few measurements differ too much for a finite upper end at 95% (more prompts or stages "
                 "bound it)")


def is_unbounded(high: float) -> bool:
    """An interval's upper end that bounds nothing: infinite (``analysis.moments.ratio_of`` past a float's range),
    or past :data:`MAX_RATIO`, which no speed-up reaches."""
    return not high <= MAX_RATIO        # NaN included: it bounds nothing either


def interval_ends(low: float, high: float) -> dict[str, Any]:
    """A 95% interval as a :class:`Speedup` keeps it: ``ci95_low``, ``ci95_high`` (rounded), and ``unbounded``
    (why) with a null ``ci95_high`` where the upper end bounds nothing: a results file is strict JSON (no
    ``Infinity``), and "+4508722254505%" is not a bound a person can use."""
    if is_unbounded(high):
        return {"ci95_low": round(low, 4), "ci95_high": None, "unbounded": UNBOUNDED_WHY}
    return {"ci95_low": round(low, 4), "ci95_high": round(high, 4), "unbounded": None}


def interval_text(low: float | None, high: float | None) -> str:
    """'[+4.1%, +21.0%]', or '[−12.0%, unbounded]' where the upper end bounds nothing ('' without an interval)."""
    if low is None:
        return ""
    return f"[{change_text(low)}, {'unbounded' if high is None or is_unbounded(high) else change_text(high)}]"


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
