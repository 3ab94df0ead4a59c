"""Command-line entry points. Each is thin: parse arguments, call the package, map errors to exit codes."""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Callable

from ..common.errors import DraftbenchError
from ..common.files import cache_dir
from ..common.text_safety import safe_text
from ..lifetime.process import install_signal_handlers, stop_all


def save_traceback() -> str | None:
    """Write the current exception's traceback to the cache's logs; its path, or None if that fails."""
    try:
        folder = cache_dir() / "logs"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
        path.write_text(traceback.format_exc())
        return str(path)
    except OSError:
        return None


def run_main(main: Callable[[list[str]], int], argv: list[str] | None = None) -> int:
    """Run ``main``; turn expected errors into one ``Error: …`` message and an exit code."""
    install_signal_handlers()
    for stream in (sys.stdout, sys.stderr):
        try:   # the last line of defence: text the terminal's encoding cannot show is escaped, never a crash
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            pass
    try:
        return main(sys.argv[1:] if argv is None else argv)
    except DraftbenchError as exc:
        print(f"Error: {safe_text(exc)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:   # a bug: say so in one line, keep the traceback for the report
        where = save_traceback()
        print(f"Error: unexpected {type(exc).__name__}: {exc}. This is a bug in draftbench; please report it "
              f"with {where}" if where else f"Error: unexpected {type(exc).__name__}: {exc}. This is a bug in "
              "draftbench; please report it", file=sys.stderr)
        return 1
    finally:
        stop_all()
