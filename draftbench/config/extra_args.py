"""Rules for arguments passed through to a server: a config's ``extra_args``, and what follows ``--`` on
``bench.py --target`` and ``server.py``. One table for all three, and for every other route into a server
(:mod:`.flag_rules`); this module finds the flags in an argument list and checks them.

Some flags change what is measured: the model (``-m``), the draft (``-md``), the draft length, how the
server speculates (``--spec-*``, vLLM's ``--speculative-config``), where its layers run (``--rpc``), where it
listens (``--host``, ``--port``). draftbench sets those itself and records what it set, so a second value
after it would be what the server runs while the screen and the results name the first (llama-server and
vLLM keep the last value). Each command line (an :class:`EntryPoint`) either refuses such a flag, naming
its own option to use instead, or holds it to the same checks as its own field: ``--host`` and ``--rpc``
need the ``allow_remote`` switch to leave this machine (and warn when they do). An API key is allowed —
it is used for our own requests and masked wherever it is written (:mod:`draftbench.common.redact_secrets`).

Flags are recognised however the servers accept them: ``--flag value`` and ``--flag=value`` (vLLM), an
underscore for a dash in a long name (both servers), vLLM's dotted ``--speculative-config.method``, every
alias of llama-server's (``-md``, ``--model-draft``, ``--spec-draft-model``), and a long name cut short as
argparse (vLLM) completes it (``--speculative-conf``). Problems come back as :class:`Problem` objects with
the place of the offending argument.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..common.errors import Problem
from ..common.reading import SMALL_LIMIT, UnreadableFile, read_limited
from .flag_rules import (
    RULES,
    SEVERITY,
    SPECULATIVE_CONFIG_KEYS,
    SWEEP,
    SWITCHES,
    EntryPoint,
    FlagKind,
    FlagRule,
)
from .hosts import is_loopback, remote_warning
from .rpc_endpoints import check_rpc_entry

_BY_NAME: dict[str, tuple[FlagRule, ...]] = {}
for _rule in RULES:
    for _name in _rule.names:
        _BY_NAME[_name] = (*_BY_NAME.get(_name, ()), _rule)
_LONG_NAMES = sorted(name for name in _BY_NAME if name.startswith("--"))
MIN_ABBREVIATION = 4                    # "--ab": argparse completes a cut-short long name


@dataclass(frozen=True)
class FlagUse:
    """One flag of an argument list: where, as written, its rule, and its value (``--f V`` or ``--f=V``)."""

    index: int
    written: str            # as the user wrote it, less any "=value"
    name: str               # canonical: dashes, no vLLM dotted key
    rule: FlagRule
    value: str | None


def _canonical(arg: str) -> tuple[str, str | None] | None:
    """(name, value after '=') of an argument that is a flag; None for a value (a number, a plain word)."""
    if len(arg) < 2 or not arg.startswith("-") or arg == "--" or arg[1].isdigit() or arg[1] == ".":
        return None
    name, eq, value = arg.partition("=")
    if name.startswith("--"):
        # both servers read --api_key as --api-key; vLLM reads --speculative-config.method as part of it
        name = "--" + name[2:].split(".", 1)[0].replace("_", "-")
    return name, (value if eq else None)


def _applies(rule: FlagRule, backend: str | None) -> bool:
    return backend is None or not rule.backends or backend in rule.backends


def rule_for(name: str, backend: str | None = None) -> FlagRule | None:
    """The rule for one flag name (canonical: dashes, no value) as ``backend``'s server reads it (None: the first
    server that reads it), or None when it changes nothing we measure."""
    rules = [r for r in _BY_NAME.get(name, ()) if _applies(r, backend)]
    if rules:
        return rules[0]
    if not name.startswith("--"):
        return None
    prefixed = next((r for r in RULES if any(name.startswith(p) for p in r.prefixes)), None)
    if prefixed is not None:
        return prefixed
    if len(name) >= MIN_ABBREVIATION:
        completed = [r for n in _LONG_NAMES if n.startswith(name) for r in _BY_NAME[n]
                     if r.kind is not FlagKind.DRAFT_PLACEMENT and _applies(r, backend)]
        if completed:
            return min(completed, key=lambda r: SEVERITY.index(r.kind))
    return None


def find_flags(args: Sequence[str], backend: str | None = None) -> list[FlagUse]:
    """Every argument a rule covers. A flag's value is the next argument even when it starts with '-'
    (llama-server takes it so: ``--api-key -x`` sets the key ``-x``)."""
    found: list[FlagUse] = []
    skip = -1
    for i, arg in enumerate(args):
        parsed = None if i == skip else _canonical(arg)
        if parsed is None:
            continue
        name, value = parsed
        rule = rule_for(name, backend)
        if rule is None:
            continue
        if value is None and "=" not in arg and name not in SWITCHES and not name.startswith("--no-"):
            value = args[i + 1] if i + 1 < len(args) else None
            skip = i + 1          # a value, never a flag of its own (a key may start with '-')
        found.append(FlagUse(i, arg.partition("=")[0], name, rule, value))
    return found


def split_server_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """A command line's own options, and everything after a bare ``--`` (for the server, untouched)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def check_server_args(path: str, args: Sequence[str], *, allow_remote: bool, entry: EntryPoint = SWEEP,
                      allow_flag: str | None = None, backend: str | None = None,
                      where: Callable[[int], str] | None = None) -> tuple[list[Problem], list[str]]:
    """Problems and warnings for one argument list under ``entry``'s rules, for ``backend``'s server (default:
    the entry's); ``path`` is its JSON path (``$.settings.extra_args``), and argument ``i`` is named ``path[i]``
    unless ``where(i)`` names it otherwise."""
    name = where or (lambda i: f"{path}[{i}]")
    allow = allow_flag or entry.allow_flag
    problems: list[Problem] = []
    warnings: list[str] = []
    for use in find_flags(args, backend or entry.backend):
        kind = use.rule.kind
        instead = entry.refusal(use.rule)
        if instead is not None:
            problems.append(_refused(name(use.index), use, instead))
        elif kind is FlagKind.HOST:
            problems.extend(host_problems(name(use.index), use.value, allow_remote=allow_remote, allow_flag=allow,
                                          warnings=warnings))
        elif kind is FlagKind.RPC:
            problems.extend(_rpc_problems(name(use.index), use, allow_remote=allow_remote, allow_flag=allow,
                                          warnings=warnings))
    return problems, warnings


