"""Processes that left the server's process group (``setsid``, a double fork): find them and stop them.

A server normally dies with its process group. A ``llama_bin`` wrapper that puts the real server in
a session of its own escapes that: stopping the group leaves it listening. Two ways to find it:

* Linux: the supervisor makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``), so an
  orphan anywhere below it is re-parented to it instead of to init; every process of the server's
  tree stays a descendant of the supervisor (:func:`descendants`), whatever it did with groups;
* everywhere: the port. We told the server which port to use, so whatever still listens there
  once the server stopped, and runs the server's own arguments, is the server that escaped
  (:func:`port_holders`, :func:`is_our_server`).

Stdlib only and nothing OS-specific touched at import (the supervisor imports this module).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..common.redact_secrets import redact_command

_PR_SET_CHILD_SUBREAPER = 36
TOOL_TIMEOUT_S = 5.0        # ps / lsof: a bounded wait
STOP_WAIT_S = 3.0           # SIGTERM → SIGKILL for an escaped process


def become_subreaper() -> bool:
    """Linux: orphans below this process are re-parented to it (not to init). False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


# --------------------------------------------------------------------------- the process table

def _parents_from_proc() -> dict[int, int] | None:
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    parents = {}
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text(errors="replace")
        except OSError:
            continue           # exited meanwhile
        # "pid (comm) state ppid …": comm may hold spaces and parentheses, so split after the last ")".
        fields = stat.rpartition(")")[2].split()
        if len(fields) >= 2 and fields[1].lstrip("-").isdigit():
            parents[int(entry)] = int(fields[1])
    return parents


def _parents_from_ps() -> dict[int, int] | None:
    try:
        out = subprocess.run(["ps", "-A", "-o", "pid=,ppid="], stdin=subprocess.DEVNULL, capture_output=True,
                             timeout=TOOL_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    parents = {}
    for line in out.stdout.decode("ascii", "replace").splitlines():
        words = line.split()
        if len(words) == 2 and words[0].isdigit() and words[1].isdigit():
            parents[int(words[0])] = int(words[1])
    return parents


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (children first), from ``/proc`` on Linux or ``ps`` elsewhere."""
    return below([root])


def below(roots: list[int]) -> list[int]:
    """Every process below any of ``roots`` (children first; the roots themselves only when below another),
    from one reading of the process table."""
    if sys.platform == "win32":
        return []
    parents = _parents_from_proc() if sys.platform.startswith("linux") else _parents_from_ps()
    children: dict[int, list[int]] = {}
    for pid, ppid in (parents or {}).items():
        children.setdefault(ppid, []).append(pid)
    out: list[int] = []
    seen = set(roots)
    queue = [pid for root in roots for pid in children.get(root, ())]
    while queue:
        pid = queue.pop(0)
        if pid in seen:
            continue
        seen.add(pid)
        out.append(pid)
        queue.extend(children.get(pid, ()))
    return out


def process_group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except (OSError, AttributeError):
        return None


def command_args(pid: int, method: str | None = None) -> list[str] | None:
    """The command line of ``pid`` (None if it is gone, a zombie, or cannot be read): ``/proc/PID/cmdline`` on
    Linux, ``ps`` elsewhere (``method``: "proc" or "ps", to choose). ``ps`` gives one string, split on spaces:
    good enough to compare with a command we built ourselves. The one reader of a process's command line."""
    if (method or ("proc" if sys.platform.startswith("linux") else "ps")) == "proc":
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        args = [a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0") if a]
        return args or None
    try:
        out = subprocess.run(["ps", "-ww", "-o", "command=", "-p", str(pid)], stdin=subprocess.DEVNULL,
                             capture_output=True, timeout=TOOL_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout.decode("utf-8", "surrogateescape").strip()
    return text.split() if out.returncode == 0 and text and "<defunct>" not in text else None


def is_our_server(pid: int, command: list[str], *, masked: bool = False) -> bool:
    """Does ``pid`` run ``command``, or ``command``'s arguments under another program name (a wrapper
    that re-executes the real server with the arguments it was given)? ``masked``: ``command`` has its
    secrets masked (as a PID file keeps it), so the process's are masked before comparing."""
    seen = command_args(pid)
    if not seen or not command:
        return False
    if masked:
        seen = redact_command(seen)
    ours, theirs = " ".join(command).split(), " ".join(seen).split()
    if ours == theirs:
        return True
    args = ours[1:]
    return bool(args) and len(theirs) > len(args) and theirs[-len(args):] == args


# --------------------------------------------------------------------------- who listens on a port

def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # sl local_address rem_address st … inode; state 0A is LISTEN
            if len(fields) > 9 and fields[3] == "0A" and fields[1].rpartition(":")[2] == f"{port:04X}":
                inodes.add(fields[9])
    return inodes


def _holders_from_proc(port: int) -> set[int]:
    inodes = _listening_inodes(port)
    if not inodes:
        return set()
    wanted = {f"socket:[{inode}]" for inode in inodes}
    holders = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue           # gone, or not ours to look at
        for fd in fds:
            try:
                if os.readlink(f"/proc/{entry}/fd/{fd}") in wanted:
                    holders.add(int(entry))
                    break
            except OSError:
                continue
    return holders


def _holders_from_lsof(port: int) -> set[int]:
    try:
        out = subprocess.run(["lsof", "-nP", "-t", f"-iTCP:{port}", "-sTCP:LISTEN"], stdin=subprocess.DEVNULL,
                             capture_output=True, timeout=TOOL_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return set()
    return {int(w) for w in out.stdout.decode("ascii", "replace").split() if w.isdigit()}


def port_holders(port: int) -> set[int]:
    """The processes listening on TCP ``port`` (any address) that we can see; empty where we cannot tell."""
    if not 0 < port < 65536 or sys.platform == "win32":
        return set()
    return _holders_from_proc(port) if sys.platform.startswith("linux") else _holders_from_lsof(port)


# --------------------------------------------------------------------------- stopping

def _gone(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)      # our child (an orphan re-parented to us): reap it
        if done == pid:
            return True
    except ChildProcessError:
        pass
    except OSError:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    # A zombie that is not ours to reap has stopped running: /proc says so on Linux.
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def stop_processes(pids: list[int], wait_s: float = STOP_WAIT_S) -> list[int]:
    """SIGTERM each of ``pids``, SIGKILL what still runs after ``wait_s``; reap our own children.
    Returns the pids that were still running when asked to stop."""
    if sys.platform == "win32":
        return []
    asked = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
            asked.append(pid)
        except OSError:
            pass
    deadline, delay = time.monotonic() + wait_s, 0.01
    while asked and not all(_gone(p) for p in asked) and time.monotonic() < deadline:
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
    for pid in asked:
        if not _gone(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    deadline = time.monotonic() + wait_s
    while asked and not all(_gone(p) for p in asked) and time.monotonic() < deadline:
        time.sleep(0.02)
    return asked


def describe(pids: list[int]) -> str:
    """``pid 123 (llama-server --port 8080 …)``, for a log line."""
    parts = []
    for pid in pids:
        args = command_args(pid)
        text = " ".join(redact_command(args))[:160] if args else "?"
        parts.append(f"pid {pid} ({text})")
    return ", ".join(parts)
