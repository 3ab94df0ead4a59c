"""A speed-up over the target alone, as a frozen, self-validating value (see :func:`stats.speedup`).

Rows hold one in ``Row.speedup`` and one per prompt category in ``Row.speedup_by_category``. In a
results file it is the object :meth:`Speedup.to_dict` writes — the keys and their order are part of
the file format, so files written before this class existed read and write back byte for byte.
JSON-valued fields (the file's summary, a row's ``ceiling`` and ``degenerate_output``) store that
object; :meth:`Speedup.from_value` reads it back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class Speedup:
    """``ratio`` = candidate tok/s ÷ baseline tok/s; a 95% interval and significance where measured."""

    ratio: float
    ci95_low: float | None = None
    ci95_high: float | None = None
    significant: bool | None = None      # None: too few requests to judge (or an upstream file)
    method: str | None = None            # paired-t-log, welch-t-log, single-sample, ratio-of-means
    n_pairs: int | None = None
    percent: float | None = None         # (ratio - 1) * 100, rounded to 2 decimals
    noise_floor: float | None = None     # not written when None (single-sample and ratio-of-means never had it)
    note: str | None = None              # why significance was overridden; not written when None
    # What the interval answers and how it was built (see analysis/replication.py); not written when None,
    # so files from before they existed read and write back unchanged.
    question: str | None = None          # "prompts like these" (prompts are the unit) or "these prompts"
    se_log: float | None = None          # standard error of the mean log ratio
    df: float | None = None              # its degrees of freedom (Welch–Satterthwaite)
    prompts: int | None = None           # prompts the estimate averages over
    sessions: int | None = None          # server sessions of the candidate it spans

    def __post_init__(self) -> None:
        if not _number(self.ratio) or self.ratio < 0:
            raise ValueError(f"speed-up ratio {self.ratio!r} is not a finite number of at least 0")
        for name in ("ci95_low", "ci95_high", "percent", "noise_floor", "se_log", "df"):
            value = getattr(self, name)
            if value is not None and not _number(value):
                raise ValueError(f"speed-up {name} {value!r} is not a finite number")
        if (self.ci95_low is None) != (self.ci95_high is None):
            raise ValueError("a speed-up's interval needs both ci95_low and ci95_high, or neither")
        if self.significant is not None and not isinstance(self.significant, bool):
            raise ValueError(f"speed-up significant {self.significant!r} is not true, false or null")
        if self.n_pairs is not None and (isinstance(self.n_pairs, bool) or not isinstance(self.n_pairs, int)
                                         or self.n_pairs < 0):
            raise ValueError(f"speed-up n_pairs {self.n_pairs!r} is not a whole number of at least 0")
        for name in ("method", "note"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"speed-up {name} {value!r} is not text")

    @property
    def has_interval(self) -> bool:
        return self.ci95_low is not None and self.ci95_high is not None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ratio": self.ratio, "ci95_low": self.ci95_low, "ci95_high": self.ci95_high,
                               "significant": self.significant, "method": self.method, "n_pairs": self.n_pairs,
                               "percent": self.percent}
        if self.noise_floor is not None:
            out["noise_floor"] = self.noise_floor
        if self.note is not None:
            out["note"] = self.note
        for name in ("question", "se_log", "df", "prompts", "sessions"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Speedup:
        """Read what :meth:`to_dict` wrote (unknown keys are ignored, as in request records)."""
        if not isinstance(data, dict):
            raise ValueError(f"a speed-up must be an object, not {type(data).__name__}")
        if "ratio" not in data:
            raise ValueError("a speed-up needs a 'ratio'")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def from_value(cls, value: Speedup | dict | None) -> Speedup | None:
        """A speed-up from a row field or a JSON value that may hold one (None stays None)."""
        if value is None or isinstance(value, Speedup):
            return value
        return cls.from_dict(value)


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
