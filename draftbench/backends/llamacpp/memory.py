"""Memory: can a baseline server and a candidate server be up at the same time (the interleaved design),
does a long context's KV cache fit, and what a running server holds.

On a CPU, and on Apple Silicon's unified memory, llama-server maps the GGUF file: two servers of
the same target share its pages, and each adds only its KV cache and buffers. On an NVIDIA GPU
each server copies the weights it offloads: both fit only when twice the target plus the draft
(and a margin for KV caches and buffers) fit in the free GPU memory that ``nvidia-smi`` reports.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from ...common.errors import ModelFileError, ModelProblem, ServerError, ServerErrorKind
from ...common.gguf import GGUFInfo, read_info, trained_context
from ...config.settings import Settings
from ...lifetime.process import read_log
from ...results.memory import BUFFER_KINDS, ServerMemory
from ..base import Server
from .topology import ModelPlacement, model_sections, placements

MARGIN = 1.15              # KV caches, compute buffers, CUDA context
FIXED_GIB = 1.0            # per server


def _size(path: str | None) -> int:
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0


def free_gpu_bytes(timeout_s: float = 10.0) -> int | None:
    """Free memory of the first NVIDIA GPU, or None where there is no nvidia-smi or it does not answer."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=memory.free", "--format=csv,noheader,nounits"], capture_output=True,
                             text=True, timeout=timeout_s, check=False).stdout
        return int(float(out.strip().splitlines()[0])) * 1024 * 1024
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def side_by_side_problem(settings: Settings, target: str, draft: str | None) -> str | None:
    """Why two servers (the target alone, the target with ``draft``) cannot run together; None: they can."""
    if settings.gpu_layers == 0:
        return None                       # CPU: the same mapped file
    if sys.platform == "darwin":
        return None                       # unified memory: Metal uses the mapped file
    free = free_gpu_bytes()
    if free is None:
        return None                       # no NVIDIA GPU found: the servers run on the CPU
    need = (2 * _size(target) + _size(draft)) * MARGIN + 2 * FIXED_GIB * 1024 ** 3
    if need <= free:
        return None
    return (f"two servers need about {need / 1024 ** 3:.1f} GiB of GPU memory (the target twice plus the draft) and "
            f"{free / 1024 ** 3:.1f} GiB is free")


# --------------------------------------------------------------------------- long contexts

_RPC_NAME = re.compile(r"^RPC\d*\[.+\]$")
F16_BYTES = 2              # llama-server's default KV cache type (-ctk/-ctv f16)


def kv_bytes_per_token(info: GGUFInfo) -> int | None:
    """Bytes of f16 KV cache one token takes in this model (every layer's keys and values), from its header;
    None where the header lacks a figure."""
    def get(key: str) -> int | None:
        value = info.get(f"{info.architecture}.{key}")
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    layers, heads, width = get("block_count"), get("attention.head_count"), get("embedding_length")
    kv_heads = get("attention.head_count_kv") or heads
    if layers is None or heads is None or width is None or kv_heads is None:
        return None
    key_width = get("attention.key_length") or width // heads
    value_width = get("attention.value_length") or width // heads
    return layers * kv_heads * (key_width + value_width) * F16_BYTES


def available_bytes(settings: Settings) -> tuple[int | None, str]:
    """Memory a server's KV cache may take, and where: free GPU memory (NVIDIA, layers offloaded), else the
    memory Linux says is available (``MemAvailable``); None where neither can be read."""
    if settings.gpu_layers != 0 and sys.platform != "darwin":
        free = free_gpu_bytes()
        if free is not None:
            return free, "free GPU memory (nvidia-smi)"
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "available memory (/proc/meminfo)"
    except (OSError, ValueError, IndexError):
        pass
    return None, ""


def context_need_bytes(target: GGUFInfo, draft: GGUFInfo | None, ctx_tokens: int) -> int | None:
    """The KV caches a server of ``ctx_tokens`` (all slots) allocates for the target and its draft (llama-server
    gives the draft the same context), with the weights where they are copied rather than mapped: a bound
    from below, the compute buffers come on top."""
    per_token = [kv_bytes_per_token(m) for m in (target, draft) if m is not None]
    if any(p is None for p in per_token):
        return None
    return sum(p or 0 for p in per_token) * ctx_tokens


