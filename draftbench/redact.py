"""Mask secrets in server commands before they are recorded or printed.

A leaf module. ``extra_args`` may carry credentials (``--api-key K``, ``--hf-token T``); the
command of every server is written to results files (``server.command``), to the server log
(its ``$ command`` header) and to the console. All of those go through :func:`redact_command`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

MASK = "***"

# A flag is secret when one of the words of its name is one of these: --api-key, --api-key-file,
# --hf-token, --ssl-key-file, --access-token, --client-secret, --password. Word-wise, so that
# --max-num-batched-tokens, --tokenizer or --keep are left alone.
_SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd"})
_SECRET_SHORT_FLAGS = frozenset({"-hft"})      # llama-server's --hf-token


def is_secret_flag(arg: str) -> bool:
    """True for ``--api-key`` and the like (also written ``--api_key`` or ``--API-KEY=…``)."""
    if not arg.startswith("-"):
        return False
    if arg.split("=", 1)[0] in _SECRET_SHORT_FLAGS:
        return True
    name = arg.lstrip("-").split("=", 1)[0].lower()
    return bool(name) and any(word in _SECRET_WORDS for word in re.split(r"[-_.]", name))


def redact_command(cmd: Iterable[object]) -> list[str]:
    """``cmd`` with the value of every secret flag replaced by ``***``.

    Handles ``--api-key VALUE`` and ``--api-key=VALUE``. A secret flag followed by another
    flag (or nothing) is a switch, not a value, and is kept as is.
    """
    args = [str(a) for a in cmd]
    out: list[str] = []
    mask_next = False
    for arg in args:
        if mask_next and not arg.startswith("-"):
            out.append(MASK)
            mask_next = False
            continue
        mask_next = False
        if is_secret_flag(arg):
            if "=" in arg:
                out.append(arg.split("=", 1)[0] + "=" + MASK)
            else:
                out.append(arg)
                mask_next = True
            continue
        out.append(arg)
    return out


def redact_args(args: Sequence[str] | None) -> list[str] | None:
    """:func:`redact_command` for an argument list that may be absent (settings, snapshots)."""
    return None if args is None else redact_command(args)


def command_line(cmd: Iterable[object]) -> str:
    """A command as one line for logs and the console, secrets masked."""
    return " ".join(redact_command(cmd))
