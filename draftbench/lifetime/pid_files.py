"""PID files for the servers draftbench starts, so that a server left over from a crashed run is noticed.

One small JSON file per port in ``<cache>/run/`` (``port-8080.json``) holds the server's pid,
start time and command line (secrets masked; a SHA-256 of the exact command line identifies it),
its supervisor's pid and command-line digest, and the results file of the sweep that started it. Before servers are started, :func:`check_no_leftovers` reads them all:

* the server is gone, or its pid now runs another command (pid reuse): the file is stale and is
  removed silently;
* the server runs and its supervisor runs too: a live draftbench run guards it — not a leftover;
* the server is gone, but a process running its arguments still listens on its port: it escaped
  the server's process group (a wrapper that double-forks); it stands in for the server below;
* the server runs but its supervisor is gone: nothing will ever stop it. That is a leftover, and
  starting another server beside it (tens of GB of a 70B model, a busy GPU) would measure a machine
  that is not idle, so it is a clear error naming the pid and the command that stops it.

A cache that cannot be written never stops a run: the PID file is then simply not written.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..common.errors import ServerError, ServerErrorKind
from ..common.files import atomic_write_text, cache_dir
from ..common.redact_secrets import redact_command
from . import escaped

SCHEMA_VERSION = 2
PS_TIMEOUT_S = 5.0

_context: dict[str, str | None] = {"results": None}


@dataclass(frozen=True)
class ServerRecord:
    """What one PID file says about one server."""

    port: int
    pid: int
    command: tuple[str, ...]            # secrets masked: for people, not for matching
    command_digest: str                 # SHA-256 of the exact command line: identifies the process
    started: str                        # local time, for people
    supervisor_pid: int
    supervisor_digest: str
    supervisor_executable: str          # its program (Windows can only compare that)
    owner_pid: int                      # the draftbench process that started it
    results: str | None = None          # the sweep's results file, when a sweep started it
    path: Path | None = None            # the PID file itself

    @property
    def name(self) -> str:
        name = Path(self.command[0]).name if self.command else "server"
        return name[:-4] if name.lower().endswith(".exe") else name

    @property
    def stop_command(self) -> str:
        return f"taskkill /PID {self.pid} /T /F" if sys.platform == "win32" else f"kill {self.pid}"

    def describe(self) -> str:
        where = f", results {self.results}" if self.results else ""
        return f"{self.name} (pid {self.pid}, port {self.port}, started {self.started}{where})"


class LeftoverServerError(ServerError):
    def __init__(self, leftovers: list[ServerRecord]):
        self.leftovers = list(leftovers)
        if len(leftovers) == 1:
            one = leftovers[0]
            message = (f"a {one.name} from an earlier draftbench run (pid {one.pid}, started {one.started}"
                       + (f", results {one.results}" if one.results else "") + f") still holds port {one.port}; "
                       "nothing will stop it, and a benchmark beside it would measure a busy machine")
            fix = f"stop it with `{one.stop_command}`, then run the same command again"
        else:
            message = (f"{len(leftovers)} servers from earlier draftbench runs are still running: "
                       + "; ".join(r.describe() for r in leftovers)
                       + "; nothing will stop them, and a benchmark beside them would measure a busy machine")
            fix = "stop them with " + ", ".join(f"`{r.stop_command}`" for r in leftovers) + \
                ", then run the same command again"
        super().__init__(message, fix, kind=ServerErrorKind.LEFTOVER)


def run_dir() -> Path:
    return cache_dir() / "run"


def pid_file_for_port(port: int) -> Path:
    return run_dir() / f"port-{int(port)}.json"


def set_results_context(results: str | os.PathLike | None) -> None:
    """Name the results file in the PID files of the servers started from now on (a sweep calls this)."""
    _context["results"] = os.fspath(results) if results is not None else None


def record(port: int, pid: int, command: list[str], supervisor_pid: int, supervisor_command: list[str]) -> Path | None:
    """Write the PID file for a server just started. Returns its path, or None if it was not written: the
    cache is not writable, or the file names another server that still runs (ours will fail to bind)."""
    path = pid_file_for_port(port)
    existing = load(path)
    if existing is not None and existing.pid != pid and _runs(existing.pid, existing.command_digest, existing.command):
        return None
    data = {"schema_version": SCHEMA_VERSION, "port": int(port), "pid": pid, "command": redact_command(command),
            "command_digest": command_digest(command), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "supervisor_pid": supervisor_pid, "supervisor_digest": command_digest(supervisor_command),
            "supervisor_executable": supervisor_command[0],
            "owner_pid": os.getpid(), "results": _context["results"]}
    try:
        atomic_write_text(path, json.dumps(data, indent=1) + "\n")
    except OSError:
        return None
    return path


def forget(path: Path | None, pid: int) -> None:
    """Remove a PID file if it still names ``pid`` (another run may have taken the port since)."""
    if path is None:
        return
    existing = load(path)
    if existing is not None and existing.pid == pid:
        _unlink(path)


def load(path: Path) -> ServerRecord | None:
    """The record in ``path``; None if it is missing or not a PID file of ours (an older one included)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return ServerRecord(port=int(data["port"]), pid=int(data["pid"]), command=tuple(map(str, data["command"])),
                            command_digest=str(data["command_digest"]), started=str(data["started"]),
                            supervisor_pid=int(data["supervisor_pid"]), supervisor_digest=str(data["supervisor_digest"]),
                            supervisor_executable=str(data["supervisor_executable"]),
                            owner_pid=int(data["owner_pid"]),
                            results=str(data["results"]) if data.get("results") is not None else None, path=path)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def find_leftovers() -> list[ServerRecord]:
    """Servers from earlier runs that still run with nobody to stop them. Stale PID files are removed."""
    try:
        files = sorted(run_dir().glob("port-*.json"))
    except OSError:
        return []
    leftovers = []
    for path in files:
        rec = load(path)
        if rec is not None and not _runs(rec.pid, rec.command_digest, rec.command):
            holder = escaped_holder(rec)
            rec = replace(rec, pid=holder) if holder is not None else None
        if rec is None:
            _unlink(path)    # malformed, the server is gone, or its pid was reused by another command
            continue
        if _runs(rec.supervisor_pid, rec.supervisor_digest, (rec.supervisor_executable,)):
            continue         # a live draftbench run guards it
        leftovers.append(rec)
    return leftovers


