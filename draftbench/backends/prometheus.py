"""Prometheus text exposition (``/metrics``): one parser for every backend.

A sample is ``name{label="value",…} number``. Servers with several engines or slots export one
series per label set; :func:`total` sums them, :func:`by_label` keeps them apart (e.g. the
per-position acceptance counters, labelled ``position``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)(?:\s+\d+)?\s*$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, key: str) -> str | None:
        return next((v for k, v in self.labels if k == key), None)


def parse(text: str, *, prefix: str = "") -> list[Sample]:
    """Every finite sample whose name starts with ``prefix``; comments and malformed lines are skipped."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#") or not line.startswith(prefix):
            continue
        m = _SAMPLE.match(line.strip())
        if not m:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        if not math.isfinite(value):
            continue
        labels = tuple(_LABEL.findall(m.group(2) or ""))
        samples.append(Sample(m.group(1), labels, value))
    return samples


def total(samples: list[Sample], name: str) -> float | None:
    """The sum of every series of ``name``; None when the server does not export it."""
    values = [s.value for s in samples if s.name == name]
    return sum(values) if values else None


def totals(samples: list[Sample], names: set[str] | tuple[str, ...]) -> dict[str, float]:
    """``{name: sum of its series}`` for the names present."""
    out: dict[str, float] = {}
    for s in samples:
        if s.name in names:
            out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def by_label(samples: list[Sample], name: str, label: str) -> dict[str, float]:
    """``{label value: sum of the series with it}`` for ``name`` (series without the label are skipped)."""
    out: dict[str, float] = {}
    for s in samples:
        if s.name == name:
            key = s.label(label)
            if key is not None:
                out[key] = out.get(key, 0.0) + s.value
    return out
