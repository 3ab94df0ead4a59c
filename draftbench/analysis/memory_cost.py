"""What each candidate costs in memory over the target alone, and whether it fits (``settings.memory_limit_gib``).

A candidate's server holds the target and its draft (a model-free method: its tables); the target alone's server
holds the target. What a candidate adds is the difference, device by device, between what the two servers' own
logs said they held (``Row.memory``: the most any of a row's sessions held), and between their peak resident
memory. With a limit per device the verdict is the fastest that *fits*: a candidate whose server held more than
the limit on a device is measured (if it runs) but never eligible — :func:`not_eligible` is the one place that
decides it, and the staged decision takes its answer as candidates left out, each with its reason. The verdict
then says what the configuration it recommends costs (:func:`verdict_sentence`), and the report draws speed-up
against extra memory with the Pareto front marked (:func:`pareto_front`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..results.file import ResultsFile, Row
from ..results.kinds import Role
from ..results.memory import GIB, ServerMemory, mib_text
from .categories import candidate_name

SHOWN_MIB = 0.5              # a device whose difference is smaller is not named in a cost


@dataclass(frozen=True)
class Over:
    """A server that held more on a device than its limit."""

    device: str
    held_mib: float
    limit_gib: float

    def text(self) -> str:
        return (f"over the memory limit: its server held {mib_text(self.held_mib)} on {self.device}, more than the "
                f"{self.limit_gib:g} GiB of settings.memory_limit_gib")

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "held_mib": self.held_mib, "limit_gib": self.limit_gib}


def over_limit(memory: ServerMemory | None, limit: Mapping[str, float] | None) -> tuple[Over, ...]:
    """Each device on which ``memory`` held more than ``limit`` (GiB) allows."""
    held = memory.held() if memory is not None else {}
    return tuple(Over(device, held[device], gib) for device, gib in (limit or {}).items()
                 if device in held and held[device] > gib * GIB)


@dataclass(frozen=True)
class MemoryCost:
    """One candidate against the target alone: what its server held, and what it adds, per device (MiB)."""

    candidate: str
    held: dict[str, float]                 # its server, per device
    extra: dict[str, float]                # over the target alone's server, per device either named
    peak_rss_mib: float | None = None
    extra_rss_mib: float | None = None     # peak resident memory over the target alone's
    over: tuple[Over, ...] = ()            # devices where it held more than the limit
    unknown: str | None = None             # why what it costs cannot be told

    @property
    def extra_mib(self) -> float | None:
        """Everything it adds: over the devices the logs named, else in peak resident memory; None: not known."""
        if self.extra:
            return round(sum(self.extra.values()), 2)
        return self.extra_rss_mib

    @property
    def fits(self) -> bool:
        return not self.over

    def text(self) -> str:
        """'+0.9 GiB on CUDA0', '+52 MiB on CPU, +3 MiB on CUDA0', '+40 MiB resident (peak RSS)'."""
        if self.extra:
            shown = sorted(((d, mib) for d, mib in self.extra.items() if abs(mib) >= SHOWN_MIB),
                           key=lambda item: -abs(item[1]))
            if not shown:
                return f"no extra memory on {', '.join(self.extra)}"
            return ", ".join(f"{mib_text(mib, signed=True)} on {device}" for device, mib in shown)
        if self.extra_rss_mib is not None:
            return f"{mib_text(self.extra_rss_mib, signed=True)} resident (peak RSS)"
        return f"memory not known ({self.unknown or 'not reported'})"

    def to_dict(self) -> dict[str, Any]:
        return {"candidate": self.candidate, "held_mib": self.held, "extra_mib": self.extra,
                "extra_total_mib": self.extra_mib, "peak_rss_mib": self.peak_rss_mib,
                "extra_rss_mib": self.extra_rss_mib, "text": self.text(), "fits": self.fits,
                "over": [o.to_dict() for o in self.over], "unknown": self.unknown}


def _difference(a: float | None, b: float | None) -> float | None:
    return round(a - b, 2) if a is not None and b is not None else None


def cost_of(row: Row, baseline: Row | None, limit: Mapping[str, float] | None = None) -> MemoryCost:
    """What ``row``'s server held and added over ``baseline``'s (the target alone's)."""
    mine, base = row.memory, baseline.memory if baseline is not None else None
    held = mine.held() if mine is not None else {}
    base_held = base.held() if base is not None else {}
    extra = {d: round(held.get(d, 0.0) - base_held.get(d, 0.0), 2) for d in dict.fromkeys([*held, *base_held])} \
        if held and base_held else {}
    rss = mine.peak_rss_mib if mine is not None else None
    extra_rss = _difference(rss, base.peak_rss_mib if base is not None else None)
    unknown = None
    if not extra and extra_rss is None:
        silent = next((m for m in (mine, base) if m is None or not m.has_figures), None)
        unknown = (silent.unreported if silent is not None and silent.unreported else
                   "the target alone was not measured" if baseline is None else "its server reported no memory")
    return MemoryCost(candidate_name(row), held, extra, rss, extra_rss, over_limit(mine, limit), unknown)


@dataclass(frozen=True)
class TargetMemory:
    """One target's memory: the target alone's server, each candidate's cost over it, and the limit."""

    target: str
    baseline_held: dict[str, float]
    baseline_rss_mib: float | None
    costs: dict[str, MemoryCost]           # by candidate name
    limit_gib: dict[str, float]
    baseline_over: tuple[Over, ...] = ()   # the target alone held more than the limit

    def unmatched(self) -> tuple[str, ...]:
        """Devices the limit names that no server of this target named (a typo, or another machine's)."""
        named = set(self.baseline_held).union(*(c.held for c in self.costs.values()))
        return tuple(d for d in self.limit_gib if named and d not in named)

    def to_dict(self) -> dict[str, Any]:
        return {"baseline_held_mib": self.baseline_held, "baseline_peak_rss_mib": self.baseline_rss_mib,
                "limit_gib": self.limit_gib or None, "baseline_over": [o.to_dict() for o in self.baseline_over],
                "candidates": [c.to_dict() for c in self.costs.values()]}


def limit_of(results: ResultsFile) -> dict[str, float]:
    return dict(results.read_settings().memory_limit_gib or {})


def candidate_rows(results: ResultsFile, target: str, level: int = 1) -> list[Row]:
    return [r for r in results.rows_of(target) if r.role is Role.SPECULATIVE and r.concurrency == level
            and r.measured]


def target_memory(results: ResultsFile, target: str, level: int = 1) -> TargetMemory | None:
    """The target's memory at ``level`` streams; None where no server of it said anything and no limit is set."""
    baseline = results.baseline_for(target, level)
    rows = candidate_rows(results, target, level)
    limit = limit_of(results)
    said = [r for r in (baseline, *rows) if r is not None and r.memory is not None and r.memory.has_figures]
    if not said and not limit:
        return None
    costs = {candidate_name(r): cost_of(r, baseline, limit) for r in rows}
    base_memory = baseline.memory if baseline is not None else None
    return TargetMemory(target, base_memory.held() if base_memory else {},
                        base_memory.peak_rss_mib if base_memory else None, costs, limit,
                        over_limit(base_memory, limit))


def not_eligible(results: ResultsFile) -> dict[tuple[str, str], str]:
    """(target, candidate) → why it may never be recommended: its server held more than the memory limit on a
    device. The staged decision leaves these out (they were measured; they are not the fastest that fits)."""
    limit = limit_of(results)
    if not limit:
        return {}
    out = {}
    for row in results.results:
        if row.role is Role.SPECULATIVE and row.concurrency == 1 and (over := over_limit(row.memory, limit)):
            out[(row.target, candidate_name(row))] = "; ".join(o.text() for o in over)
    return out


def cost_clause(memory: TargetMemory | None, recommended: str | None) -> str | None:
    """What the recommended configuration costs over the target alone, as the verdict line says it beside its
    gain ('for +0.9 GiB on CUDA0 over the target alone, within the memory limit (23.5 GiB on CUDA0)'); None:
    nothing to say."""
    cost = memory.costs.get(recommended) if memory is not None and recommended else None
    if memory is None or cost is None or not cost.fits:
        return None
    if cost.extra_mib is None:           # 'for memory not known (…) over the target alone' would not read
        return f"its memory over the target alone not known ({cost.unknown or 'not reported'})"
    within = f", within the memory limit ({_limits_text(memory.limit_gib)})" if memory.limit_gib else ""
    return f"for {cost.text()} over the target alone{within}"


def verdict_sentence(memory: TargetMemory | None, recommended: str | None, inline: bool = False) -> str:
    """What the recommended configuration costs over the target alone (unless ``inline``: the verdict line said
    it, :func:`cost_clause`), and the limit's part in the verdict."""
    if memory is None:
        return ""
    parts = []
    cost = memory.costs.get(recommended) if recommended and not inline else None
    if cost is not None:
        text = f"Memory: {recommended} costs {cost.text()} over the target alone"
        if memory.limit_gib and cost.fits:
            text += f", within the limit ({_limits_text(memory.limit_gib)})"
        elif not cost.fits:        # a file measured before stages: its rule did not take the limit
            text += "; " + "; ".join(o.text() for o in cost.over)
        parts.append(text + ".")
    if memory.baseline_over:
        held = "; ".join(f"{mib_text(o.held_mib)} on {o.device} (limit {o.limit_gib:g} GiB)" for o in memory.baseline_over)
        parts.append(f"Memory: the target alone held {held}, over settings.memory_limit_gib: nothing with it fits.")
    unmatched = memory.unmatched()
    if unmatched:
        parts.append(f"settings.memory_limit_gib names {', '.join(unmatched)}, which no server of this target used "
                     f"(they used {', '.join(sorted(set(memory.baseline_held)))}): no limit applied there.")
    return " ".join(parts)


def _limits_text(limit: Mapping[str, float]) -> str:
    return ", ".join(f"{gib:g} GiB on {device}" for device, gib in limit.items())


def pareto_front(points: Mapping[str, tuple[float, float]]) -> tuple[str, ...]:
    """The names no other point beats on both axes: (extra memory, lower is better; speed-up, higher is better)."""
    def beaten(name: str) -> bool:
        mem, speed = points[name]
        return any(m <= mem and s >= speed and (m, s) != (mem, speed) for other, (m, s) in points.items()
                   if other != name)
    return tuple(sorted((n for n in points if not beaten(n)), key=lambda n: points[n][0]))
