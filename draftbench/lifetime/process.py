"""Start server processes so that none outlives us, and stop them reliably.

* Every server is started through the lifetime supervisor (:mod:`draftbench.lifetime.supervisor`), a tiny
  process that starts the server as the leader of a process group of its own and stops that whole
  group (SIGTERM, then SIGKILL after a grace period; CTRL_BREAK_EVENT, then ``taskkill /T /F`` on
  Windows) when we ask — or when we are gone, however we died: it holds a pipe whose only writer is
  us, and the OS closes that pipe when we exit, crash or are killed with SIGKILL.
* The lifetime guard (``DRAFTBENCH_LIFETIME_GUARD``): ``pdeathsig``, the default on Linux, adds
  the kernel's parent-death signal (``PR_SET_PDEATHSIG``) to the supervisor and the server;
  ``portable``, the default everywhere else, relies on the pipe (and on POSIX on the parent PID).
* Every live process is registered; an ``atexit`` hook and the signal handlers stop them.
* A PID file per port (:mod:`draftbench.lifetime.pid_files`) lets the next run notice a server that survived
  a crash anyway (e.g. supervisor and draftbench killed together under the portable guard).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..common.errors import ServerError, ServerErrorKind, UsageError
from ..common.files import NotOurFile, open_for_append, write_all
from ..common.redact_secrets import command_line, redact_text
from . import escaped, groups
from . import pid_files as pidfiles
from .supervisor import DEFAULT_GRACE_S

GUARD_ENV = "DRAFTBENCH_LIFETIME_GUARD"
GUARDS = ("pdeathsig", "portable")
HANDSHAKE_TIMEOUT_S = 60.0      # the supervisor is a fresh Python: slow on a loaded machine, never this slow
SUPERVISOR_SLACK_S = 10.0       # beyond the grace period, for the supervisor to kill the group and exit
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
# Runs the supervisor from this very copy of draftbench, wherever the server's working folder is,
# without touching the environment the server inherits (PYTHONPATH).
_BOOTSTRAP = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
              "from draftbench.lifetime.supervisor import main; main()")

_live: dict[int, ManagedProcess] = {}
_lock = threading.Lock()


def lifetime_guard() -> str:
    """The guard in use: ``$DRAFTBENCH_LIFETIME_GUARD``, else ``pdeathsig`` on Linux and ``portable`` elsewhere."""
    raw = os.environ.get(GUARD_ENV, "").strip().lower()
    if not raw:
        return "pdeathsig" if groups.has_pdeathsig() else "portable"
    if raw not in GUARDS:
        raise UsageError(f"{GUARD_ENV}={os.environ[GUARD_ENV]!r} is not a lifetime guard",
                         f"set it to pdeathsig (Linux) or portable, or unset it for the default "
                         f"({'pdeathsig' if groups.has_pdeathsig() else 'portable'} here)")
    if raw == "pdeathsig" and not groups.has_pdeathsig():
        raise UsageError(f"{GUARD_ENV}=pdeathsig needs Linux (PR_SET_PDEATHSIG); this is {sys.platform}",
                         f"unset {GUARD_ENV} or set it to portable")
    return raw


def prepare_to_start_servers(results: str | os.PathLike | None = None) -> None:
    """Checks before a run starts servers: the guard setting is valid and no leftover server runs.

    ``results`` (a sweep's results file) is recorded in the PID files of the servers started next."""
    lifetime_guard()
    pidfiles.set_results_context(results)
    pidfiles.check_no_leftovers()


def supervisor_command(cmd: list[str], *, guard: str, grace_s: float, pid_file: Path | None) -> list[str]:
    options = ["--grace", f"{grace_s:g}", "--parent-pid", str(os.getpid())]
    if pid_file is not None:
        options += ["--pid-file", str(pid_file)]
    if guard == "pdeathsig":
        options.append("--kill-with-parent")
    return [sys.executable, "-c", _BOOTSTRAP, _PACKAGE_PARENT, *options, "--", *cmd]


class ManagedProcess:
    """A server in its own process group, writing stdout+stderr to ``log_path``, that cannot outlive us.

    ``pid`` is the server's; ``returncode`` is the server's exit status (negative: killed by that
    signal) — the supervisor exits the way the server did. ``popen`` is the supervisor's process.
    ``port`` (optional) names the PID file that lets a later run notice this server if it is left over."""

    def __init__(self, cmd: list[str], log_path: str | os.PathLike, env: dict | None = None, *,
                 port: int | None = None, grace_s: float = DEFAULT_GRACE_S):
        self.cmd = [str(c) for c in cmd]
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.guard = lifetime_guard()
        self.port = port
        self._pid_file = pidfiles.pid_file_for_port(port) if port else None
        self.supervisor_cmd = supervisor_command(self.cmd, guard=self.guard, grace_s=grace_s, pid_file=self._pid_file)
        log = open_log(self.log_path)
        try:
            write_all(log, ("$ " + command_line(self.cmd) + "\n").encode())   # secrets masked
            self.popen = subprocess.Popen(self.supervisor_cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=log, env=env, **groups.new_group_kwargs())
        finally:
            os.close(log)
        try:
            self.pid = self._handshake()
        except BaseException:
            self._abandon()
            raise
        self.started_at = time.perf_counter()
        with _lock:
            _live[self.pid] = self
        if port:
            self._pid_file = pidfiles.record(port, self.pid, self.cmd, self.popen.pid, self.supervisor_cmd)

    def _handshake(self) -> int:
        """The supervisor's first line: ``started PID``, or why the server could not be started."""
        box: list[bytes] = []
        stdout = self.popen.stdout
        assert stdout is not None
        reader = threading.Thread(target=lambda: box.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(HANDSHAKE_TIMEOUT_S)
        line = box[0].decode("utf-8", "replace").strip() if box else None
        if line is None:
            stdout.close()
            raise ServerError(f"the draftbench supervisor did not start the server within {HANDSHAKE_TIMEOUT_S:g} s",
                              "the machine may be overloaded; see the log", log_tail=self.log_tail(15),
                              log_path=str(self.log_path))
        stdout.close()
        word, _, rest = line.partition(" ")
        if word == "started" and rest.isdigit():
            return int(rest)
        if word == "failed":
            try:
                why = json.loads(rest)
            except ValueError:
                why = {"message": rest}
            raise OSError(int(why.get("errno") or 0), str(why.get("message")), why.get("filename"))
        self.exited_within(10)
        raise ServerError(f"the draftbench supervisor exited (code {self.popen.returncode}) before starting the server",
                          "see the log lines below", log_tail=self.log_tail(15), log_path=str(self.log_path))

    def _abandon(self) -> None:
        """The start failed or was interrupted: make sure nothing keeps running."""
        self._close_lifeline()
        try:
            self.popen.wait(timeout=DEFAULT_GRACE_S + SUPERVISOR_SLACK_S)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()

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

    def wait(self) -> int:
        """Block until the server exits; Ctrl-C interrupts it on every OS."""
        if groups.is_windows():
            # A wait without a time-out cannot be interrupted by Ctrl-C on Windows.
            while not self.exited_within(0.5):
                pass
            return self.popen.returncode
        return self.popen.wait()

    def stop(self, grace_s: float = DEFAULT_GRACE_S) -> int | None:
        """Ask the group to stop, kill it after ``grace_s``; return the server's exit status. Idempotent."""
        if self.popen.poll() is None:
            self._send(f"stop {grace_s:g}\n")
            self._close_lifeline()
            try:
                self.popen.wait(timeout=grace_s + SUPERVISOR_SLACK_S)
            except subprocess.TimeoutExpired:
                # The supervisor is stuck (or stopped): do its job from here.
                groups.kill_group(self.pid)
                self.popen.kill()
                self.popen.wait(timeout=10)
        self._close_lifeline()
        # Children that ignored SIGTERM die with the group (the supervisor did this; it may have been killed).
        groups.kill_group_remains(self.pid)
        self._stop_port_holders()
        with _lock:
            _live.pop(self.pid, None)
        pidfiles.forget(self._pid_file, self.pid)
        return self.popen.returncode

    def _stop_port_holders(self) -> None:
        """The fallback where the supervisor cannot be a subreaper (or was killed): whatever still listens
        on the port we gave the server, running the server's own arguments, escaped its group — stop it."""
        if not self.port:
            return
        ours = [pid for pid in escaped.port_holders(self.port) if escaped.is_our_server(pid, self.cmd)]
        if not ours:
            return
        self._log_line(f"[draftbench] {escaped.describe(ours)} still listened on port {self.port} after the server "
                       "stopped (it had left its process group): stopping it")
        escaped.stop_processes(ours)

    def _log_line(self, text: str) -> None:
        try:
            fd = open_for_append(self.log_path)
        except OSError:
            return
        try:
            write_all(fd, (text + "\n").encode("utf-8", errors="replace"))
        except OSError:
            pass
        finally:
            os.close(fd)

    def _send(self, text: str) -> None:
        stdin = self.popen.stdin
        try:
            if stdin is not None and not stdin.closed:
                stdin.write(text.encode())
                stdin.flush()
        except (OSError, ValueError):
            pass   # the supervisor is gone already

    def _close_lifeline(self) -> None:
        stdin = self.popen.stdin
        try:
            if stdin is not None and not stdin.closed:
                stdin.close()
        except OSError:
            pass

    def log_tail(self, lines: int = 25) -> str:
        return redact_text(tail_file(self.log_path, lines), self.cmd)   # some servers echo their --api-key


def open_log(path: Path) -> int:
    """Our server log, opened to append: never through a symlink planted there, never a FIFO or another
    user's file (see :func:`draftbench.common.files.open_for_append`); refused with a named error."""
    try:
        return open_for_append(path)
    except NotOurFile as exc:
        raise ServerError(f"cannot write the server log {path}: {exc.strerror}",
                          "remove it (draftbench writes its server logs itself; a link or pipe there would send "
                          "them elsewhere), then run again", kind=ServerErrorKind.SERVER) from None


def tail_file(path: str | os.PathLike, lines: int = 25) -> str:
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)),
                       "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


