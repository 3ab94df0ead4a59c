"""The machine a results file was measured on (recorded once per file)."""

from __future__ import annotations

import os
import platform
import re


def host_info() -> dict:
    info: dict[str, object] = {"os": platform.platform(), "machine": platform.machine(), "python": platform.python_version(),
            "cpu_count": os.cpu_count(), "cpu": None, "memory_gb": None}
    try:
        with open("/proc/cpuinfo") as fh:
            m = re.search(r"model name\s*:\s*(.+)", fh.read())
            info["cpu"] = m.group(1).strip() if m else None
        with open("/proc/meminfo") as fh:
            m = re.search(r"MemTotal:\s*(\d+) kB", fh.read())
            info["memory_gb"] = round(int(m.group(1)) / 1024 / 1024, 1) if m else None
    except OSError:
        info["cpu"] = platform.processor() or None
    return info