def _refused(where: str, use: FlagUse, instead: str) -> Problem:
    if use.rule.kind is FlagKind.PORT:
        why = ("draftbench chooses the server's port itself (it checks that the port is free and that the server "
               "answering there is the one it started)")
    elif use.rule.kind is FlagKind.CONFIG_FILE:
        why = "a file of options could set the model, the port or the speculation unchecked"
    elif use.rule.kind is FlagKind.OUTPUT:
        why = (f"which changes {use.rule.changes}: the results would name the model and settings while the server "
               "ran something else")
    elif use.rule.kind is FlagKind.EVIDENCE:
        why = f"which turns off {use.rule.changes}"
    else:
        why = (f"which changes {use.rule.changes}: draftbench sets that itself and records what it set, so the server "
               "would run this one while the screen and the results name the other")
    return Problem(where, f"sets {use.written}; {why}", _remove(instead))


def _remove(instead: str) -> str:
    """The fix: remove it, and use the option named (``"nothing: why"`` says why there is none)."""
    return f"remove it: {instead.removeprefix('nothing: ')}" if instead.startswith("nothing: ") \
        else f"remove it; use {instead}"


def _rpc_problems(where: str, use: FlagUse, *, allow_remote: bool, allow_flag: str,
                  warnings: list[str]) -> list[Problem]:
    """``--rpc A,B`` held to the checks of a target's ``rpc`` list: host:port, ASCII digits, each once, and an
    endpoint off this machine only behind ``allow_flag`` (with the README's warning)."""
    if use.value is None or not use.value.strip():
        return [Problem(where, "sets --rpc without endpoints", "remove it, or give host:port after it")]
    problems: list[Problem] = []
    found: list[Problem] = []
    endpoints = use.value.split(",")
    check_rpc_entry(where, endpoints, allow_remote=allow_remote, problems=problems, warnings=found,
                    allow_flag=allow_flag)

    def named(path: str) -> str:        # "$.settings.extra_args[1][0]" -> "…[1] (endpoint 1 of 2)"
        head, _, index = path.rpartition("[")
        return f"{head} (endpoint {int(index.rstrip(']')) + 1} of {len(endpoints)})" if len(endpoints) > 1 else head
    warnings.extend(f"{named(p.path)}: {p.message}" for p in found)
    return [Problem(named(p.path), p.message, p.fix) for p in problems]


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


