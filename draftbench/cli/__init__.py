"""Command-line entry points. Each is thin: parse arguments, call the package, map errors to exit codes."""

from __future__ import annotations

import sys
from collections.abc import Callable

from ..errors import DraftbenchError
from ..process import install_signal_handlers, stop_all
from ..text_safety import safe_text


def run_main(main: Callable[[list[str]], int], argv: list[str] | None = None) -> int:
    """Run ``main``; turn expected errors into one ``Error: …`` message and an exit code."""
    install_signal_handlers()
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
    finally:
        stop_all()
