"""The lifetime supervisor: a tiny process between draftbench and each server it starts.

``python -m draftbench.lifetime.supervisor [options] -- SERVER COMMAND...`` (started by
:class:`draftbench.lifetime.process.ManagedProcess`, never by hand) starts the server as the leader of a
process group of its own and makes sure that group does not outlive draftbench:

* its stdin is a pipe whose only writer is draftbench. When the pipe closes — draftbench exited,
  crashed or was killed with SIGKILL, on any OS — or draftbench writes ``stop GRACE``, the server's
  group is asked to stop (SIGTERM; CTRL_BREAK_EVENT on Windows) and killed after the grace period;
* on POSIX it also notices its parent PID changing (belt and braces), and on Linux with
  ``--kill-with-parent`` the kernel signals it (``PR_SET_PDEATHSIG``) and kills the server if the
  supervisor itself is killed;
* on Linux it is a child subreaper, so a process that left the server's group (``setsid``, a
  double fork) is still below it; when the server exits, whatever it left behind — in its group or
  escaped from it — is stopped (see :mod:`draftbench.lifetime.escaped`), and the supervisor exits the way
  the server did (same exit code, or the same fatal signal), so draftbench reports the *server's*
  exit status;
* the server's stdout and stderr go to the supervisor's stderr (draftbench's log file) — through a pipe
  and :func:`copy_masked` when its command holds a secret (``--api-key K``), so that a server that
  echoes its arguments (vLLM does) never leaves the key in the log.

The first line on stdout is the handshake: ``started PID`` or ``failed {json}`` (why the server could
not be started). Stdlib only, so it starts in a few tens of milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NoReturn

from ..common.files import write_all
from ..common.redact_secrets import MASK, secret_values
from . import escaped, groups

DEFAULT_GRACE_S = 3.0
PARENT_POLL_S = 0.5
TERMINATE_WAIT_S = 5.0     # after the group kill, before the last resort (the server process alone)
# After the server exited, what it left in its group may still be finishing: Python's multiprocessing
# resource tracker (vLLM's) ignores SIGTERM and unlinks the shared memory of the dead processes once they are
# all gone. Killed at once, it leaves them in /dev/shm (seen: vLLM 0.32.0, ~400 MB per server).
REMAINS_WAIT_S = 2.0
EXIT_CANNOT_START = 127
SUBREAPER_ENV = "DRAFTBENCH_SUBREAPER"   # "0": not a subreaper (tests the port fallback that other OSes use)
COPY_CHUNK = 1 << 16          # what one read of the server's output takes, and the longest line kept whole
COPY_DRAIN_S = 5.0            # after the server exited, for the rest of its output to reach the log


def copy_masked(source: int, dest: int, secrets: list[bytes]) -> None:
    """Copy ``source`` to ``dest`` until end of file, every secret replaced by ``***`` as it is written.

    Whole lines go out as soon as they arrive; a line longer than :data:`COPY_CHUNK` is cut, keeping the
    bytes a secret could straddle the cut with, so memory stays bounded and no secret slips through a cut."""
    keep = max(len(s) for s in secrets) - 1
    pending = b""
    while True:
        try:
            chunk = os.read(source, COPY_CHUNK)
        except OSError:
            chunk = b""
        if not chunk:
            break
        pending = _mask(pending + chunk, secrets)
        cut = pending.rfind(b"\n") + 1
        if cut == 0 and len(pending) > COPY_CHUNK:
            cut = len(pending) - keep
        if cut:
            _write_all(dest, pending[:cut])
            pending = pending[cut:]
    if pending:
        _write_all(dest, _mask(pending, secrets))


def _mask(data: bytes, secrets: list[bytes]) -> bytes:
    for secret in secrets:       # longest first (secret_values' order): a key and its comma-separated parts
        data = data.replace(secret, MASK.encode())
    return data


def _write_all(fd: int, data: bytes) -> None:
    try:
        write_all(fd, data)
    except OSError:
        pass      # the log is gone (a full disk): the server runs on, its output dropped


class Supervisor:
    def __init__(self, command: list[str], *, grace_s: float, parent_pid: int, pid_file: str | None,
                 kill_with_parent: bool):
        self.command = command
        self.grace_s = grace_s
        self.parent_pid = parent_pid
        self.pid_file = pid_file
        self.kill_with_parent = kill_with_parent
        self.stop_requested = threading.Event()
        self.server_exited = threading.Event()
        self.stop_reason = ""
        self.server: subprocess.Popen | None = None
        self.outside: list[int] = []     # processes of the server's tree outside its group, seen at the stop

    # ------------------------------------------------------------------ requests to stop
    def request_stop(self, reason: str, grace_s: float | None = None) -> None:
        if self.stop_requested.is_set():
            return
        self.stop_reason = reason
        if grace_s is not None:
            self.grace_s = grace_s
        self.stop_requested.set()

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.request_stop(f"the supervisor got signal {signum} (draftbench is gone or is being stopped)")

    def _install_signal_handlers(self) -> None:
        # Ctrl-C (and Ctrl-Break) are draftbench's to handle: it tells us to stop through the pipe.
        # A handler that does nothing, not SIG_IGN: an ignored signal would stay ignored in the server.
        for name in ("SIGINT", "SIGBREAK"):
            sig = getattr(signal, name, None)
            if sig is not None:
                signal.signal(sig, _ignore)
        if groups.is_windows():
            return
        for name in ("SIGTERM", "SIGHUP"):   # SIGTERM is also the parent-death signal
            sig = getattr(signal, name, None)
            if sig is not None:
                signal.signal(sig, self._on_signal)

    def _watch_lifeline(self) -> None:
        """Read draftbench's pipe: ``stop GRACE`` or end of file (draftbench is gone)."""
        stream = sys.stdin.buffer
        while True:
            try:
                line = stream.readline()
            except (OSError, ValueError):
                line = b""
            if not line:
                self.request_stop("draftbench is gone (its pipe closed)")
                return
            words = line.split()
            if words[:1] == [b"stop"]:
                grace = _float_or_none(words[1]) if len(words) > 1 else None
                self.request_stop("", grace)   # an ordinary stop: nothing to log
                return

    def _watch_parent_pid(self) -> None:
        while not self.server_exited.wait(PARENT_POLL_S):
            if os.getppid() != self.parent_pid:
                self.request_stop(f"draftbench (pid {self.parent_pid}) is gone")
                return

    def _stop_server_when_asked(self, server: subprocess.Popen) -> None:
        self.stop_requested.wait()
        if self.server_exited.is_set():
            return
        if self.stop_reason:
            _note(f"{self.stop_reason}: stopping the server (pid {server.pid}) and its process group")
        # Seen now, while the server still holds them (without a subreaper they would be lost to init).
        self.outside = [p for p in escaped.descendants(server.pid) if escaped.process_group(p) != server.pid]
        groups.ask_group_to_stop(server.pid)
        if self.server_exited.wait(self.grace_s):
            return
        _note(f"the server (pid {server.pid}) did not stop within {self.grace_s:g} s: killing its process group")
        groups.kill_group(server.pid)
        if not self.server_exited.wait(TERMINATE_WAIT_S):
            try:
                server.kill()
            except OSError:
                pass

    # ------------------------------------------------------------------ the run
    def run(self) -> int:
        self._install_signal_handlers()
        if os.environ.get(SUBREAPER_ENV) != "0":
            escaped.become_subreaper()
        parent_signal = getattr(signal, "SIGTERM", None)
        if self.kill_with_parent and parent_signal is not None and \
                not groups.set_parent_death_signal(parent_signal):
            _note("PR_SET_PDEATHSIG is not available; relying on draftbench's pipe alone")
        if not groups.is_windows() and os.getppid() != self.parent_pid:
            _handshake("failed " + json.dumps({"errno": 0, "message": "draftbench exited before the server started"}))
            return EXIT_CANNOT_START
        death_signal = getattr(signal, "SIGKILL", None) if self.kill_with_parent else None
        secrets = [value.encode("utf-8", "surrogateescape") for value in secret_values(self.command)]
        try:
            server = subprocess.Popen(self.command, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE if secrets else sys.stderr.fileno(),
                                      stderr=subprocess.STDOUT, **groups.new_group_kwargs(death_signal))
        except OSError as exc:
            _handshake("failed " + json.dumps({"errno": exc.errno or 0, "message": exc.strerror or str(exc),
                                               "filename": exc.filename}))
            return EXIT_CANNOT_START
        self.server = server
        copier = None
        if server.stdout is not None:      # its command holds a secret: masked on the way to the log
            copier = threading.Thread(target=copy_masked, args=(server.stdout.fileno(), sys.stderr.fileno(), secrets),
                                      daemon=True)
            copier.start()
        _handshake(f"started {server.pid}")
        watchers = [self._watch_lifeline, lambda: self._stop_server_when_asked(server)]
        if not groups.is_windows():
            watchers.append(self._watch_parent_pid)
        for watcher in watchers:
            threading.Thread(target=watcher, daemon=True).start()
        returncode = server.wait()
        self.server_exited.set()
        _let_group_finish(server.pid, REMAINS_WAIT_S)
        groups.kill_group_remains(server.pid)   # helpers it left behind die with it
        self._stop_escaped(server.pid, returncode)
        if copier is not None:
            copier.join(COPY_DRAIN_S)
        self._remove_pid_file(server.pid)
        return returncode

    def _stop_escaped(self, server_pid: int, returncode: int) -> None:
        """Stop what left the server's group and still runs: below us (re-parented to us as a subreaper,
        or still under a helper), or seen below the server when it was asked to stop."""
        pids = list(dict.fromkeys(self.outside + escaped.descendants(os.getpid())))
        if not pids:
            return
        who = escaped.describe(pids)
        if self.stop_requested.is_set():
            _note(f"{len(pids)} process(es) of the server had left its process group (setsid or a double fork): "
                  f"{who}; stopping them too")
        else:
            _note(f"the server (pid {server_pid}) exited with code {returncode} but left {len(pids)} process(es) "
                  f"running outside its process group: {who}; stopping them. draftbench measures a server that runs "
                  "in the foreground until it is stopped: one that puts itself in the background cannot be "
                  "measured (or stopped) reliably")
        escaped.stop_processes(pids, min(self.grace_s, escaped.STOP_WAIT_S))

    def _remove_pid_file(self, server_pid: int) -> None:
        """Remove our PID file if it still names our server (a later run may own that port now)."""
        if not self.pid_file:
            return
        path = Path(self.pid_file)
        try:
            if json.loads(path.read_text(encoding="utf-8")).get("pid") == server_pid:
                path.unlink()
        except (OSError, ValueError, AttributeError):
            pass


