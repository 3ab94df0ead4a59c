"""Process groups on each OS: start a process in a group of its own, ask that group to stop, kill it.

POSIX: a new session (``setsid``); the group gets SIGTERM, then SIGKILL. Windows: a new process
group; it gets CTRL_BREAK_EVENT, then ``taskkill /T /F`` ends the process tree. Linux only: a
parent-death signal (``PR_SET_PDEATHSIG``).

Stdlib only and nothing OS-specific touched at import: the supervisor imports this module, and the
CLIs must import cleanly on macOS and Windows. The OS is looked up at call time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

# subprocess.CREATE_NEW_PROCESS_GROUP exists only on Windows; the value is fixed by the Win32 API.
_CREATE_NEW_PROCESS_GROUP = 0x00000200
_PR_SET_PDEATHSIG = 1
TASKKILL_TIMEOUT_S = 10.0


def is_windows() -> bool:
    return sys.platform == "win32"


def has_pdeathsig() -> bool:
    """True where the kernel can signal a child when its parent dies (Linux ``prctl``)."""
    return sys.platform.startswith("linux")


def new_group_kwargs(death_signal: int | None = None) -> dict[str, Any]:
    """``subprocess.Popen`` arguments that start the process as the leader of a group of its own.

    With ``death_signal`` (Linux) the kernel sends that signal to the child when the thread that
    started it exits."""
    if is_windows():
        return {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", _CREATE_NEW_PROCESS_GROUP)}
    kwargs: dict[str, Any] = {"start_new_session": True}
    if death_signal is not None and has_pdeathsig():
        kwargs["preexec_fn"] = _death_signal_setter(death_signal)
    return kwargs


def _death_signal_setter(sig: int) -> Callable[[], None]:
    def set_in_child() -> None:  # runs in the child between fork and exec
        set_parent_death_signal(sig)
    return set_in_child


def set_parent_death_signal(sig: int) -> bool:
    """Ask Linux to send ``sig`` to this process when its parent (thread) exits. False where it cannot."""
    if not has_pdeathsig():
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)   # the C library already linked into Python
        return int(libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def ask_group_to_stop(pid: int) -> None:
    """The polite request: SIGTERM to the group led by ``pid`` (CTRL_BREAK_EVENT on Windows)."""
    if is_windows():
        try:
            os.kill(pid, getattr(signal, "CTRL_BREAK_EVENT", 1))
        except OSError:
            pass   # no console shared with the group: the forced stop follows after the grace period
        return
    _signal_group(pid, "SIGTERM")


def kill_group(pid: int) -> None:
    """Force: SIGKILL to the group led by ``pid``; on Windows the process tree under ``pid`` is ended."""
    if is_windows():
        try:
            subprocess.run(["taskkill", "/T", "/F", "/PID", str(pid)], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=TASKKILL_TIMEOUT_S,
                           check=False)
        except (OSError, subprocess.SubprocessError):
            pass
        return
    _signal_group(pid, "SIGKILL")


def kill_group_remains(pid: int) -> None:
    """After the leader exited: kill what it left in its group (POSIX; on Windows the tree is gone with it)."""
    if not is_windows():
        _signal_group(pid, "SIGKILL")


def _signal_group(pid: int, name: str) -> None:
    killpg = getattr(os, "killpg", None)
    sig = getattr(signal, name, None)
    if killpg is None or sig is None:
        return
    try:
        killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass   # the group is already gone (or the number now belongs to someone else's group)
