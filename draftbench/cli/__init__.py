"""Command-line entry points. Each is thin: parse arguments, call the package, map errors to exit codes."""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Callable

from ..common.errors import DraftbenchError
from ..common.files import cache_dir, describe_write_error
from ..common.text_safety import safe_text
from ..lifetime.process import install_signal_handlers, stop_all

STDOUT_FIX = "pass --output FILE, or give standard output somewhere with room (a file, a pipe, the terminal)"


def save_traceback() -> str | None:
    """Write the current exception's traceback to a new file in the cache's logs; its path, or None if that
    fails. The file is created exclusively and never through a symlink: nothing else is ever overwritten."""
    try:
        folder = cache_dir() / "logs"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(traceback.format_exc())
        return str(path)
    except OSError:
        return None


def _silence_stdout() -> None:
    """Point descriptor 1 at the null device, so that what is still buffered for a closed or full standard
    output cannot fail again when Python exits (which would print a second, confusing error)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass


def write_stdout(text: str, what: str) -> None:
    """Write ``text`` (an export) to standard output and flush it; a closed or full standard output is
    a :class:`DraftbenchError` (one ``Error:`` line), a reader that exited (``| head``) ends quietly."""
    stream = sys.stdout
    if stream is None:
        raise DraftbenchError(f"cannot write {what} to standard output: it is closed", STDOUT_FIX)
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as exc:
        _silence_stdout()
        reason = describe_write_error(exc) if isinstance(exc, OSError) else "it is closed"
        raise DraftbenchError(f"cannot write {what} to standard output: {reason}", STDOUT_FIX) from None


class _WatchedStdout:
    """Standard output, unchanged, except that a failed write or flush is remembered: ``run_main`` then
    knows that an ``OSError`` came from standard output (closed, a full device) rather than a bug."""

    def __init__(self, stream):
        self._stream = stream
        self.failure: BaseException | None = None

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except (OSError, ValueError) as exc:
            self.failure = exc
            raise

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError) as exc:
            self.failure = exc
            raise

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _stdout_problem() -> str | None:
    """Why standard output cannot take what is buffered for it, or None when it can."""
    stream = sys.stdout
    if stream is None:
        return None
    try:
        stream.flush()
    except BrokenPipeError:
        _silence_stdout()
        return None
    except (OSError, ValueError) as exc:
        _silence_stdout()
        return describe_write_error(exc) if isinstance(exc, OSError) else "it is closed"
    return None


def run_main(main: Callable[[list[str]], int], argv: list[str] | None = None) -> int:
    """Run ``main``; turn expected errors into one ``Error: …`` message and an exit code."""
    install_signal_handlers()
    for stream in (sys.stdout, sys.stderr):
        try:   # the last line of defence: text the terminal's encoding cannot show is escaped, never a crash
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            pass
    if sys.stdout is not None and not isinstance(sys.stdout, _WatchedStdout):
        sys.stdout = _WatchedStdout(sys.stdout)
    try:
        code = main(sys.argv[1:] if argv is None else argv)
        problem = _stdout_problem()
        if problem:
            print(f"Error: cannot write to standard output: {problem}\n  Fix: {STDOUT_FIX}", file=sys.stderr)
            return code or 1
        return code
    except DraftbenchError as exc:
        print(f"Error: {safe_text(exc)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 1
    except Exception as exc:   # a bug: say so in one line, keep the traceback for the report
        failed = getattr(sys.stdout, "failure", None) is exc
        problem = (_stdout_problem() or describe_write_error(exc)) if failed and isinstance(exc, OSError) else None
        if problem:
            print(f"Error: cannot write to standard output: {problem}\n  Fix: {STDOUT_FIX}", file=sys.stderr)
            return 1
        where = save_traceback()
        print(f"Error: unexpected {type(exc).__name__}: {exc}. This is a bug in draftbench; please report it "
              f"with {where}" if where else f"Error: unexpected {type(exc).__name__}: {exc}. This is a bug in "
              "draftbench; please report it", file=sys.stderr)
        return 1
    finally:
        stop_all()
