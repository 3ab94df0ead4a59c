"""Can a baseline server and a candidate server be up at the same time (the interleaved design)?

On a CPU, and on Apple Silicon's unified memory, llama-server maps the GGUF file: two servers of
the same target share its pages, and each adds only its KV cache and buffers. On an NVIDIA GPU
each server copies the weights it offloads: both fit only when twice the target plus the draft
(and a margin for KV caches and buffers) fit in the free GPU memory that ``nvidia-smi`` reports.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from ...config.settings import Settings

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
