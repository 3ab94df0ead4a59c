"""Start server processes so that none outlives us, and stop them reliably.

* Each server runs in its own process group (``start_new_session``), so stopping it also
  stops anything it spawned.
* On Linux the child gets ``PR_SET_PDEATHSIG = SIGKILL``: if we are killed outright
  (even with SIGKILL) the kernel kills the server too.
* Every live process is registered; an ``atexit`` hook and the signal handlers stop them.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from .redact import command_line, redact_text

_live: dict[int, ManagedProcess] = {}
_lock = threading.Lock()


def _set_pdeathsig() -> None:  # runs in the child between fork and exec
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:
        pass


class ManagedProcess:
    """A child process in its own group, writing stdout+stderr to ``log_path``."""

    def __init__(self, cmd: list[str], log_path: str | os.PathLike, env: dict | None = None):
        self.cmd = [str(c) for c in cmd]
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab", buffering=0)
        self._log.write(("$ " + command_line(self.cmd) + "\n").encode())   # secrets masked
        preexec = _set_pdeathsig if sys.platform.startswith("linux") else None
        try:
            self.popen = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=self._log,
                                          stderr=subprocess.STDOUT, start_new_session=True,
                                          preexec_fn=preexec, env=env)
        except OSError:
            self._log.close()
            raise
        self.pid = self.popen.pid
        self.started_at = time.perf_counter()
        with _lock:
            _live[self.pid] = self

    def alive(self) -> bool:
        return self.popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def exited_within(self, timeout_s: float) -> bool:
        """True if the process has exited or exits within ``timeout_s``.

        A killed server's sockets close a moment before its exit status can be reaped, so a
        broken connection must wait briefly before concluding the server is still alive."""
        try:
            self.popen.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False

    def stop(self, grace_s: float = 3.0) -> int | None:
        """SIGTERM the group, wait up to ``grace_s``, then SIGKILL it. Idempotent."""
        if self.popen.poll() is None:
            _signal_group(self.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                _signal_group(self.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)
        # Children that ignored SIGTERM die with the group.
        _signal_group(self.pid, signal.SIGKILL)
        with _lock:
            _live.pop(self.pid, None)
        if not self._log.closed:
            self._log.close()
        return self.popen.returncode

    def log_tail(self, lines: int = 25) -> str:
        return redact_text(tail_file(self.log_path, lines), self.cmd)   # some servers echo their --api-key


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def tail_file(path: str | os.PathLike, lines: int = 25) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def stop_all() -> None:
    with _lock:
        procs = list(_live.values())
    for proc in procs:
        try:
            proc.stop(grace_s=3.0)
        except Exception:
            pass


atexit.register(stop_all)


class Terminated(KeyboardInterrupt):
    """SIGTERM/SIGHUP turned into an exception so that ``finally`` blocks run."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def install_signal_handlers() -> None:
    """Make SIGTERM and SIGHUP behave like Ctrl-C (cleanup runs, results are kept)."""
    def handler(signum, _frame):
        raise Terminated(signum)
    try:
        # A job started in the background by a non-interactive shell inherits SIGINT = ignored;
        # restore Ctrl-C so `kill -INT` always works.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    except (ValueError, OSError):
        pass
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread, or unsupported
            pass


# --------------------------------------------------------------------------- ports

def port_is_free(host: str, port: int) -> bool:
    """True when nothing listens on host:port and we could bind it (as the server will)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # Servers set SO_REUSEADDR, so a socket in TIME_WAIT does not block them: match that.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    # Binding can succeed on some systems while another program listens on a wildcard
    # address; a connection attempt catches that.
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, port)) != 0


def free_port(host: str = "127.0.0.1") -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def wait_port_free(host: str, port: int, timeout_s: float = 10.0) -> bool:
    """Poll until host:port is free (after our previous server exited)."""
    deadline = time.monotonic() + timeout_s
    delay = 0.02
    while True:
        if port_is_free(host, port):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.25)