LOG_READ_MAX_BYTES = 64 * 2**20   # a server's start-up lines come first; a log past this is not read for them


def read_log(path: str | os.PathLike, offset: int) -> str:
    """A server's log written since ``offset`` (a log file is appended to by every server on that port)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)     # bounded: a server printing without end cannot fill our memory
            return fh.read(LOG_READ_MAX_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


def live_pids() -> list[int]:
    """Every process we started that still runs: each server and its supervisor (machine_load counts
    their CPU time as ours)."""
    with _lock:
        procs = list(_live.values())
    return [pid for proc in procs for pid in (proc.popen.pid, proc.pid)]


def stop_all() -> None:
    with _lock:
        procs = list(_live.values())
    for proc in procs:
        try:
            proc.stop(grace_s=DEFAULT_GRACE_S)
        except Exception:
            pass


atexit.register(stop_all)


class Terminated(KeyboardInterrupt):
    """SIGTERM/SIGHUP (SIGBREAK on Windows) turned into an exception so that ``finally`` blocks run."""

    def __init__(self, signum: int):
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        super().__init__(name)
        self.signum = signum


def install_signal_handlers() -> None:
    """Make SIGTERM and SIGHUP (Ctrl-Break on Windows) behave like Ctrl-C (cleanup runs, results are kept)."""
    def handler(signum, _frame):
        raise Terminated(signum)
    try:
        # A job started in the background by a non-interactive shell inherits SIGINT = ignored;
        # restore Ctrl-C so `kill -INT` always works.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    except (ValueError, OSError):
        pass
    for name in ("SIGTERM", "SIGHUP", "SIGBREAK"):   # SIGHUP: POSIX only; SIGBREAK: Windows only
        sig = getattr(signal, name, None)
        if sig is None:
            continue
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