def device_of(buffer: str) -> str:
    """The device a buffer lives on, by the name llama-server logs: ``CPU_Mapped``, ``CPU_REPACK``, ``AMX`` and a
    GPU build's pinned host buffers (``CUDA_Host``) are this machine's memory (``CPU``); ``MTL0_Mapped`` is
    ``MTL0``; a GPU (``CUDA0``, ``Vulkan1``, ``MTL0``) or an RPC device (``RPC0[host:port]``) is itself."""
    if _RPC_NAME.match(buffer):
        return buffer
    if buffer.upper().startswith("CPU") or buffer.endswith("_Host") or buffer == "AMX":
        return "CPU"
    for suffix in ("_Mapped", "_REPACK"):
        if buffer.endswith(suffix):
            return buffer[:-len(suffix)]
    return buffer


def held_by_device(*places: ModelPlacement | None) -> dict[str, dict[str, float]]:
    """Each device's buffers (model, KV, compute, output; MiB) over the models loaded (target and draft)."""
    out: dict[str, dict[str, float]] = {}
    for place in places:
        if place is None:
            continue
        for kind in BUFFER_KINDS:
            for buffer, mib in getattr(place, kind).items():
                device = out.setdefault(device_of(buffer), {})
                device[kind] = round(device.get(kind, 0.0) + mib, 2)
    return out


def in_use(pid: int | None, log_path: str | None, offset: int = 0, models: tuple[str, str | None] | None = None,
           ) -> ServerMemory:
    """What a running llama-server holds: its peak resident memory (Linux ``VmHWM``: the mapped weights it
    touched included) and, from its log since ``offset`` (its own start), each device's buffers for the target
    and the draft (``models``: their paths as passed; logged at -lv 4, which the sweep passes)."""
    if pid is None and not log_path:
        return ServerMemory(unreported="draftbench did not start this server: its process and log are not ours to "
                                       "read")
    peak = _peak_rss_mib(pid)
    devices: dict[str, dict[str, float]] = {}
    if log_path:
        text = read_log(log_path, offset)
        target, draft = placements(text, *models) if models else (None, None)
        if target is None:         # a path the log spells otherwise: every load since this server started
            devices = held_by_device(*model_sections(text))
        else:
            devices = held_by_device(target, draft)
    kv = round(sum(d.get("kv_mib", 0.0) for d in devices.values()), 2) if devices else None
    missing = None if devices else ("llama-server's log names no buffer sizes (it logs them at -lv 4: check "
                                    "settings.method_stats and a lower -lv in extra_args)")
    said = (["llama-server's log (buffers)"] if devices else []) + (["/proc (peak RSS)"] if peak is not None else [])
    return ServerMemory(peak_rss_mib=peak, kv_mib=kv, devices=devices or None, source=" and ".join(said) or None,
                        unreported=missing)


ESTIMATED = ("estimated from the GGUF headers: each model's weights and its f16 KV cache at the context asked; "
             "compute buffers come on top (llama-server logs them at start)")


def offloaded_share(info: GGUFInfo, gpu_layers: int) -> float:
    """The share of a model's weights (and KV cache) -ngl puts on the GPU: its layers and the output layer."""
    layers = info.get(f"{info.architecture}.block_count")
    if gpu_layers < 0 or not isinstance(layers, int) or layers <= 0 or gpu_layers > layers:
        return 1.0 if gpu_layers != 0 else 0.0
    return gpu_layers / (layers + 1)


