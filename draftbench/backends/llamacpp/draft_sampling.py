"""How a running llama-server samples its draft (``--spec-draft-sampling``), as the server process holds it.

llama-server b11434 reports its draft sampling nowhere: not in ``/slots`` (its ``params`` list the target's
samplers and ``speculative.types`` only), not in ``/props``, not in its log. What decides it is the process's own
command line and environment, by llama.cpp's rule (``common/arg.cpp``): a ``LLAMA_ARG_*`` variable is read first
and a flag on the command line overrides it; with neither, the default its ``--help`` states. So the proof is
read from the process as the kernel holds it (``/proc/<pid>/cmdline`` and ``/proc/<pid>/environ`` on Linux) — not
from what we meant to pass — and elsewhere from the command and environment it was started with.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

FLAG = "--spec-draft-sampling"
ENV = "LLAMA_ARG_SPEC_DRAFT_SAMPLING"


def default_of(help_text: str) -> str | None:
    """The default ``--help`` states for the flag (``greedy`` on b11434); None where the build has no such flag."""
    m = re.search(r"^" + re.escape(FLAG) + r"\s.*?\(default:\s*([a-z_-]+)\)", help_text, re.MULTILINE | re.DOTALL)
    return m.group(1) if m else None


def effective(argv: Sequence[str], environ: Mapping[str, str], default: str) -> tuple[str, str]:
    """(the draft sampling the server runs, where that comes from): the last flag on the command line wins over the
    variable, which wins over the default."""
    value = None
    for i, arg in enumerate(argv):
        if arg == FLAG and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(FLAG + "="):
            value = arg.partition("=")[2]
    if value is not None:
        return value, f"its command line ({FLAG})"
    if environ.get(ENV):
        return environ[ENV], f"its environment ({ENV})"
    return default, "the build's default (no flag, no variable)"


def _read_nul_separated(path: str) -> list[str] | None:
    try:
        with open(path, "rb") as fh:
            data = fh.read(1 << 20)
    except OSError:
        return None
    return [part.decode("utf-8", "replace") for part in data.split(b"\0") if part]


def of_process(pid: int | None, command: Sequence[str], default: str) -> tuple[str, str]:
    """The draft sampling of the running process ``pid`` (Linux: its own ``/proc`` entries); elsewhere, or when
    they cannot be read, from ``command`` and the environment it inherited from us."""
    argv = _read_nul_separated(f"/proc/{pid}/cmdline") if pid else None
    env_items = _read_nul_separated(f"/proc/{pid}/environ") if pid else None
    if argv is None or env_items is None:
        value, where = effective(command, os.environ, default)
        return value, where + ", as started (the process could not be read)"
    environ = dict(item.partition("=")[::2] for item in env_items)
    return effective(argv, environ, default)


class ReadsDraftSampling:
    """What a llama-server object answers for ``Server.draft_sampling``: set ``draft_sampling_default`` (from the
    build's ``--help``) when it runs a draft model; its process is then read (``pid`` and ``command`` are
    ``Server``'s)."""

    draft_sampling_default: str | None = None

    def draft_sampling(self) -> tuple[str, str] | None:
        command, default = getattr(self, "command", None), self.draft_sampling_default
        return of_process(getattr(self, "pid", None), command, default) if default and command else None
