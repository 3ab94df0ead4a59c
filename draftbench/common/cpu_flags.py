"""This machine's CPU flags, as Linux lists them in ``/proc/cpuinfo`` (``avx2``, ``avx512f``, ``amx_tile``, …).

Read where a message or a build depends on them: a llama-server crash at warm-up on a CPU that advertises AMX
is llama.cpp's AMX kernels (llama.cpp#20824), and ``tools/get-llama-server.sh`` rebuilds without AMX from the
instruction sets listed here. ``DRAFTBENCH_CPUINFO`` names another file to read instead, so a machine without
AMX can show what a machine with it sees (the tests do). A leaf module: stdlib only, so the build script's
helper runs it on the system Python.
"""

from __future__ import annotations

import os

CPUINFO = "/proc/cpuinfo"
MAX_BYTES = 4 * 2**20        # a few kB per core: far more than any machine's


def cpu_flags() -> frozenset[str]:
    """The flags of the first processor listed (every core of one machine has the same); empty where the file
    cannot be read (not Linux) or lists none (an ARM ``Features`` line is read the same way)."""
    path = os.environ.get("DRAFTBENCH_CPUINFO") or CPUINFO
    try:
        with open(path, "rb") as fh:
            text = fh.read(MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip().lower() in ("flags", "features"):
            return frozenset(value.split())
    return frozenset()


def has_amx(flags: frozenset[str] | None = None) -> bool:
    """Does the CPU advertise AMX (``amx_tile``, ``amx_int8``, ``amx_bf16``, …)?"""
    return any(flag.startswith("amx") for flag in (cpu_flags() if flags is None else flags))