def estimate_memory(target: str, draft: str | None, ctx_size: int, slots: int = 1, *, gpu: str | None = None,
                    gpu_layers: int = 0) -> ServerMemory | None:
    """What a llama-server of ``target`` (and ``draft``) would hold per device, from the GGUF headers: each model's
    weights (its tensor data, which llama-server's model buffers match) and its f16 KV cache at ``ctx_size`` tokens
    per slot (llama-server gives the draft the same context); on ``gpu`` (the first device ``--list-devices``
    names) the share ``gpu_layers`` offloads, the rest on the CPU. None where a header lacks the KV cache's shape."""
    devices: dict[str, dict[str, float]] = {}
    for info in [read_info(target)] + ([read_info(draft)] if draft else []):
        per_token = kv_bytes_per_token(info)
        if per_token is None:
            return None
        weights = max(0, info.file_size - info.data_start) / 2**20
        kv = per_token * ctx_size * slots / 2**20
        share = offloaded_share(info, gpu_layers) if gpu else 0.0
        for device, part in ((gpu, share), ("CPU", 1.0 - share)):
            if device and part > 0:
                held = devices.setdefault(device, {"model_mib": 0.0, "kv_mib": 0.0})
                held["model_mib"] = round(held["model_mib"] + weights * part, 2)
                held["kv_mib"] = round(held["kv_mib"] + kv * part, 2)
    kv_total = round(sum(d["kv_mib"] for d in devices.values()), 2)
    return ServerMemory(kv_mib=kv_total, devices=devices, source=ESTIMATED)


def estimate_for(target: str, draft: str | None, settings: Settings, ctx_size: int, slots: int = 1) -> ServerMemory | None:
    """:func:`estimate` on the device ``settings.gpu_layers`` offloads to, named as llama-server would: ``MTL0`` on
    macOS, ``CUDA0`` where ``nvidia-smi`` answers, else none (the CPU). Nothing of llama-server's is run: --dry-run
    starts nothing."""
    gpu = None
    if settings.gpu_layers != 0:
        gpu = "MTL0" if sys.platform == "darwin" else "CUDA0" if free_gpu_bytes() is not None else None
    try:
        return estimate_memory(target, draft, ctx_size, slots, gpu=gpu, gpu_layers=settings.gpu_layers)
    except ModelFileError:
        return None      # the model checks name the file's problem


def _peak_rss_mib(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def context_problem(target: str, draft: str | None, prompt_tokens: int, ctx_size: int, settings: Settings,
                    slots: int = 1) -> ModelProblem | None:
    """Why ``prompt_tokens``-token prompts on ``-c ctx_size`` per slot cannot be measured: a model trained
    for less (``<arch>.context_length``), or KV caches larger than the memory there is; None: they can, or
    the headers do not say. The fix names the longest prompt that fits."""
    models = [("the target", read_info(target))] + ([("the draft", read_info(draft))] if draft else [])
    headroom = ctx_size - prompt_tokens
    for who, info in models:
        trained = trained_context(info)
        if trained is not None and ctx_size > trained:
            return ModelProblem(f"{prompt_tokens:,}-token prompts need a context of {ctx_size:,} tokens (the prompt, "
                                f"max_tokens and the draft's headroom), more than the {trained:,} {who} "
                                f"({os.path.basename(info.path)}) was trained for ({info.architecture}.context_length "
                                "in its GGUF; beyond it RoPE scaling makes another model)", _longest(trained - headroom))
    need = context_need_bytes(models[0][1], models[1][1] if draft else None, ctx_size * slots)
    free, where = available_bytes(settings)
    if need is None or free is None or need <= free:
        return None
    per_token = need // (ctx_size * slots)
    return ModelProblem(f"{prompt_tokens:,}-token prompts need about {need / 1024 ** 3:.1f} GiB of KV cache "
                        f"({ctx_size:,} tokens × {slots} slot(s), target and draft) and {free / 1024 ** 3:.1f} GiB is "
                        f"{where}", _longest(free // per_token // slots - headroom))


def _longest(tokens: int) -> str:
    if tokens < 1:
        return "lower settings.max_tokens, or use a model with a longer context"
    return f"use settings.context_tokens of at most {tokens:,} (or lower settings.max_tokens)"


def check_slot_context(server: Server, ctx_size: int) -> None:
    """What it holds per slot, from the server itself (``/slots`` n_ctx): a context shrunk by an argument or a
    variable would have every long prompt judged at a length the server cannot take."""
    short = min((s.n_ctx for s in server.slot_states() or () if s.n_ctx is not None), default=None)
    if short is not None and short < ctx_size:
        raise ServerError(f"llama-server holds {short:,} tokens of context per slot (/slots n_ctx), fewer than the "
                          f"{ctx_size:,} it was started for", "remove what sets its context (a -c or --ctx-size "
                          "passed through, a LLAMA_ARG_CTX_SIZE in its environment)", kind=ServerErrorKind.FLAGS)
