"""How a person runs a measured configuration themselves: the verdict's last line.

Every row records the exact command its server ran (``server.command``, secrets masked). What a
person needs is that command without draftbench's own plumbing (the port and address it chose, the
counters and log level it reads, the one slot it forces for single-stream numbers). A backend class
declares which of its flags are plumbing (a ``plumbing`` attribute, a :class:`Plumbing`; none: the
whole command), or, where its server is an app (LM Studio), how a person sets it up instead (a
``settings_advice(row, settings)`` method). :func:`advise` is the one entry point.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..common.redact_secrets import shell_line as secret_shell_line

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..results.file import Row
    from .base import Backend


@dataclass(frozen=True)
class RunAdvice:
    """``kind``: ``"command"`` (a shell line: append ``--port N`` if the default port is taken) or
    ``"settings"`` (what to choose in an app)."""

    kind: str
    text: str

    def __post_init__(self) -> None:
        if self.kind not in ("command", "settings"):
            raise ValueError(f"RunAdvice kind {self.kind!r} is not 'command' or 'settings'")
        if not isinstance(self.text, str) or not self.text:
            raise ValueError("RunAdvice text must be a non-empty string")

    def to_dict(self) -> dict[str, str]:
        # "line", not "text": a results file's "text" keys hold model output, which --redact-paths keeps
        return {"kind": self.kind, "line": self.text}


def without_plumbing(command: Sequence[str], *, valued: Collection[str] = (), switches: Collection[str] = (),
                     only_values: Mapping[str, Collection[str]] | None = None) -> list[str]:
    """``command`` less every flag in ``valued`` (with its value; ``--flag=value`` too) and every switch
    in ``switches``. ``only_values``: flags dropped only with one of these values (``-np 1`` is
    plumbing; ``-np 4`` is what was measured at four streams)."""
    only_values = only_values or {}
    out: list[str] = []
    args = [str(a) for a in command]
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if arg in switches:
            i += 1
            continue
        if name in valued:
            width = 1 if eq else 2
            shown = value if eq else (args[i + 1] if i + 1 < len(args) else "")
            if name in only_values and shown not in only_values[name]:
                out += args[i:i + width]
            i += width
            continue
        out.append(arg)
        i += 1
    return out


def shell_line(args: Sequence[str]) -> str:
    """One line a POSIX shell runs as ``args`` (quotes where needed, e.g. around JSON). A secret (recorded
    masked as ``***``) becomes ``"${DRAFTBENCH_API_KEY:?…}"``: pasted without setting it, the shell refuses
    to run the line and says what to set, instead of starting a server whose key is ``***``."""
    return secret_shell_line(args)


@dataclass(frozen=True)
class Plumbing:
    """A backend's flags that only draftbench needs (see :func:`without_plumbing`)."""

    valued: tuple[str, ...] = ()
    switches: tuple[str, ...] = ()
    only_values: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def strip(self, command: Sequence[str]) -> list[str]:
        return without_plumbing(command, valued=self.valued, switches=self.switches, only_values=self.only_values)


def command_advice(row: Row, plumbing: Plumbing) -> RunAdvice | None:
    """The row's recorded server command without ``plumbing``, as one shell line; None when none was recorded."""
    command = (row.server or {}).get("command")
    if isinstance(command, list) and command:
        return RunAdvice("command", shell_line(plumbing.strip(command)))
    return None


def advise(backend: Backend, row: Row, settings: Settings) -> RunAdvice | None:
    """How a person runs ``row``'s configuration on ``backend`` (``settings``: the results file's)."""
    custom = getattr(backend, "settings_advice", None)
    if custom is not None:
        return custom(row, settings)
    return command_advice(row, getattr(backend, "plumbing", Plumbing()))
