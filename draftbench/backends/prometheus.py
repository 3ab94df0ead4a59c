"""Prometheus text exposition (``/metrics``): one parser for every backend.

A sample is ``name{label="value",…} number``. Servers with several engines or slots export one
series per label set; :func:`total` sums them, :func:`by_label` keeps them apart (e.g. the
per-position acceptance counters, labelled ``position``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .http.server_values import counter_difference

# No draft proposes this many tokens per step (llama.cpp's own limits are far lower).
MAX_POSITIONS = 1024

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


def by_position(samples: list[Sample], name: str, label: str = "position") -> tuple[float, ...] | None:
    """A counter labelled by a 0-based integer position as a dense vector (positions missing in
    between read 0); None when the server does not export it."""
    found: dict[int, float] = {}
    for key, value in by_label(samples, name, label).items():
        # A position past any real draft length is a broken or hostile server: never a huge vector.
        if key.isdigit() and int(key) < MAX_POSITIONS:
            found[int(key)] = value
    if not found:
        return None
    return tuple(found.get(i, 0.0) for i in range(max(found) + 1))


def position_delta(before: list[Sample], after: list[Sample], name: str, *,
                   present_before: str) -> tuple[int, ...] | None:
    """``after − before`` of a per-position counter. A server may export the positions only once
    something was counted (llama-server does), so a missing series before the request reads as
    zeros when ``present_before`` (a plain counter of the same family) was exported then."""
    now = by_position(after, name)
    if now is None:
        return None
    then = by_position(before, name)
    if then is None:
        if total(before, present_before) is None:
            return None          # the snapshot before the request was not a usable reading
        then = ()
    return tuple(_moved(value, then[i] if i < len(then) else 0.0, name, i) for i, value in enumerate(now))


def flat_totals(samples: list[Sample], names: tuple[str, ...], positional: str) -> dict[str, float]:
    """:func:`totals` of ``names`` plus the per-position counter ``positional`` as ``NAME[i]`` entries:
    one flat dict that two readings can be compared and subtracted by."""
    out = totals(samples, names)
    for i, value in enumerate(by_position(samples, positional) or ()):
        out[f"{positional}[{i}]"] = value
    return out


def flat_position_delta(before: dict[str, float], after: dict[str, float], positional: str) -> tuple[int, ...] | None:
    """``after − before`` of the ``NAME[i]`` entries of :func:`flat_totals` (absent before: 0)."""
    now: list[float] = []
    while f"{positional}[{len(now)}]" in after:
        now.append(after[f"{positional}[{len(now)}]"])
    if not now:
        return None
    return tuple(_moved(v, before.get(f"{positional}[{i}]", 0.0), positional, i) for i, v in enumerate(now))


def _moved(after: float, before: float, name: str, position: int) -> int:
    """One position's change, checked like every server counter (never backwards, never absurd)."""
    moved = counter_difference(after, before, f'{name}{{position="{position}"}}')
    return 0 if moved is None else moved
