"""Paths: shell-style expansion in config paths, the cache folder, atomic writes and output streams.

A leaf module: everything else may import it; it imports nothing of draftbench's.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


def cache_dir() -> Path:
    """Where the built llama-server, forged models, capability probes and server.py logs live."""
    return Path(os.environ.get("DRAFTBENCH_CACHE", Path.home() / ".cache" / "draftbench"))


_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# ${NAME}, ${NAME:-default}, ${NAME-default}, or $NAME
_VAR_RE = re.compile(r"\$\{(?P<name>" + _NAME + r")(?:(?P<op>:?-)(?P<default>[^}]*))?\}|\$(?P<plain>" + _NAME + ")")


def expand_env(raw: str) -> tuple[str, list[str], str | None]:
    """Shell-style expansion of ``$NAME``, ``${NAME}``, ``${NAME:-default}`` and ``${NAME-default}``.

    ``:-`` uses the default when NAME is unset *or empty*, ``-`` only when it is unset (as in
    POSIX shells). A default may itself hold ``~`` and ``$NAME`` (not another ``${…}``).
    Values taken from the environment are not expanded again. Returns
    ``(text, unresolved names, syntax error or None)``; unresolved references are left as written.
    """
    unresolved: list[str] = []
    syntax: list[str] = []

    def sub(m: re.Match) -> str:
        name = m.group("name") or m.group("plain")
        value = os.environ.get(name)
        op = m.group("op")
        if op is not None:
            if value is None or (op == ":-" and value == ""):
                default, missing, bad = expand_env(m.group("default"))
                unresolved.extend(n for n in missing if n not in unresolved)
                if bad:
                    syntax.append(f"{m.group(0)!r} nests a variable reference in a default, which is not supported")
                return os.path.expanduser(default) if default.startswith("~") else default
            return value
        if value is None:
            if name not in unresolved:
                unresolved.append(name)
            return m.group(0)
        return value

    out = _VAR_RE.sub(sub, raw)
    # a "${" that none of the forms above matched ("${NAME:?x}", "${1}", an unclosed "${"); a lone "$" stays literal
    bad = re.search(r"\$\{[^}]*\}?", _VAR_RE.sub("", raw))
    if bad:
        syntax.append(f"{bad.group(0)!r} is not a supported variable reference (use $NAME, ${{NAME}} or "
                      "${NAME:-default})")
    return out, unresolved, (syntax[0] if syntax else None)


@dataclass(frozen=True)
class PathProblem:
    """Why a configured path could not be expanded, and how to fix it."""

    message: str
    fix: str


def expand_path(raw: str, base_dir: str) -> tuple[str, PathProblem | None]:
    """Expand ``$VARS`` (with ``${VAR:-default}``) and ``~``; resolve relative paths against the config's folder.

    Returns ``(path, problem)``; the problem names every unset variable.
    """
    expanded, unresolved, syntax = expand_env(raw)
    if unresolved:
        names = ", ".join(f"${n}" for n in unresolved)
        plural = "s" if len(unresolved) > 1 else ""
        verb = "are" if len(unresolved) > 1 else "is"
        first = unresolved[0]
        return expanded, PathProblem(f"environment variable{plural} {names} {verb} not set (in {raw!r})",
                                     f"set it (export {first}=/path/to/folder), write the path out, or give a "
                                     f"default: ${{{first}:-~/models}}")
    if syntax:
        return expanded, PathProblem(f"{syntax} (in {raw!r})", "write variables as $NAME, ${NAME} or "
                                     "${NAME:-default}, or write the path out")
    if not expanded.strip():
        return expanded, PathProblem(f"{raw!r} expands to an empty path", "give the file's path (relative paths "
                                     "are resolved against the config file's folder)")
    expanded = os.path.expanduser(expanded)
    if not os.path.isabs(expanded):
        expanded = os.path.normpath(os.path.join(base_dir, expanded))
    return expanded, None


def _default_mode() -> int:
    """0o666 minus the process umask: the mode ``open()`` would give a new file."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically: see :func:`atomic_write_bytes`."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically: a temp file in the same folder, fsync, then ``os.replace``.

    A crash at any moment leaves the old file or the new one, never half of one. A symlink is
    written through (its target is replaced, the link stays). The new file
    keeps the old one's permissions (a new file gets the umask default, not mkstemp's private
    0600, so a report meant to be shared stays readable). Raises ``OSError``; the temp file is
    removed on any failure.
    """
    p = Path(path)
    if p.is_symlink():
        # Update the file the link points to; replacing the link itself would silently turn it
        # into a regular file and leave its target stale.
        p = Path(os.path.realpath(p))
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.is_dir():
        raise IsADirectoryError(21, "is a folder", str(p))
    try:
        mode = p.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = _default_mode()
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=str(p.parent))
    try:
        with os.fdopen(fd, "wb") as fh:
            os.chmod(tmp, mode)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return p


class NotOurFile(OSError):
    """A path draftbench appends to (a server log) holds something it must not write through."""


def open_for_append(path: str | os.PathLike) -> int:
    """A descriptor appending to the regular file ``path`` (created 0600 if new), never through a symlink
    (``O_NOFOLLOW``: a link planted there fails instead of being followed), never a FIFO or a device (opened
    ``O_NONBLOCK``, so a pipe without a reader cannot make it wait, then checked with ``fstat``), and only a
    file of this user's. Raises :class:`NotOurFile` naming what is there, or ``OSError``."""
    flags = (os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
             | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):     # EMLINK: FreeBSD's answer
            raise NotOurFile(exc.errno, "it is a symbolic link, which draftbench never writes through",
                             str(path)) from None
        if exc.errno == errno.ENXIO:
            raise NotOurFile(exc.errno, "it is a named pipe, not a log file", str(path)) from None
        raise
    st = os.fstat(fd)
    problem = ("it is not a regular file" if not stat.S_ISREG(st.st_mode) else
               "it belongs to another user" if hasattr(os, "geteuid") and st.st_uid != os.geteuid() else None)
    if problem:
        os.close(fd)
        raise NotOurFile(errno.EPERM, problem, str(path))
    if hasattr(os, "O_NONBLOCK"):
        os.set_blocking(fd, True)
    return fd


