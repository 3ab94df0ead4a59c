"""Mask secrets in server commands before they are recorded or printed.

A leaf module. ``extra_args`` may carry credentials (``--api-key K``, ``--hf-token T``); the
command of every server is written to results files (``server.command``), to the server log
(its ``$ command`` header) and to the console. All of those go through :func:`redact_command`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence

MASK = "***"

# A flag is secret when one of the words of its name is one of these: --api-key, --api-key-file,
# --hf-token, --ssl-key-file, --access-token, --client-secret, --password. Word-wise, so that
# --max-num-batched-tokens, --tokenizer or --keep are left alone.
_SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd"})
_SECRET_SHORT_FLAGS = frozenset({"-hft"})      # llama-server's --hf-token
# A secret flag whose name ends in one of these words always takes a value, even one that starts with '-'
# (llama-server takes the next argument whatever it is: `--api-key -Xy…`, which 1.5% of
# secrets.token_urlsafe(32) keys look like). Others (`--skip-token-check`) may be switches.
_VALUE_WORDS = _SECRET_WORDS | {"file", "path"}


def is_secret_flag(arg: str) -> bool:
    """True for ``--api-key`` and the like (also written ``--api_key`` or ``--API-KEY=…``)."""
    if not arg.startswith("-"):
        return False
    if arg.split("=", 1)[0] in _SECRET_SHORT_FLAGS:
        return True
    name = arg.lstrip("-").split("=", 1)[0].lower()
    return bool(name) and any(word in _SECRET_WORDS for word in re.split(r"[-_.]", name))


def takes_value(flag: str) -> bool:
    """A secret flag that always takes a value (``--api-key``, ``--hf-token``, ``--ssl-key-file``)."""
    if flag.split("=", 1)[0] in _SECRET_SHORT_FLAGS:
        return True
    words = re.split(r"[-_.]", flag.lstrip("-").split("=", 1)[0].lower())
    return bool(words) and words[-1] in _VALUE_WORDS


def redact_command(cmd: Iterable[object]) -> list[str]:
    """``cmd`` with the value of every secret flag replaced by ``***``.

    Handles ``--api-key VALUE`` and ``--api-key=VALUE``, a value starting with '-' included (see
    :func:`takes_value`). Another secret flag followed by a flag (or nothing) is a switch, not a value,
    and is kept as is.
    """
    args = [str(a) for a in cmd]
    out: list[str] = []
    mask_next: str | None = None      # the secret flag whose value comes next
    for arg in args:
        if mask_next is not None and (takes_value(mask_next) or not arg.startswith("-")):
            out.append(MASK)
            mask_next = None
            continue
        mask_next = None
        if is_secret_flag(arg):
            if "=" in arg:
                out.append(arg.split("=", 1)[0] + "=" + MASK)
            else:
                out.append(arg)
                mask_next = arg
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
    """A command as one line for logs, secrets masked (a record, not a line to paste: see :func:`shell_line`)."""
    return " ".join(redact_command(cmd))


def secret_variable(flag: str) -> str:
    """The environment variable a printed command reads a secret from: ``--api-key`` -> ``DRAFTBENCH_API_KEY``."""
    name = flag.split("=", 1)[0]
    name = "--hf-token" if name in _SECRET_SHORT_FLAGS else name
    return "DRAFTBENCH_" + re.sub(r"[^A-Za-z0-9]+", "_", name.lstrip("-")).strip("_").upper()


def _reference(flag: str) -> str:
    """``"${DRAFTBENCH_API_KEY:?…}"``: the shell refuses to run the command until the variable is set, with
    the message — a masked ``***`` pasted as is would start a server whose key is ``***``."""
    var = secret_variable(flag)
    return f'"${{{var}:?set {var} to the value of {flag.split("=", 1)[0]} first}}"'


def shell_line(cmd: Iterable[object]) -> str:
    """One line a POSIX shell runs as ``cmd`` (quotes where needed, e.g. around JSON), every secret value —
    clear or already masked — replaced by a reference to an environment variable the shell insists on."""
    args = [str(a) for a in cmd]
    masked = redact_command(args)
    out: list[str] = []
    for i, (original, shown) in enumerate(zip(args, masked)):
        if shown.endswith("=" + MASK) and is_secret_flag(shown):
            out.append(shlex.quote(shown[:-len(MASK)]) + _reference(shown))
        elif original == shown and shown != MASK:
            out.append(shlex.quote(shown))
        elif i > 0 and is_secret_flag(masked[i - 1]):
            out.append(_reference(masked[i - 1]))
        else:
            out.append(shlex.quote(shown))
    return " ".join(out)


def is_secret_name(name: str) -> bool:
    """A name (an environment variable, a JSON key) one of whose words says it holds a secret: ``HF_TOKEN``,
    ``VLLM_API_KEY``, ``api_key`` (``max_tokens`` is not: word-wise, as for flags)."""
    return any(word in _SECRET_WORDS for word in re.split(r"[-_.\s]", name.lower()))


# Secrets inside prose (a stored summary's "Run it:" line, a note, a value under a key we do not know): a secret
# flag and its value (``--api-key K``, ``--hf-token=hf_…``, quoted or not), an Authorization header's
# credentials, and the shapes of well-known tokens.
_FLAG_IN_TEXT = re.compile(r"(?<![\w-])(--?[A-Za-z][\w.-]*)(=|[ \t]+)(\"[^\"]*\"|'[^']*'|[^\s\"']+)")
_AUTH_IN_TEXT = re.compile(r"\b(Bearer|Authorization:[ \t]*(?:Basic|Token))([ \t]+)([A-Za-z0-9._~+/=-]{8,})",
                           re.IGNORECASE)
_TOKEN_SHAPES = re.compile(r"(?<![A-Za-z0-9])(?:hf_[A-Za-z0-9]{16,}|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|"
                           r"github_pat_[A-Za-z0-9_]{20,}|xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})")


def redact_secret_text(text: str) -> str:
    """``text`` with every secret it holds masked: the value after a secret flag (``--api-key K``), the
    credentials after ``Bearer``/``Basic``, and tokens shaped like Hugging Face's, OpenAI's or GitHub's."""
    def flag(match: re.Match) -> str:
        name, between, value = match.groups()
        if not is_secret_flag(name) or (between != "=" and value.startswith("-") and not takes_value(name)):
            return match.group(0)
        return f"{name}{between}{MASK}"

    text = _FLAG_IN_TEXT.sub(flag, text)
    text = _AUTH_IN_TEXT.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    return _TOKEN_SHAPES.sub(MASK, text)