def _values(args: Sequence[str], kind: FlagKind) -> list[str]:
    return [use.value for use in find_flags(args) if use.rule.kind is kind and use.value]


def take_rpc(args: Sequence[str]) -> tuple[tuple[str, ...], list[str]]:
    """The endpoints of the last ``--rpc`` in ``args`` (the one llama-server keeps), and ``args`` without any
    ``--rpc``: server.py passes them as a target's endpoints, which are probed first and recorded."""
    uses = [use for use in find_flags(args) if use.rule.kind is FlagKind.RPC]
    if not uses:
        return (), list(args)
    drop = set()
    for use in uses:
        drop.add(use.index)
        if "=" not in args[use.index]:
            drop.add(use.index + 1)
    endpoints = tuple(e.strip() for e in (uses[-1].value or "").split(",") if e.strip())
    return endpoints, [a for i, a in enumerate(args) if i not in drop]


def bind_host(default: str, args: Sequence[str]) -> str:
    """The address a server started with ``args`` listens on: the last ``--host`` in them (its first address,
    for llama-server's comma list) wins over ``default``, as it does in the server's own parsing. We must
    connect there: polling ``default`` instead waited out the whole startup timeout."""
    found = [value for value in _values(args, FlagKind.HOST) if value.strip()]
    if not found:
        return default
    first = next((a.strip() for a in found[-1].split(",") if a.strip()), default)
    return first.strip("[]")


def api_key_from_args(args: Sequence[str]) -> str | None:
    """The API key a server started with these arguments will demand (``--api-key K`` or the first line
    of ``--api-key-file F``), so that our own requests can authenticate. None when there is none."""
    uses = [use for use in find_flags(args) if use.rule.kind is FlagKind.API_KEY and use.value]
    for use in uses:
        if use.name == "--api-key" and use.value:
            return use.value.split(",")[0]
    for use in uses:
        if use.name == "--api-key-file" and use.value:
            try:     # bounded: a FIFO or /dev/zero named here must not hang the sweep
                lines = read_limited(use.value, SMALL_LIMIT).decode("utf-8").splitlines()
            except (UnreadableFile, UnicodeDecodeError):
                return None
            keys = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
            return keys[0] if keys else None
    return None


_SPECULATIVE_KEY_INSTEAD = {
    FlagKind.DRAFT: "a \"drafts\" entry (its path is the draft model vLLM loads) instead",
    FlagKind.DRAFT_LENGTH: "settings.draft_max or a candidate's \"params\": {\"draft_max\": K} instead",
    FlagKind.SPECULATION: "settings.vllm_method or a candidate's \"method\" instead",
    FlagKind.OUTPUT: "nothing: the draft is the model a \"drafts\" entry names, as it is",
}


def speculative_config_problems(where: str, config: object) -> list[Problem]:
    """The keys of a vLLM ``--speculative-config`` object (``settings.vllm_speculative_config``, a vLLM candidate's
    ``params``) that draftbench sets itself or that change the draft model: refused as ``-sc`` is in extra_args,
    since the server would run them while the row names the draft, k and method draftbench set."""
    if not isinstance(config, dict):
        return []
    problems = []
    for key in config:
        kind = SPECULATIVE_CONFIG_KEYS.get(key)
        if kind is not None:
            changes = next(r.changes for r in RULES if r.kind is kind)
            problems.append(Problem(f"{where}.{key}", f"sets the speculative config's {key!r}, which changes {changes}: "
                                    "draftbench sets that itself and records what it set, so the server would run "
                                    "this one while the screen and the results name the other",
                                    _remove(_SPECULATIVE_KEY_INSTEAD[kind])))
    return problems
