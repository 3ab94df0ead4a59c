"""One sweep per results file: an OS lock on a sidecar file, held for the whole run.

The lock is the operating system's (``flock`` on POSIX, ``msvcrt.locking`` on Windows) on
``<results stem>.lock`` (see :func:`output_paths.lock_paths_for`): it is released when the
process ends however it ends (even SIGKILL or a power cut), so there is never a stale lock to
clean up by hand. The sidecar also holds the
holder's process id, for the message a second sweep gets. The file itself is left in place:
deleting it on exit would let two sweeps lock two different files of the same name.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..common.errors import DraftbenchError
from .output_paths import lock_paths_for

# Windows locks byte ranges and forbids reading locked bytes: lock one byte far past the pid.
_WINDOWS_LOCK_OFFSET = 1 << 20


class ResultsInUseError(DraftbenchError):
    """Another process holds the lock of this results file."""

    exit_code = 1


def try_lock(fd: int) -> bool:
    """Take an exclusive lock on the open file ``fd`` without waiting; False if someone else holds it."""
    if sys.platform == "win32":
        import msvcrt
        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)    # type: ignore[attr-defined]
        except OSError:
            return False
        finally:
            os.lseek(fd, 0, os.SEEK_SET)
        return True
    import fcntl
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _holder(lock: Path) -> str:
    try:
        text = lock.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        text = ""
    return f"process {text}" if text.isdigit() else "another process"


def _take(lock: Path, results: Path) -> int:
    """Open and lock one lock file; return its descriptor (closing it releases the lock)."""
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise DraftbenchError(f"cannot create the lock file {lock}: {exc.strerror or exc}",
                              "check the folder's permissions, or pass another --results path") from None
    if not try_lock(fd):
        os.close(fd)
        raise ResultsInUseError(f"{results} is in use by {_holder(lock)} (another sweep writing to it or to its "
                                "logs folder); nothing was started or written",
                                "wait for that sweep to finish (or stop it), or pass another --results path")
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


@contextmanager
def results_lock(results: Path) -> Iterator[list[Path]]:
    """Hold the locks of ``results`` (see :func:`output_paths.lock_paths_for`) for the ``with`` block;
    raise :class:`ResultsInUseError` at once if another sweep holds one. Yields the lock files' paths.
    Locks are only ever tried, never waited for, so two sweeps cannot deadlock."""
    locks = lock_paths_for(results)
    held: list[int] = []
    try:
        for lock in locks:
            held.append(_take(lock, results))
        yield locks
    finally:
        for fd in held:
            os.close(fd)     # releases that lock
