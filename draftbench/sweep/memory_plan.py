"""``--dry-run``: what each planned server would hold, estimated from the model files, and what cannot fit.

For every target alone and every candidate with a draft model, the backend's estimate (llama.cpp: the GGUF
headers' weights and the f16 KV cache at the largest context and slot count the plan asks of it,
``backends/llamacpp/memory.estimate_memory``) per device, what the draft adds over the target alone, and each device
where it would pass ``settings.memory_limit_gib`` — before any server starts. A model-free method adds no
weights, so it has no line of its own. The run itself judges what the servers' own logs say
(``analysis/memory_cost.py``): a candidate flagged here is still measured if it runs, and never recommended if
it held more than the limit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..analysis.memory_cost import Over, over_limit
from ..backends.base import Backend
from ..config.long_prompts import server_context
from ..results.kinds import Role
from ..results.memory import ServerMemory, mib_text
from .config_file import SweepConfig
from .plan import Combination


@dataclass(frozen=True)
class PlannedServer:
    """One server the plan starts (the largest it would be), and what it would hold."""

    target: str
    draft: str | None                     # its draft model's label (None: the target alone)
    ctx_size: int
    slots: int
    estimate: ServerMemory | None
    over: tuple[Over, ...] = ()

    @property
    def title(self) -> str:
        return f"{self.target} + {self.draft}" if self.draft else f"{self.target} alone"


def _ctx(config: SweepConfig, combo: Combination) -> int:
    if combo.context_tokens is None:
        return config.settings.ctx_size
    return server_context(combo.context_tokens, config.settings.max_tokens, combo.draft_max)


def planned_servers(config: SweepConfig, backend: Backend, combos: Iterable[Combination]) -> list[PlannedServer]:
    """Each target alone and each (target, draft model) of the plan, at the most context and slots it is asked."""
    largest: dict[tuple[str, str | None], tuple[Combination, int, int]] = {}
    for combo in combos:
        if combo.role not in (Role.BASELINE, Role.SPECULATIVE):
            continue
        key = (combo.target.label, combo.draft.label if combo.draft else None)
        ctx, slots = _ctx(config, combo), combo.concurrency
        known = largest.get(key)
        if known is None or ctx * slots > known[1] * known[2]:
            largest[key] = (combo, ctx, slots)
    limit = config.settings.memory_limit_gib
    out = []
    for (target, draft), (combo, ctx, slots) in largest.items():
        found = backend.memory_estimate(combo.target.path, combo.draft.path if combo.draft else None,
                                        config.settings, ctx, slots)
        out.append(PlannedServer(target, draft, ctx, slots, found, over_limit(found, limit)))
    return out


def _held(memory: ServerMemory) -> str:
    return ", ".join(f"{mib_text(mib)} on {device}" for device, mib in memory.held().items())


def memory_lines(servers: list[PlannedServer]) -> list[str]:
    """What ``--dry-run`` prints: each server's estimate, a draft's addition, and a warning per server over the limit."""
    known = [s for s in servers if s.estimate is not None]
    if not known:
        return []
    alone = {s.target: s.estimate for s in known if s.draft is None and s.estimate is not None}
    lines = ["Memory (estimated from the model files: weights and KV cache; compute buffers come on top):"]
    for server in known:
        assert server.estimate is not None
        text = f"  {server.title}: ~{_held(server.estimate)} (-c {server.ctx_size:,}" + \
            (f" × {server.slots} slots)" if server.slots > 1 else ")")
        base = alone.get(server.target)
        if server.draft and base is not None:
            extra = (server.estimate.total_mib() or 0.0) - (base.total_mib() or 0.0)
            text += f", {mib_text(extra, signed=True)} over the target alone"
        lines.append(text)
    for server in known:
        for over in server.over:
            lines.append(f"Warning: {server.title} would not fit: ~{mib_text(over.held_mib)} on {over.device}, over the "
                         f"{over.limit_gib:g} GiB of settings.memory_limit_gib.{over.device} — it is measured if it "
                         "runs, and never recommended if its server holds more than that")
    return lines
