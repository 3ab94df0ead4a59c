"""What a row's server held in memory, as the server itself said (``Row.memory``), declared once here.

Per device (the names the server's own log uses: ``CPU``, ``CUDA0``, ``MTL0``, ``RPC0[host:port]``): its
model weights, KV cache, compute and output buffers (llama.cpp); the process's peak resident memory (Linux
``VmHWM``); and what vLLM and LM Studio report (vLLM: the weights it loaded, its KV cache in GiB and tokens,
``--gpu-memory-utilization``; LM Studio's SDK: the loaded models' sizes). A figure the server did not give is
absent (``None``), never 0, and ``unreported`` says what was not given and why. A row measured over several
server sessions keeps the most any of them held (:meth:`ServerMemory.most`).

Every key is optional and written only when set, so the rows of files written before this class existed
(``peak_rss_mib``, ``kv_mib``, ``servers``) read and write back as they were: no schema bump.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .bounds import FRACTION
from .json_types import STR, Int, MapOf, Num, Obj, check_fields, declare, read_fields, write_fields

MAX_MIB = 10**9                       # a petabyte: no server holds more
MIB = Num(minimum=0, maximum=MAX_MIB, unit="MiB")
BUFFER_KINDS = ("model_mib", "kv_mib", "compute_mib", "output_mib")   # a device's buffers, in this order
DEVICE = Obj({kind: MIB for kind in BUFFER_KINDS}, nullable=False, units={kind: "MiB" for kind in BUFFER_KINDS})
GIB = 1024.0                          # MiB


@dataclass(frozen=True)
class ServerMemory:
    """What one server (or the most of a row's server sessions) held, in MiB."""

    peak_rss_mib: float | None = declare(MIB, "MiB", omit_when_none=True)      # the process's peak resident memory
    kv_mib: float | None = declare(MIB, "MiB", omit_when_none=True)            # every KV cache (target and draft)
    servers: int | None = declare(Int(minimum=0), "sessions", omit_when_none=True)   # sessions that said
    devices: dict[str, dict[str, float]] | None = declare(MapOf(DEVICE), "MiB", omit_when_none=True)
    model_mib: float | None = declare(MIB, "MiB", omit_when_none=True)         # weights, where no device is named
    kv_tokens: int | None = declare(Int(minimum=0), "tokens", omit_when_none=True)   # vLLM: its KV cache in tokens
    gpu_memory_utilization: float | None = declare(FRACTION, omit_when_none=True)    # vLLM: the share it may take
    source: str | None = declare(STR, omit_when_none=True)         # where the figures came from
    unreported: str | None = declare(STR, omit_when_none=True)     # what the server did not say, and why

    def __post_init__(self) -> None:
        check_fields(self, "memory")

    def to_dict(self) -> dict[str, Any]:
        return write_fields(self)

    @classmethod
    def from_dict(cls, data: dict) -> ServerMemory:
        if not isinstance(data, dict):
            raise ValueError(f"a row's memory must be an object, not {type(data).__name__}")
        return cls(**read_fields(cls, data))

    @property
    def has_figures(self) -> bool:
        """It holds a figure (not only why there is none)."""
        return bool(self.devices) or any(v is not None for v in (self.peak_rss_mib, self.kv_mib, self.model_mib))

    def held(self) -> dict[str, float]:
        """MiB per device: its buffers summed (empty where the server named no device)."""
        return {name: round(sum(v for v in kinds.values() if v is not None), 2)
                for name, kinds in (self.devices or {}).items()}

    def total_mib(self) -> float | None:
        """Everything it said it held: its devices' buffers, else its weights and KV cache; None: it said none."""
        if self.devices:
            return round(sum(self.held().values()), 2)
        parts = [v for v in (self.model_mib, self.kv_mib) if v is not None]
        return round(sum(parts), 2) if parts else None

    def buffer_mib(self, kind: str) -> float | None:
        """One kind of buffer (``model_mib``, ``kv_mib``, …) summed over the devices; None where none said it."""
        values = [d[kind] for d in (self.devices or {}).values() if d.get(kind) is not None]
        if values:
            return round(sum(values), 2)
        return getattr(self, kind, None) if kind in ("model_mib", "kv_mib") else None

    def most(self, later: ServerMemory, *, new_session: bool) -> ServerMemory:
        """The most of this (a row's sessions so far) and ``later`` (one more session's figures), figure by figure
        (each stage starts new servers); ``new_session``: ``later`` is a session not counted yet."""
        def top(a: float | None, b: float | None) -> float | None:
            return b if a is None else a if b is None else max(a, b)

        devices: dict[str, dict[str, float]] = {}
        for source in (self.devices or {}, later.devices or {}):
            for name, kinds in source.items():
                mine = devices.setdefault(name, {})
                for kind, value in kinds.items():
                    mine[kind] = top(mine.get(kind), value)     # type: ignore[assignment]
        return ServerMemory(top(self.peak_rss_mib, later.peak_rss_mib), top(self.kv_mib, later.kv_mib),
                            (self.servers or 0) + (1 if new_session else 0), devices or None,
                            top(self.model_mib, later.model_mib), later.kv_tokens or self.kv_tokens,
                            later.gpu_memory_utilization or self.gpu_memory_utilization,
                            later.source or self.source, later.unreported or self.unreported)


def mib_text(mib: float, *, signed: bool = False) -> str:
    """'912 MiB', '23.1 GiB', '+0.9 GiB' (signed): MiB below a GiB, GiB above."""
    sign = ("+" if mib >= 0 else "−") if signed else ("−" if mib < 0 else "")
    size = abs(mib)
    if size >= GIB:
        return f"{sign}{size / GIB:.1f} GiB"
    return f"{sign}{size:.0f} MiB" if size >= 10 else f"{sign}{size:.1f} MiB"
