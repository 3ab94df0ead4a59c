"""Reading a file a user named (or that we found in a folder) without trusting what it is.

Every read is bounded in time and bytes: the file is opened with ``O_NONBLOCK`` (a named pipe
with no writer opens at once instead of waiting for ever), checked with ``fstat`` on the open
descriptor (no race between a check and the read), refused unless it is a regular file (a FIFO,
``/dev/zero``, a folder, a socket), refused when larger than its kind's cap, and then read at most
cap + 1 bytes (a file still growing, or a ``/proc`` file whose size says 0, cannot go past it).
Each cap has an environment variable to raise it. A symlink loop, a missing file and a permission
problem each get their own message. gzip data is recognised by its magic bytes and can be
decompressed under the same cap (:func:`gunzip_limited`).
"""

from __future__ import annotations

import errno
import os
import stat
import zlib
from dataclasses import dataclass

MB = 1_000_000
GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 20
# O_NONBLOCK: opening a FIFO with no writer returns at once; O_NOCTTY: a terminal device never becomes ours
READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)


@dataclass(frozen=True)
class ReadLimit:
    """The cap on one kind of input file, and the environment variable that raises it."""

    what: str            # "results file", "config", "prompt file"
    default_mb: int
    env_var: str

    def max_bytes(self) -> int:
        raw = os.environ.get(self.env_var, "").strip()
        try:
            value = float(raw) if raw else float(self.default_mb)
        except ValueError:
            value = float(self.default_mb)
        return int(value * MB) if value > 0 and value == value and value != float("inf") else self.default_mb * MB

    def raise_hint(self, needed_bytes: int | None = None) -> str:
        suggest = max(self.default_mb * 4, -(-(needed_bytes or 0) // MB) * 2)
        return f"set {self.env_var}={suggest} (megabytes) to raise the cap, if this really is the file you meant"


RESULTS_LIMIT = ReadLimit("results file", 512, "DRAFTBENCH_MAX_RESULTS_MB")
CONFIG_LIMIT = ReadLimit("config", 16, "DRAFTBENCH_MAX_CONFIG_MB")
PROMPTS_LIMIT = ReadLimit("prompt file", 64, "DRAFTBENCH_MAX_PROMPTS_MB")
SMALL_LIMIT = ReadLimit("file", 1, "DRAFTBENCH_MAX_SMALL_FILE_MB")     # API key files, our own cache files


class UnreadableFile(Exception):
    """Why a file was not read: ``message`` completes "<path> …", ``fix`` says what to do."""

    def __init__(self, message: str, fix: str, *, missing: bool = False):
        super().__init__(message)
        self.message = message
        self.fix = fix
        self.missing = missing


def kind_of(mode: int) -> str | None:
    """What a file that is not a regular file is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_problem(exc: OSError, what: str) -> UnreadableFile:
    if exc.errno == errno.ENOENT:
        return UnreadableFile("does not exist", "check the path", missing=True)
    if exc.errno == errno.ELOOP:
        return UnreadableFile("is a symbolic link that loops (it points, directly or through other links, back to "
                              "itself)", "point the link at the real file (ls -l shows where it points), or give "
                              "the file's own path")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return UnreadableFile("cannot be read: permission denied", f"make the {what} readable (chmod u+r), or "
                              "run as its owner")
    if exc.errno == errno.ENOTDIR:
        return UnreadableFile("cannot be read: a part of its path is a file, not a folder", "check the path")
    if exc.errno == errno.ENXIO:
        return UnreadableFile("is a socket or a device with nothing behind it, not a regular file",
                              f"give the path of a {what} saved on disk")
    if exc.errno == errno.EISDIR:
        return UnreadableFile("is a folder", f"give the path of a {what} inside it")
    return UnreadableFile(f"cannot be opened ({exc.strerror or exc})", "check the path and its permissions")


def read_limited(path: str | os.PathLike, limit: ReadLimit) -> bytes:
    """The whole of the regular file ``path``, at most ``limit``'s bytes; raise :class:`UnreadableFile`.

    Never waits on a pipe or a device, never reads past the cap, never follows a link loop.
    """
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError as exc:
        raise open_problem(exc, limit.what) from None
    try:
        st = os.fstat(fd)
        kind = kind_of(st.st_mode)
        if kind is not None:
            fix = (f"give the path of a {limit.what} inside it" if kind == "a folder" else
                   f"give the path of a {limit.what} saved on disk (draftbench reads only regular files, so a "
                   "pipe or a device can never make it wait or read for ever)")
            raise UnreadableFile(f"is {kind}, not a regular file", fix)
        cap = limit.max_bytes()
        if st.st_size > cap:
            raise UnreadableFile(f"is {describe_size(st.st_size)}, over the {describe_size(cap)} cap on a "
                                 f"{limit.what}", limit.raise_hint(st.st_size))
        if hasattr(os, "O_NONBLOCK"):
            os.set_blocking(fd, True)     # a regular file: reads wait for the disk, never spin
        chunks: list[bytes] = []
        total = 0
        want = st.st_size + 1       # the whole file in one read (one copy: 0.1 s of a 224 MB file), then what it grew by
        while True:
            try:
                chunk = os.read(fd, min(max(want, _CHUNK), cap + 1 - total))
            except OSError as exc:
                raise UnreadableFile(f"cannot be read ({exc.strerror or exc})", "check the file and the disk "
                                     "it is on") from None
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            want = 0
            if total > cap:
                raise UnreadableFile(f"grew past the {describe_size(cap)} cap on a {limit.what} while being read",
                                     limit.raise_hint())
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_head(path: str | os.PathLike, n_bytes: int) -> bytes | None:
    """The first ``n_bytes`` of ``path`` when it is a regular file; None for anything else (never waits)."""
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, n_bytes)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_tail(path: str | os.PathLike, n_bytes: int) -> bytes | None:
    """The last ``n_bytes`` of ``path`` when it is a regular file; None for anything else (never waits)."""
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        os.lseek(fd, max(0, st.st_size - n_bytes), os.SEEK_SET)
        return os.read(fd, n_bytes)
    except OSError:
        return None
    finally:
        os.close(fd)


def is_gzip(data: bytes) -> bool:
    return data[:2] == GZIP_MAGIC


def gunzip_limited(data: bytes, limit: ReadLimit) -> bytes:
    """Decompress gzip ``data`` (one member or several) to at most ``limit``'s bytes; raise
    :class:`UnreadableFile` when it is corrupt or would decompress past the cap (a gzip bomb stops there)."""
    cap = limit.max_bytes()
    out: list[bytes] = []
    total = 0
    rest = data
    while rest:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            piece = d.decompress(rest, cap + 1 - total)
            if d.unconsumed_tail:
                raise UnreadableFile(f"is gzip-compressed and decompresses to more than the {describe_size(cap)} "
                                     f"cap on a {limit.what}", limit.raise_hint())
            piece += d.flush()
        except zlib.error as exc:
            raise UnreadableFile(f"is gzip-compressed but damaged ({exc})", "decompress it yourself (gunzip -t "
                                 "names the problem), or restore it from a backup") from None
        if not d.eof:
            raise UnreadableFile("is gzip-compressed but cut short (the gzip stream does not end)",
                                 "copy the whole file again, or restore it from a backup")
        out.append(piece)
        total += len(piece)
        if total > cap:
            raise UnreadableFile(f"is gzip-compressed and decompresses to more than the {describe_size(cap)} cap "
                                 f"on a {limit.what}", limit.raise_hint())
        rest = d.unused_data.lstrip(b"\0")      # padding after the last member is allowed by gzip(1)
    return b"".join(out)


def describe_size(n_bytes: int) -> str:
    if n_bytes >= 10**9:
        return f"{n_bytes / 1e9:.1f} GB"
    if n_bytes >= 10**6:
        return f"{n_bytes / 1e6:.0f} MB" if n_bytes >= 10**7 else f"{n_bytes / 1e6:.1f} MB"
    if n_bytes >= 10**4:
        return f"{n_bytes / 1e3:.0f} kB"
    return f"{n_bytes:,} bytes"
