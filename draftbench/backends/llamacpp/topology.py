"""Where llama-server put each model, read from its own log, and the proof that an RPC split happened.

At verbosity 4 (``-lv 4``) llama-server logs, for every model it loads (checked on build 11434)::

    llama_model_loader: loaded meta data with 34 key-value pairs and 542 tensors from /m/target.gguf (…)
    llama_prepare_model_devices: using device RPC0 (127.0.0.1:50911) (unknown id) - 24105 MiB free
    load_tensors: offloaded 61/61 layers to GPU
    load_tensors:   CPU_Mapped model buffer size =    28.69 MiB
    load_tensors: RPC0[127.0.0.1:50911] model buffer size =    65.53 MiB
    llama_kv_cache: RPC0[127.0.0.1:50911] KV buffer size =    23.25 MiB

An RPC buffer is named ``RPC<device on that server>[<endpoint>]``. The target is loaded first, then
the draft; the "loaded meta data" line names the file, which tells the sections apart. These
buffer sizes are the evidence: a model holds bytes on an endpoint, or it does not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...common.errors import ServerError, ServerErrorKind
from ...results.topology import RPC_SPLIT

LOG_VERBOSITY = 4        # the load_tensors / llama_kv_cache lines are not printed below it

_META = re.compile(r"llama_model_loader: loaded meta data with \d+ key-value pairs and \d+ tensors from (.+?) "
                   r"\(version")
_DEVICE = re.compile(r"using device (\S+) \((.*?)\)")
_OFFLOADED = re.compile(r"load_tensors: offloaded (\d+/\d+) layers")
# Build 11434 names the function load_tensors / llama_kv_cache / sched_reserve (llama_context: output); older
# builds llm_load_tensors, llama_kv_cache_init, llama_new_context_with_model. A recurrent model's state is "RS".
_BUFFER = re.compile(r"(\w+):\s+(\S+)\s+(model|KV|RS|compute|output) buffer size =\s*([\d.]+) MiB")
_RPC_BUFFER = re.compile(r"^RPC\d+\[(.+)\]$")
_KINDS = {"model": "model_mib", "KV": "kv_mib", "RS": "kv_mib", "compute": "compute_mib", "output": "output_mib"}


@dataclass
class ModelPlacement:
    """One model's devices and buffers (MiB by buffer name), as its load logged them."""

    path: str
    devices: list[dict] = field(default_factory=list)          # [{"name": "RPC0", "description": "127.0.0.1:50911"}]
    offloaded: str | None = None                               # "61/61" layers
    model_mib: dict[str, float] = field(default_factory=dict)
    kv_mib: dict[str, float] = field(default_factory=dict)
    compute_mib: dict[str, float] = field(default_factory=dict)
    output_mib: dict[str, float] = field(default_factory=dict)

    def on_endpoints(self) -> dict[str, float]:
        """MiB of this model's weights on each RPC endpoint."""
        out: dict[str, float] = {}
        for name, mib in self.model_mib.items():
            m = _RPC_BUFFER.match(name)
            if m:
                out[m.group(1)] = round(out.get(m.group(1), 0.0) + mib, 2)
        return out

    def local_mib(self) -> float:
        return round(sum(mib for name, mib in self.model_mib.items() if not _RPC_BUFFER.match(name)), 2)

    def to_dict(self) -> dict:
        return {"path": self.path, "devices": self.devices, "offloaded": self.offloaded, "model_mib": self.model_mib,
                "kv_mib": self.kv_mib, "compute_mib": self.compute_mib, "output_mib": self.output_mib,
                "on_endpoints_mib": self.on_endpoints(),
                "local_mib": self.local_mib()}


