"""One sweep per results file: an OS lock held for the whole run, on a file of our own.

The lock is the operating system's (``flock`` on POSIX, ``msvcrt.locking`` on Windows): it is
released when the process ends however it ends (even SIGKILL or a power cut), so there is never a
stale lock to clean up by hand. The locked files live in draftbench's cache (``<cache>/locks/``),
named by a hash of what they protect — never beside the results, where ``<stem>.lock`` could be a
user's own file (``--results Cargo.json`` next to ``Cargo.lock``) or a symlink to one. A sweep
writing ``results`` takes two locks: one for the results file itself (its folder's identity and
its name, after resolving symlinks, so every path to one file takes one lock) and one for its logs
folder (so ``x.json`` and ``x.dat``, which share ``x.logs``, exclude each other).

Lock files are created exclusively (``O_EXCL``), opened without following symlinks, must be
regular files owned by this user, and are never truncated: the holder's process id is written
over the first bytes, padded, for the message a second sweep gets. They are left in place
(deleting one on exit would let two sweeps lock two different files of the same name).
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..common.errors import DraftbenchError
from ..common.files import cache_dir
from ..common.reading import read_head
from .output_paths import logs_dir_for

# Windows locks byte ranges and forbids reading locked bytes: lock one byte far past the pid.
_WINDOWS_LOCK_OFFSET = 1 << 20
_PID_WIDTH = 20
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


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


def locks_dir() -> Path:
    return cache_dir() / "locks"


def identity(path: Path) -> str:
    """What names the file or folder at ``path`` whatever the spelling: its real folder's device and inode
    (the folder is created if missing) and its real name (case-folded where file systems ignore case)."""
    real = Path(os.path.realpath(path))
    real.parent.mkdir(parents=True, exist_ok=True)
    st = os.stat(real.parent)
    name = real.name.casefold() if sys.platform in ("darwin", "win32") else real.name
    return f"{st.st_dev}:{st.st_ino}:{name}"


def lock_paths_for(results: Path) -> list[Path]:
    """The lock files a sweep writing ``results`` holds: one for the file, one for its logs folder."""
    keys = (f"results|{identity(results)}", f"logs|{identity(logs_dir_for(results))}")
    return [locks_dir() / f"{hashlib.sha256(key.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}.lock"
            for key in keys]


def _holder(lock: Path) -> str:
    head = read_head(lock, _PID_WIDTH + 1) or b""
    text = head.decode("ascii", "replace").strip()
    return f"process {text}" if text.isdigit() else "another process"


def _open_lock_file(lock: Path) -> int:
    """A descriptor on ``lock``: made new and exclusively, or the existing one if it is our own regular file."""
    folder = lock.parent
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if folder.is_symlink() or not folder.is_dir():
        raise OSError(0, f"{folder} is not a plain folder")
    try:
        return os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    except FileExistsError:
        pass
    fd = os.open(lock, os.O_RDWR | _NOFOLLOW)     # a symlink planted here fails (ELOOP) instead of being followed
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (hasattr(os, "geteuid") and st.st_uid != os.geteuid()):
        os.close(fd)
        raise OSError(0, f"{lock} is not a lock file of this user's")
    return fd


def _take(lock: Path, results: Path) -> int:
    """Open and lock one lock file; return its descriptor (closing it releases the lock)."""
    try:
        fd = _open_lock_file(lock)
    except OSError as exc:
        raise DraftbenchError(f"cannot create the lock file {lock} for {results}: {exc.strerror or exc}",
                              f"check that draftbench's cache folder {cache_dir()} is yours and writable (or set "
                              "DRAFTBENCH_CACHE to another folder)") from None
    if not try_lock(fd):
        os.close(fd)
        raise ResultsInUseError(f"{results} is in use by {_holder(lock)} (another sweep writing to it or to its "
                                "logs folder); nothing was started or written",
                                "wait for that sweep to finish (or stop it), or pass another --results path")
    # Written over the first bytes, padded to a fixed width: nothing is ever truncated.
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, f"{os.getpid():<{_PID_WIDTH}}\n".encode())
    return fd


@contextmanager
def results_lock(results: Path) -> Iterator[list[Path]]:
    """Hold the locks of ``results`` (see :func:`lock_paths_for`) for the ``with`` block; raise
    :class:`ResultsInUseError` at once if another sweep holds one. Yields the lock files' paths.
    Locks are only ever tried, never waited for, so two sweeps cannot deadlock."""
    try:
        locks = lock_paths_for(results)
    except OSError as exc:
        raise DraftbenchError(f"cannot create the folder of {results}: {exc.strerror or exc}",
                              "check the path and the folder's permissions, or pass another --results path") from None
    held: list[int] = []
    try:
        for lock in locks:
            held.append(_take(lock, results))
        yield locks
    finally:
        for fd in held:
            os.close(fd)     # releases that lock
