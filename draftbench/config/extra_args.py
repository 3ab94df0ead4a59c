"""Rules for arguments passed through to a server (``extra_args``, ``server.py -- …``).

The tool owns the port (it picks one, checks it is free and that the server answering is
ours), so ``--port`` is refused. ``--host`` with an address other than loopback exposes the
server (and the model) to the network: it needs an explicit ``allow_remote``. Both come back
as :class:`Problem` objects with the JSON path of the offending argument.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence

from ..common.errors import Problem
from ..common.reading import SMALL_LIMIT, UnreadableFile, read_limited

HOST_FLAGS = ("--host",)
PORT_FLAGS = ("--port",)


def is_loopback(host: str) -> bool:
    """True for ``localhost``, ``127.x.x.x`` and ``::1``; anything else can be reached from elsewhere."""
    name = host.strip().strip("[]").lower()
    if name in ("localhost", "localhost.", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def remote_warning(host: str, where: str) -> str:
    return (f"{where}: the server will listen on {host}, reachable from other machines: anyone who can reach "
            "it can use the model while the sweep runs")


def _flag_values(args: Sequence[str], flags: tuple[str, ...]) -> list[tuple[int, str | None]]:
    """(index, value) for every use of one of ``flags``, written ``--flag VALUE`` or ``--flag=VALUE``."""
    found: list[tuple[int, str | None]] = []
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name in flags:
            if eq:
                found.append((i, value))
            else:
                found.append((i, args[i + 1] if i + 1 < len(args) else None))
    return found


def split_server_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """A command line's own options, and everything after a bare ``--`` (for the server, untouched)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def check_server_args(path: str, args: Sequence[str], *, allow_remote: bool,
                      allow_flag: str = "settings.allow_remote",
                      where: Callable[[int], str] | None = None) -> tuple[list[Problem], list[str]]:
    """Problems and warnings for one argument list; ``path`` is its JSON path (``$.settings.extra_args``),
    and argument ``i`` is named ``path[i]`` unless ``where(i)`` names it otherwise."""
    name = where or (lambda i: f"{path}[{i}]")
    problems: list[Problem] = []
    warnings: list[str] = []
    for i, _value in _flag_values(args, PORT_FLAGS):
        problems.append(Problem(name(i), "sets --port; draftbench chooses the server's port itself (it "
                                "checks that the port is free and that the server answering there is the one it "
                                "started)", "remove it; set settings.port instead (0 = any free port)"))
    for i, value in _flag_values(args, HOST_FLAGS):
        problems.extend(host_problems(name(i), value, allow_remote=allow_remote, allow_flag=allow_flag,
                                      warnings=warnings))
    return problems, warnings


def host_problems(path: str, host: str | None, *, allow_remote: bool, allow_flag: str,
                  warnings: list[str]) -> list[Problem]:
    """A non-loopback host needs ``allow_flag``; with it, a warning is added instead."""
    if host is None or not host.strip():
        return [Problem(path, "sets --host without an address", "remove it, or give an address after it")]
    # llama-server takes a comma-separated list of addresses, or UNIX socket paths
    addresses = [a.strip() for a in host.split(",") if a.strip()]
    sockets = [a for a in addresses if "/" in a or a.endswith(".sock")]
    if sockets:
        return [Problem(path, f"makes the server listen on the UNIX socket {sockets[0]}; draftbench measures "
                        "over TCP", "remove --host (the default 127.0.0.1 is what draftbench connects to)")]
    remote = [a for a in addresses if not is_loopback(a)]
    if not remote:
        return []
    if not allow_remote:
        return [Problem(path, f"makes the server listen on {', '.join(remote)}, reachable from other machines",
                        "keep the default 127.0.0.1, or expose it on purpose with "
                        + (f"{allow_flag}: true" if allow_flag.startswith("settings.") else allow_flag))]
    warnings.append(remote_warning(", ".join(remote), path))
    return []


def bind_host(default: str, args: Sequence[str]) -> str:
    """The address a server started with ``args`` listens on: the last ``--host`` in them (its first address,
    for llama-server's comma list) wins over ``default``, as it does in the server's own parsing. We must
    connect there: polling ``default`` instead waited out the whole startup timeout."""
    found = [value for _i, value in _flag_values(args, HOST_FLAGS) if value and value.strip()]
    if not found:
        return default
    first = next((a.strip() for a in found[-1].split(",") if a.strip()), default)
    return first.strip("[]")


def api_key_from_args(args: Sequence[str]) -> str | None:
    """The API key a server started with these arguments will demand (``--api-key K`` or the first line
    of ``--api-key-file F``), so that our own requests can authenticate. None when there is none."""
    for _i, value in _flag_values(args, ("--api-key",)):
        if value:
            return value.split(",")[0]
    for _i, value in _flag_values(args, ("--api-key-file",)):
        if value:
            try:     # bounded: a FIFO or /dev/zero named here must not hang the sweep
                lines = read_limited(value, SMALL_LIMIT).decode("utf-8").splitlines()
            except (UnreadableFile, UnicodeDecodeError):
                return None
            keys = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
            return keys[0] if keys else None
    return None
