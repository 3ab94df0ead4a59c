"""Fake inference servers and CLIs for the vLLM and LM Studio backend tests.

Each fake says in its docstring which documented version/format it follows. Tests put a small
shell wrapper named like the real executable (``vllm``, ``lms``) into a temporary folder; the
wrapper runs the fake with this Python.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import time
from pathlib import Path

FAKES = Path(__file__).resolve().parent


def make_exe(folder: Path, name: str, script: str) -> Path:
    """An executable ``folder/name`` that runs ``tests/fakes/<script>`` with this Python."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(FAKES / script))} \"$@\"\n")
    path.chmod(0o755)
    return path


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped by its parent) is not running
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def live_pids(pid_dir: Path) -> list[int]:
    """Fakes write <pid>.pid into their pid folder; which of them still run?"""
    return [int(p.stem) for p in pid_dir.glob("*.pid") if alive(int(p.stem))]


def reap(pid_dir: Path, timeout_s: float = 5.0) -> list[int]:
    """Wait briefly for fakes to exit; kill and return the ones that did not (a test failure)."""
    deadline = time.monotonic() + timeout_s
    left = live_pids(pid_dir)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = live_pids(pid_dir)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return left
