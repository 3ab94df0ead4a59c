"""Why a server process exited before it was ready, named from its log (shared by the backends that
start a server process; :mod:`.base` re-exports it)."""

from __future__ import annotations

import re
import signal
from collections.abc import Callable

from ..common.errors import ServerError, ServerErrorKind

# A backend's own reading of a crash: (signal number, log tail) -> (message, fix, kind), or None
KnownCrash = Callable[[int, str], "tuple[str, str, ServerErrorKind] | None"]


def signal_name(number: int) -> str:
    """'signal 11, SIGSEGV' (the number alone where the OS has no name for it)."""
    try:
        return f"signal {number}, {signal.Signals(number).name}"
    except ValueError:
        return f"signal {number}"


def explain_exit_from_log(failures: tuple, server_name: str, crash_fix: str, returncode: int | None,
                          log_tail: str, port: int, log_path: str | None,
                          known_crash: KnownCrash | None = None) -> ServerError:
    """Name why a server exited: the first of ``failures`` (pattern, kind, message, fix) whose
    pattern the log tail matches, else a crash (killed by a signal: one ``known_crash`` names, the kernel's
    out-of-memory killer, or any other) or a plain exit."""
    for pattern, kind, message, fix in failures:
        if re.search(pattern, log_tail, re.IGNORECASE):
            return ServerError(message.format(port=port) + f" (exit code {returncode})", fix, log_tail=log_tail,
                               log_path=log_path, kind=kind)
    if returncode is not None and returncode < 0:
        named = known_crash(-returncode, log_tail) if known_crash is not None else None
        if named is None and -returncode == signal.SIGKILL:
            named = (f"{server_name} was killed ({signal_name(-returncode)}) before it was ready: usually the "
                     "kernel's out-of-memory killer", "check `dmesg` or `journalctl -k` for 'Out of memory'; if so, "
                     "give it a smaller model, context (settings.ctx_size) or fewer slots", ServerErrorKind.OOM)
        message, fix, kind = named or (f"{server_name} crashed ({signal_name(-returncode)})", crash_fix,
                                       ServerErrorKind.CRASH)
        return ServerError(message, log_fix(fix, log_tail, log_path), log_tail=log_tail, log_path=log_path, kind=kind)
    if returncode == 0:
        return ServerError(f"{server_name} exited with code 0 before it was ready (a server runs until it is stopped)",
                           log_fix("check that the binary is the server itself: a wrapper that puts it in the "
                                   "background, or a program that prints something and exits, cannot be measured",
                                   log_tail, log_path), log_tail=log_tail, log_path=log_path,
                           kind=ServerErrorKind.SERVER)
    return ServerError(f"{server_name} exited with code {returncode} while loading",
                       log_fix("see the log lines below", log_tail, log_path), log_tail=log_tail, log_path=log_path,
                       kind=ServerErrorKind.SERVER)


def log_fix(fix: str, log_tail: str, log_path: str | None) -> str:
    """``fix`` where the log has lines to show; where it is empty, say so rather than point below. Our own
    ``$ command`` header is not the server's output."""
    if any(line.strip() and not line.startswith("$ ") for line in log_tail.splitlines()):
        return fix if "log lines below" in fix else f"{fix}; see the log lines below"
    where = f" (its log {log_path} is empty)" if log_path else ""
    first = "" if fix == "see the log lines below" else f"{fix}; "
    return f"{first}it printed nothing{where}: run its command by hand to see why"
