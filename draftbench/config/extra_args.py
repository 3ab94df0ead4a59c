"""Rules for arguments passed through to a server: a config's ``extra_args``, and what follows ``--`` on
``bench.py --target`` and ``server.py``. One table (:data:`RULES`) for all three.

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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from ..common.errors import Problem
from ..common.reading import SMALL_LIMIT, UnreadableFile, read_limited
from .hosts import is_loopback, remote_warning
from .rpc_endpoints import check_rpc_entry


class FlagKind(str, Enum):
    PORT = "port"
    HOST = "host"
    RPC = "rpc"
    TARGET = "target"
    DRAFT = "draft"
    DRAFT_LENGTH = "draft_length"
    SPECULATION = "speculation"
    CONFIG_FILE = "config_file"
    API_KEY = "api_key"
    DRAFT_PLACEMENT = "draft_placement"      # how the draft runs (threads, devices): allowed, like --threads


@dataclass(frozen=True)
class FlagRule:
    kind: FlagKind
    changes: str                            # what the flag changes, in words
    names: tuple[str, ...] = ()             # every spelling (llama-server's aliases, vLLM's names)
    prefixes: tuple[str, ...] = ()          # and every long flag starting with one of these


# The vendored llama-server (build 11434, `llama-server --help`) and vLLM 0.32 (`vllm serve --help`).
RULES: tuple[FlagRule, ...] = (
    FlagRule(FlagKind.PORT, "the port the server listens on", ("--port",)),
    FlagRule(FlagKind.HOST, "the address the server listens on", ("--host",)),
    FlagRule(FlagKind.RPC, "where the target's layers run (llama.cpp RPC endpoints)", ("--rpc",)),
    FlagRule(FlagKind.TARGET, "the model measured",
             ("-m", "--model", "-mu", "--model-url", "-hf", "-hfr", "--hf-repo", "-hff", "--hf-file", "-dr",
              "--docker-repo", "--models-dir", "--models-preset",
              # llama-server's presets download and load a model of their own (one with a draft, too)
              "--embd-gemma-default", "--fim-qwen-1.5b-default", "--fim-qwen-3b-default", "--fim-qwen-7b-default",
              "--fim-qwen-7b-spec", "--fim-qwen-14b-spec", "--fim-qwen-30b-default", "--gpt-oss-20b-default",
              "--gpt-oss-120b-default", "--vision-gemma-4b-default", "--vision-gemma-12b-default")),
    FlagRule(FlagKind.DRAFT, "the draft model",
             ("-md", "--model-draft", "--spec-draft-model", "-hfd", "-hfrd", "--hf-repo-draft", "--spec-draft-hf",
              "--spec-model", "--speculative-model")),
    FlagRule(FlagKind.DRAFT_LENGTH, "the draft length k",
             ("--spec-draft-n-max", "--draft", "--draft-n", "--draft-max", "--spec-tokens",
              "--num-speculative-tokens")),
    FlagRule(FlagKind.DRAFT_PLACEMENT, "where and how fast the draft runs",
             ("-ngld", "--spec-draft-ngl", "--gpu-layers-draft", "--n-gpu-layers-draft", "-devd", "--device-draft",
              "--spec-draft-device", "-td", "--threads-draft", "--spec-draft-threads", "-tbd", "--threads-batch-draft",
              "--spec-draft-threads-batch", "-ctkd", "--cache-type-k-draft", "--spec-draft-type-k", "-ctvd",
              "--cache-type-v-draft", "--spec-draft-type-v", "-otd", "--override-tensor-draft",
              "--spec-draft-override-tensor", "-Cd", "--cpu-mask-draft", "--spec-draft-cpu-mask", "-Cbd",
              "--cpu-mask-batch-draft", "--spec-draft-cpu-mask-batch", "-Crd", "--cpu-range-draft",
              "--spec-draft-cpu-range", "-Crbd", "--cpu-range-batch-draft", "--spec-draft-cpu-range-batch",
              "--cpu-strict-draft", "--spec-draft-cpu-strict", "--cpu-strict-batch-draft",
              "--spec-draft-cpu-strict-batch", "--poll-draft", "--spec-draft-poll", "--poll-batch-draft",
              "--spec-draft-poll-batch", "--prio-draft", "--spec-draft-prio", "--prio-batch-draft",
              "--spec-draft-prio-batch", "-cmoed", "--cpu-moe-draft", "--spec-draft-cpu-moe", "-ncmoed",
              "--n-cpu-moe-draft", "--spec-draft-n-cpu-moe", "--spec-draft-ncmoe")),
    FlagRule(FlagKind.SPECULATION, "how the server speculates",
             ("-sc", "--speculative-config", "--spec-type", "--spec-default", "--spec-method"),
             prefixes=("--spec-", "--draft-", "--speculative-", "--no-spec-")),
    FlagRule(FlagKind.CONFIG_FILE, "any option at all, read from a file draftbench does not check (vLLM's --config)",
             ("--config",)),
    FlagRule(FlagKind.API_KEY, "the key its clients must send", ("--api-key", "--api-key-file")),
)
_BY_NAME = {name: rule for rule in RULES for name in rule.names}
# Covered flags that take no value: what follows them is an argument of its own.
SWITCHES = frozenset({"--spec-default", "--spec-draft-backend-sampling", "--cpu-strict-draft",
                      "--spec-draft-cpu-strict", "--cpu-strict-batch-draft", "--spec-draft-cpu-strict-batch",
                      "-cmoed", "--cpu-moe-draft", "--spec-draft-cpu-moe"})
_LONG_NAMES = sorted(name for name in _BY_NAME if name.startswith("--"))
_SEVERITY = [FlagKind.TARGET, FlagKind.DRAFT, FlagKind.RPC, FlagKind.CONFIG_FILE, FlagKind.DRAFT_LENGTH,
             FlagKind.SPECULATION, FlagKind.PORT, FlagKind.HOST, FlagKind.API_KEY, FlagKind.DRAFT_PLACEMENT]
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


def rule_for(name: str) -> FlagRule | None:
    """The rule for one flag name (canonical: dashes, no value), or None when it changes nothing we measure."""
    rule = _BY_NAME.get(name)
    if rule is not None:
        return rule
    if not name.startswith("--"):
        return None
    prefixed = next((r for r in RULES if any(name.startswith(p) for p in r.prefixes)), None)
    if prefixed is not None:
        return prefixed
    if len(name) >= MIN_ABBREVIATION:
        completed = [_BY_NAME[n] for n in _LONG_NAMES if n.startswith(name)]
        completed = [r for r in completed if r.kind is not FlagKind.DRAFT_PLACEMENT]
        if completed:
            return min(completed, key=lambda r: _SEVERITY.index(r.kind))
    return None


def find_flags(args: Sequence[str]) -> list[FlagUse]:
    """Every argument a rule covers. A flag's value is the next argument even when it starts with '-'
    (llama-server takes it so: ``--api-key -x`` sets the key ``-x``)."""
    found: list[FlagUse] = []
    skip = -1
    for i, arg in enumerate(args):
        parsed = None if i == skip else _canonical(arg)
        if parsed is None:
            continue
        name, value = parsed
        rule = rule_for(name)
        if rule is None:
            continue
        if value is None and "=" not in arg and name not in SWITCHES and not name.startswith("--no-"):
            value = args[i + 1] if i + 1 < len(args) else None
            skip = i + 1          # a value, never a flag of its own (a key may start with '-')
        found.append(FlagUse(i, arg.partition("=")[0], name, rule, value))
    return found


@dataclass(frozen=True)
class EntryPoint:
    """How one command line answers each kind of flag: refused (``instead``: the option to use), or checked
    like its own field (``--host``, ``--rpc`` behind ``allow_flag``); kinds in neither are passed on."""

    instead: Mapping[FlagKind, str]
    allow_flag: str                     # the switch that lets a server or an endpoint leave this machine
    checks_rpc: bool = False            # --rpc held to targets[].rpc's checks (else it is in ``instead``)


_NO_CONFIG_FILE = "its options themselves, where each is checked"
SWEEP = EntryPoint({
    FlagKind.PORT: "settings.port instead (0 = any free port)",
    FlagKind.RPC: "the target's \"rpc\": [\"host:port\", …] instead (draftbench probes the endpoints first and records "
                  "the split)",
    FlagKind.TARGET: "the target's \"path\" instead",
    FlagKind.DRAFT: "a \"drafts\" entry (or a candidate's \"draft\") instead",
    FlagKind.DRAFT_LENGTH: "settings.draft_max or a candidate's \"params\": {\"draft_max\": K} instead",
    FlagKind.SPECULATION: "a candidate's \"method\" and \"params\" instead (e.g. \"params\": "
                          "{\"spec_ngram_mod_n_match\": 24}; vLLM: settings.vllm_speculative_config)",
    FlagKind.CONFIG_FILE: _NO_CONFIG_FILE,
}, allow_flag="settings.allow_remote")
AB = EntryPoint({
    FlagKind.PORT: "nothing: the A/B picks a free port for each server",
    FlagKind.RPC: "a sweep config's targets[].rpc instead (draftbench probes the endpoints first and records the "
                  "split)",
    FlagKind.TARGET: "--target instead",
    FlagKind.DRAFT: "--draft instead",
    FlagKind.DRAFT_LENGTH: "--draft-max instead",
    FlagKind.SPECULATION: "--spec-type instead (other parameters: a sweep config's candidate \"params\")",
    FlagKind.CONFIG_FILE: _NO_CONFIG_FILE,
}, allow_flag="server.py --allow-remote (then bench.py --url)")
_SERVER_PORT = "server.py's --port instead (0 = any free port)"
SERVER = {      # server.py, by backend: its own options replace these
    "llamacpp": EntryPoint({
        FlagKind.PORT: _SERVER_PORT, FlagKind.TARGET: "--model-path instead", FlagKind.DRAFT: "--draft-path instead",
        FlagKind.DRAFT_LENGTH: "--draft-max instead", FlagKind.CONFIG_FILE: _NO_CONFIG_FILE,
    }, allow_flag="--allow-remote", checks_rpc=True),
    "vllm": EntryPoint({
        FlagKind.PORT: _SERVER_PORT, FlagKind.TARGET: "--model instead", FlagKind.DRAFT: "--draft-model instead",
        FlagKind.DRAFT_LENGTH: "--num-speculative-tokens instead",
        FlagKind.SPECULATION: "--method, --draft-model and --num-speculative-tokens instead",
        FlagKind.RPC: "nothing: vLLM has no llama.cpp RPC", FlagKind.CONFIG_FILE: _NO_CONFIG_FILE,
    }, allow_flag="--allow-remote"),
    "lmstudio": EntryPoint({
        FlagKind.PORT: _SERVER_PORT, FlagKind.TARGET: "--model instead", FlagKind.DRAFT: "--draft-model instead",
        FlagKind.RPC: "nothing: LM Studio has no llama.cpp RPC", FlagKind.CONFIG_FILE: _NO_CONFIG_FILE,
    }, allow_flag="--allow-remote"),
}


def split_server_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """A command line's own options, and everything after a bare ``--`` (for the server, untouched)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def check_server_args(path: str, args: Sequence[str], *, allow_remote: bool, entry: EntryPoint = SWEEP,
                      allow_flag: str | None = None,
                      where: Callable[[int], str] | None = None) -> tuple[list[Problem], list[str]]:
    """Problems and warnings for one argument list under ``entry``'s rules; ``path`` is its JSON path
    (``$.settings.extra_args``), and argument ``i`` is named ``path[i]`` unless ``where(i)`` names it otherwise."""
    name = where or (lambda i: f"{path}[{i}]")
    allow = allow_flag or entry.allow_flag
    problems: list[Problem] = []
    warnings: list[str] = []
    for use in find_flags(args):
        kind = use.rule.kind
        if kind in entry.instead:
            problems.append(_refused(name(use.index), use, entry.instead[kind]))
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
    else:
        why = (f"which changes {use.rule.changes}: draftbench sets that itself and records what it set, so the server "
               "would run this one while the screen and the results name the other")
    return Problem(where, f"sets {use.written}; {why}", f"remove it; use {instead}")


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
