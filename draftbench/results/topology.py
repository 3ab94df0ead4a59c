"""Where a row's models ran, in words: a llama.cpp target split over RPC endpoints (and where its draft
was), or vLLM's parallelism. Reads ``Row.topology`` as the results file holds it (plain JSON), so
the console, the report and exports say the same thing."""

from __future__ import annotations

from typing import Any

# Row.topology["kind"], declared once: a server started with a parallelism (vLLM), or a llama.cpp target split
# over RPC endpoints (its draft placed beside it)
PARALLELISM = "vllm"
RPC_SPLIT = "llamacpp-rpc"

VLLM_SIZES = (("tensor_parallel_size", "tensor parallel"), ("pipeline_parallel_size", "pipeline parallel"),
              ("data_parallel_size", "data parallel"))


def _mib(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def where(place: Any) -> str:
    """``"65.5 MiB on 127.0.0.1:50911, 28.7 MiB here"`` for one model's placement."""
    if not isinstance(place, dict):
        return "placement not logged"
    on = place.get("on_endpoints_mib")
    on = on if isinstance(on, dict) else {}
    bits = [f"{mib:.1f} MiB on {endpoint}" for endpoint, mib in on.items() if _mib(mib)]
    if _mib(place.get("local_mib")):
        bits.append(f"{place['local_mib']:.1f} MiB here")
    return ", ".join(bits) or "placement not logged"


def links(topology: dict) -> str:
    """Each endpoint's measured round trip: ``"127.0.0.1:50911 0.025 ms"``."""
    out = []
    for endpoint in topology.get("endpoints") or []:
        if isinstance(endpoint, dict) and isinstance(endpoint.get("endpoint"), str):
            rtt = endpoint.get("rtt_ms")
            out.append(f"{endpoint['endpoint']} " + (f"{rtt:.3f} ms" if isinstance(rtt, (int, float)) else "n/a"))
    return ", ".join(out)


def parallelism(topology: dict) -> str:
    """vLLM: ``"tensor parallel 2 × pipeline parallel 2 over ray (4 GPUs)"``."""
    sizes = [f"{name} {topology[key]}" for key, name in VLLM_SIZES if isinstance(topology.get(key), int)]
    text = " × ".join(sizes) or "one GPU"
    if topology.get("distributed_executor_backend"):
        text += f" over {topology['distributed_executor_backend']}"
    if isinstance(topology.get("nnodes"), int) and topology["nnodes"] > 1:
        text += f", {topology['nnodes']} nodes"
    if isinstance(topology.get("world_size"), int):
        text += f" ({topology['world_size']} GPUs)"
    return text


def is_parallelism(topology: dict) -> bool:
    """A server's parallelism (vLLM's sizes), not where each model's bytes went."""
    return topology.get("kind") == PARALLELISM


def describe(topology: Any) -> str:
    """One line for people; "" when there is nothing to say."""
    if not isinstance(topology, dict):
        return ""
    if is_parallelism(topology):
        return parallelism(topology)
    parts = [f"target {where(topology.get('target'))}"]
    if topology.get("draft"):
        placement = topology.get("draft_placement")
        parts.append(f"draft{f' ({placement})' if placement else ''} {where(topology.get('draft'))}")
    if links(topology):
        parts.append("round trip " + links(topology))
    return "; ".join(parts)
