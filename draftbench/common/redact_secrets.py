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


def secret_values(cmd: Iterable[object]) -> list[str]:
    """The values :func:`redact_command` masks (to find them again where a server echoes its arguments)."""
    args = [str(a) for a in cmd]
    masked = redact_command(args)
    values = []
    for original, shown in zip(args, masked):
        if original != shown:
            value = original.split("=", 1)[1] if shown.endswith("=" + MASK) else original
            values += [v for v in value.split(",") if v] + [value]   # llama-server: comma-separated keys
    return sorted(set(v for v in values if len(v) >= 4), key=len, reverse=True)   # longest first


def redact_text(text: str, cmd: Iterable[object]) -> str:
    """``text`` (a server's log lines) with every secret value of ``cmd`` replaced by ``***``: some
    servers (vLLM) print their arguments, keys included."""
    for value in secret_values(cmd):
        text = text.replace(value, MASK)
    return text


def redact_args(args: Sequence[str] | None) -> list[str] | None:
    """:func:`redact_command` for an argument list that may be absent (settings, snapshots)."""
    return None if args is None else redact_command(args)


def command_line(cmd: Iterable[object]) -> str:
    """A command as one line for logs and the console, secrets masked."""
    return " ".join(redact_command(cmd))