# /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: a descriptor this process already holds
_INHERITED_FD = re.compile(r"^/(?:dev/(?:(?P<std>stdout|stderr)|fd/(?P<dev_fd>\d+))|proc/self/fd/(?P<proc_fd>\d+))$")


def _inherited_fd(path: str) -> int | None:
    m = _INHERITED_FD.match(path)
    if not m:
        return None
    if m.group("std"):
        return 1 if m.group("std") == "stdout" else 2
    return int(m.group("dev_fd") or m.group("proc_fd"))


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to the descriptor ``fd`` (``os.write`` may take part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_output_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to an output the user named, never reading it.

    A regular file (or a new one) is replaced atomically (:func:`atomic_write_text`). Anything else
    is written straight, as a shell redirection would: ``/dev/stdout`` and ``/dev/fd/N`` (a process
    substitution such as ``>(gzip > x.gz)``) through the descriptor this process already holds, so an
    appending redirection keeps appending; a named pipe only if a program is reading it (otherwise
    ``ENXIO`` at once instead of waiting for ever); a device such as ``/dev/null`` as it is. Raises
    ``OSError`` (``/dev/full``: ENOSPC).
    """
    raw = os.fspath(path)
    inherited = _inherited_fd(raw) if sys.platform != "win32" else None
    if inherited is not None:
        if inherited in (1, 2):
            stream = sys.stdout if inherited == 1 else sys.stderr
            if stream is not None:
                stream.flush()       # what was printed before comes first
        write_all(inherited, text.encode("utf-8"))
        return Path(raw)
    try:
        st = os.stat(raw)
    except (FileNotFoundError, NotADirectoryError):
        st = None
    if st is None or stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return atomic_write_text(raw, text)
    fd = os.open(raw, os.O_WRONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        if hasattr(os, "O_NONBLOCK"):
            os.set_blocking(fd, True)
        write_all(fd, text.encode("utf-8"))
    finally:
        os.close(fd)
    return Path(raw)


def describe_write_error(exc: OSError) -> str:
    """Why a write failed, in words a person acts on."""
    if exc.errno == errno.ENOSPC:
        return "no space left on the device"
    if exc.errno == errno.EBADF:
        return "it is closed"
    if exc.errno == errno.ENXIO:
        return "it is a named pipe that no program is reading"
    if exc.errno == errno.EPIPE:
        return "the program reading it has exited"
    if exc.errno == errno.ELOOP:
        return "it is a symbolic link that loops (it points, directly or through other links, back to itself)"
    if exc.errno == errno.EFBIG:
        return "the file would be larger than this file system or ulimit allows"
    return exc.strerror or str(exc)


def same_as_stdout(path: str | os.PathLike) -> bool:
    """Whether ``path`` is where standard output goes (``/dev/stdout``, or the file it is redirected to)."""
    try:
        out, other = os.fstat(1), os.stat(path)
    except (OSError, ValueError):
        return False
    return (out.st_dev, out.st_ino) == (other.st_dev, other.st_ino)