def escaped_holder(rec: ServerRecord) -> int | None:
    """A process that listens on the record's port running the server's (masked) arguments: the server
    escaped its process group, and outlived the server process itself."""
    for pid in sorted(escaped.port_holders(rec.port)):
        if escaped.is_our_server(pid, list(rec.command), masked=True):
            return pid
    return None


def check_no_leftovers() -> None:
    """Raise :class:`LeftoverServerError` if a server from an earlier crashed run still runs."""
    leftovers = find_leftovers()
    if leftovers:
        raise LeftoverServerError(leftovers)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


# --------------------------------------------------------------------------- is pid N still that command?

def command_digest(args: tuple[str, ...] | list[str]) -> str:
    """What identifies a command line without keeping it (it may hold secrets): SHA-256 of its words."""
    return hashlib.sha256(_normalise(args).encode("utf-8", "surrogateescape")).hexdigest()


def is_running(pid: int, command: tuple[str, ...] | list[str], *, method: str | None = None) -> bool:
    """True if process ``pid`` exists and runs ``command``."""
    return bool(command) and _runs(pid, command_digest(command), tuple(command), method=method)


def _runs(pid: int, digest: str, command: tuple[str, ...] | None, *, method: str | None = None) -> bool:
    """Does process ``pid`` run the command line with this digest?

    Linux reads ``/proc/PID/cmdline``; macOS and other POSIX systems ask ``ps``; Windows compares the
    executable's name from ``tasklist`` with ``command[0]`` (the full command line needs WMI), and
    without a command to compare with it cannot tell, so says no. A zombie runs nothing."""
    if pid <= 0:
        return False
    method = method or ("tasklist" if sys.platform == "win32" else "proc" if sys.platform.startswith("linux")
                        else "ps")
    if method == "tasklist":
        image = _image_from_tasklist(pid)
        if image is None or not command:
            return False
        want = Path(command[0]).name.lower()
        return image.lower() in (want, want + ".exe")
    seen = escaped.command_args(pid, method)
    return seen is not None and hashlib.sha256(_normalise(seen).encode("utf-8", "surrogateescape")).hexdigest() == digest


def _normalise(args: tuple[str, ...] | list[str]) -> str:
    return " ".join(" ".join(args).split())


def _image_from_tasklist(pid: int) -> str | None:
    try:
        out = subprocess.run(["tasklist", "/FI", f"PID eq {pid}", "/FO", "CSV", "/NH"], stdin=subprocess.DEVNULL,
                             capture_output=True, timeout=PS_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    line = out.stdout.decode("utf-8", "replace").strip().splitlines()
    if not line or not line[0].startswith('"'):
        return None              # "INFO: No tasks are running which match the specified criteria."
    fields = [f.strip('"') for f in line[0].split('","')]
    return fields[0] if len(fields) > 1 and fields[1] == str(pid) else None