def _let_group_finish(pgid: int, timeout_s: float) -> None:
    """Wait (at most ``timeout_s``) until nothing is left in the group ``pgid``, reaping what was re-parented to
    us meanwhile (a zombie still counts as a member until reaped). POSIX only."""
    if groups.is_windows():
        return
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            return   # the number now belongs to someone else's group
        if time.monotonic() >= deadline:
            return
        time.sleep(0.02)


def _ignore(_signum: int, _frame: object) -> None:
    pass


def _float_or_none(raw: bytes) -> float | None:
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if 0 <= value < 1e6 else None


def _handshake(line: str) -> None:
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        sys.stdout.close()   # nothing more is said: draftbench stops reading
    except OSError:
        pass


def _note(text: str) -> None:
    """One line in the server's log (our stderr is the log file)."""
    try:
        sys.stderr.write(f"[draftbench supervisor] {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def exit_like(returncode: int) -> NoReturn:
    """Exit with the server's status: the same code, or on POSIX death by the same signal."""
    if returncode < 0 and not groups.is_windows():
        sig = -returncode
        try:
            import resource  # no core file of ours for a server that dumped core
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        except (ImportError, ValueError, OSError):
            pass
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass   # SIGKILL and SIGSTOP cannot be caught anyway
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)   # a signal whose default is not to terminate
    os._exit(returncode)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m draftbench.lifetime.supervisor",
                                description="Start a server so that it does not outlive draftbench "
                                            "(used by draftbench itself).")
    p.add_argument("--grace", type=float, default=DEFAULT_GRACE_S, help="seconds between the stop request and the kill")
    p.add_argument("--parent-pid", type=int, required=True, help="draftbench's pid")
    p.add_argument("--pid-file", default=None, help="PID file to remove once the server is gone")
    p.add_argument("--kill-with-parent", action="store_true", help="Linux: PR_SET_PDEATHSIG on the supervisor and server")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the server command")
    args = p.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        p.error("no server command given (after --)")
    return args


def main(argv: list[str] | None = None) -> NoReturn:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    supervisor = Supervisor(args.command, grace_s=args.grace, parent_pid=args.parent_pid, pid_file=args.pid_file,
                            kill_with_parent=args.kill_with_parent)
    exit_like(supervisor.run())


if __name__ == "__main__":
    main()
