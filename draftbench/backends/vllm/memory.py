"""What a vLLM server held, as vLLM says: its log's lines about the weights and the KV cache, and the cache's
configuration on ``/metrics``.

The lines, from vLLM's source (a worker logs its own; ``(EngineCore_DP0 pid=…) INFO … [file.py:n]`` before
each; checked against the fake's stand-in, not a real server here)::

    Model loading took 0.2622 GiB memory and 1.52 seconds          (v1/worker/gpu_model_runner.py; the CPU runner's too)
    Available KV cache memory: 21.37 GiB                            (a GPU worker: v1/worker/gpu_worker.py)
    Explicitly set (0.50/22.90) GiB for KV cache on node 0.         (the CPU worker, --kv-cache-memory-bytes)
    Auto set (12.10/22.90) GiB for KV cache on node 0, with …       (the CPU worker, from --gpu-memory-utilization)
    GPU KV cache size: 1,234,560 tokens                             (v1/core/kv_cache_utils.py, CPU builds too)

and ``vllm:cache_config_info{gpu_memory_utilization="0.9",num_gpu_blocks="…",block_size="16",…} 1``. vLLM names
no device per line: a CPU worker's figures are ``CPU``, a GPU worker's ``GPU`` (tensor-parallel ranks each log
theirs: ``GPU`` holds their sum, each rank's share stays in the log). Compute buffers it does not log.
"""

from __future__ import annotations

import re

from ...results.memory import GIB, ServerMemory
from ..prometheus import Sample, parse

_LOADED = re.compile(r"Model loading took ([\d.]+) GiB")
_GPU_KV = re.compile(r"Available KV cache memory: (-?[\d.]+) GiB")
_CPU_KV = re.compile(r"(?:Explicitly|Auto) set \(([\d.]+)/[\d.]+\) GiB for KV cache")
_KV_TOKENS = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
CACHE_INFO = "vllm:cache_config_info"
NOT_LOGGED = "vLLM does not log its compute buffers or name a device per line"


def _whole(text: str | None) -> int | None:
    try:
        value = int(str(text).replace(",", ""))
    except ValueError:
        return None
    return value if 0 <= value < 10**15 else None


def _fraction(text: str | None) -> float | None:
    try:
        value = float(str(text))
    except ValueError:
        return None
    return value if 0 < value <= 1 else None


def reported(log_text: str, metrics_text: str | None) -> ServerMemory:
    """The figures of one vLLM server's log (since it started) and ``/metrics``."""
    weights = [float(x) * GIB for x in _LOADED.findall(log_text)]
    cpu_kv = [float(x) * GIB for x in _CPU_KV.findall(log_text)]
    gpu_kv = [max(0.0, float(x)) * GIB for x in _GPU_KV.findall(log_text)]
    tokens = [t for t in (_whole(x) for x in _KV_TOKENS.findall(log_text)) if t is not None]
    info: Sample | None = next((s for s in parse(metrics_text or "", prefix=CACHE_INFO) if s.name == CACHE_INFO), None)
    blocks, size = (_whole(info.label("num_gpu_blocks")), _whole(info.label("block_size"))) if info else (None, None)
    kv_tokens = sum(tokens) if tokens else (blocks * size if blocks is not None and size is not None else None)
    kv = cpu_kv or gpu_kv
    device: dict[str, float] = {}
    if weights:
        device["model_mib"] = round(sum(weights), 2)
    if kv:
        device["kv_mib"] = round(sum(kv), 2)
    utilization = _fraction(info.label("gpu_memory_utilization")) if info else None
    if not device and kv_tokens is None and utilization is None:
        return ServerMemory(unreported="vLLM's log had none of its memory lines and /metrics no "
                                       f"{CACHE_INFO} (see docs/memory.md)")
    return ServerMemory(kv_mib=device.get("kv_mib"), devices={"CPU" if cpu_kv else "GPU": device} if device else None,
                        kv_tokens=kv_tokens, gpu_memory_utilization=utilization,
                        source=f"vLLM's log and /metrics ({CACHE_INFO})", unreported=NOT_LOGGED)