def model_sections(log_text: str) -> list[ModelPlacement]:
    """Every model load in the log, in order."""
    sections: list[ModelPlacement] = []
    for line in log_text.splitlines():
        m = _META.search(line)
        if m:
            sections.append(ModelPlacement(path=m.group(1).strip()))
            continue
        if not sections:
            continue
        current = sections[-1]
        if (m := _DEVICE.search(line)) and "llama_prepare_model_devices" in line:
            current.devices.append({"name": m.group(1), "description": m.group(2)})
        elif m := _OFFLOADED.search(line):
            current.offloaded = m.group(1)
        elif m := _BUFFER.search(line):
            # a name can be logged twice for one model (a sliding-window model's two KV caches): they add up
            sizes = getattr(current, _KINDS[m.group(3)])
            sizes[m.group(2)] = round(sizes.get(m.group(2), 0.0) + float(m.group(4)), 2)
    return sections


def placements(log_text: str, target: str, draft: str | None) -> tuple[ModelPlacement | None, ModelPlacement | None]:
    """The target's and the draft's sections, told apart by file (the log names the path as passed). A later
    load of the same file replaces an earlier one; a draft that is the target's own file is its second load."""
    found_target = found_draft = None
    for section in model_sections(log_text):
        if section.path == draft and (draft != target or found_target is not None):
            found_draft = section
        elif section.path == target:
            found_target = section
    return found_target, found_draft


def proven_topology(log_text: str, *, target: str, draft: str | None, endpoints: tuple[str, ...],
                    placement: str | None, log_path: str | None = None) -> tuple[dict, list[str]]:
    """The split as llama-server logged it, checked against what was asked: ``(topology, notes)``.

    Raises :class:`ServerError` when the log shows the target on no RPC endpoint, a draft asked on the RPC
    devices that is not there (or one asked local that is), or no buffer sizes at all (nothing proven)."""
    target_place, draft_place = placements(log_text, target, draft)
    fix_verbosity = ("llama-server logs its buffers at verbosity 4 (-lv 4), which draftbench passes for RPC "
                     "targets; check extra_args for a lower -lv, or the log for the load lines")
    if target_place is None or not target_place.model_mib:
        raise ServerError("cannot prove the RPC split: llama-server's log shows no model buffer sizes for the target",
                          fix_verbosity, log_path=log_path, kind=ServerErrorKind.DEVICE)
    on = target_place.on_endpoints()
    if not any(mib > 0 for mib in on.values()):
        raise ServerError(f"llama-server put none of the target on the RPC endpoints {', '.join(endpoints)} (its "
                          f"buffers: {_buffers_text(target_place)})", "check settings.gpu_layers (0 keeps every "
                          "layer here) and -ts / --device in extra_args", log_path=log_path, kind=ServerErrorKind.DEVICE)
    notes = [f"the target holds nothing on RPC endpoint {e} (its buffers: {_buffers_text(target_place)})"
             for e in endpoints if on.get(e, 0) <= 0]
    if draft is not None:
        if draft_place is None or not draft_place.model_mib:
            raise ServerError("cannot prove where the draft runs: llama-server's log shows no model buffer sizes for "
                              "it", fix_verbosity, log_path=log_path, kind=ServerErrorKind.DEVICE)
        draft_on = {e: mib for e, mib in draft_place.on_endpoints().items() if mib > 0}
        if placement == "rpc" and not draft_on:
            raise ServerError(f"the draft was asked to run on the RPC devices, but llama-server kept it here (its "
                              f"buffers: {_buffers_text(draft_place)})", "check -devd / -ngld in extra_args",
                              log_path=log_path, kind=ServerErrorKind.DEVICE)
        if placement == "local" and draft_on:
            raise ServerError(f"the draft was asked to run here, but llama-server put it on {', '.join(draft_on)}",
                              "check -devd / -ngld in extra_args", log_path=log_path, kind=ServerErrorKind.DEVICE)
    topology: dict = {"kind": RPC_SPLIT, "endpoints": [], "draft_placement": placement,
                "target": target_place.to_dict(), "draft": draft_place.to_dict() if draft_place else None,
                "split_proven": True}
    return topology, notes


def _buffers_text(place: ModelPlacement) -> str:
    return ", ".join(f"{name} {mib:g} MiB" for name, mib in place.model_mib.items()) or "none logged"

