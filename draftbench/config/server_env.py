"""The environment a server we start gets: the one we decided, by the same rule table as its flags.

llama-server reads most of its options from ``LLAMA_ARG_*`` variables too (``--help`` names each:
``(env: LLAMA_ARG_SPEC_TYPE)``), before its command line, which wins. Inherited unchecked, such a variable
changes what is measured while the row names something else: ``LLAMA_ARG_SPEC_TYPE`` turns speculation on in a
baseline, ``LLAMA_ARG_CTX_SIZE`` shrinks the context, ``LLAMA_ARG_SPEC_DRAFT_MODEL`` loads a draft into every
server. So no ``LLAMA_ARG_*`` variable (nor ``LLAMA_API_KEY``) reaches a server as it is: one whose flag is
free in :mod:`.flag_rules` (``LLAMA_ARG_THREADS``) becomes that flag at the front of the command, where the
command line's own flags still win as they would over the variable, and is recorded with the command; every
other (a flag a rule covers, a name ``--help`` does not list, a value llama-server would not read) is cleared,
and one note names them. vLLM reads ``VLLM_*`` variables of its own, none standing for a flag: those that
only say where files and logs go or how workers start pass silently; any other passes as it is and one note
records it (name and value, secrets masked).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..common.redact_secrets import is_secret_name
from .extra_args import rule_for
from .flag_rules import FlagKind

LLAMA_PREFIX = "LLAMA_ARG_"
LLAMA_NEGATED = "LLAMA_ARG_NO_"
LLAMA_OTHERS = ("LLAMA_API_KEY",)            # a route of llama-server's own not named LLAMA_ARG_*
TRUTHY = ("on", "enabled", "true", "1")      # llama.cpp's common_arg_utils::is_truthy / is_falsey
FALSEY = ("off", "disabled", "false", "0")
VLLM_PREFIX = "VLLM_"
# vLLM variables that say where files and logs go, or how its processes start: they change nothing measured.
VLLM_QUIET = frozenset({
    "VLLM_CACHE_ROOT", "VLLM_CONFIG_ROOT", "VLLM_ASSETS_CACHE", "VLLM_RPC_BASE_PATH", "VLLM_LOGGING_LEVEL",
    "VLLM_LOGGING_PREFIX", "VLLM_CONFIGURE_LOGGING", "VLLM_LOGGING_CONFIG_PATH", "VLLM_NO_USAGE_STATS",
    "VLLM_DO_NOT_TRACK", "VLLM_USAGE_STATS_SERVER", "VLLM_WORKER_MULTIPROC_METHOD", "VLLM_HOST_IP",
    "VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_NUM_OF_RESERVED_CPU", "VLLM_TARGET_DEVICE",
})


@dataclass(frozen=True)
class EnvRoute:
    """One ``(env: NAME)`` of llama-server's ``--help``: the flags it stands for, their negations
    (``--no-mmap``), and whether the flag takes a value."""

    flags: tuple[str, ...]
    negative: tuple[str, ...] = ()
    takes_value: bool = True

    def to_dict(self) -> dict:
        return {"flags": list(self.flags), "negative": list(self.negative), "takes_value": self.takes_value}

    @classmethod
    def from_dict(cls, value: Mapping) -> EnvRoute:
        return cls(tuple(value.get("flags") or ()), tuple(value.get("negative") or ()),
                   bool(value.get("takes_value", True)))


@dataclass(frozen=True)
class ServerEnvironment:
    """What a server gets: ``env`` (the environment, whole), ``args`` (flags standing for inherited variables,
    placed first in the command), ``cleared`` (``NAME (why)`` for each variable not passed) and ``kept``
    (``NAME=value`` for each passed on unchecked)."""

    env: dict[str, str]
    args: tuple[str, ...] = ()
    cleared: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()

    def note(self, server: str) -> str | None:
        """One line for the console and the row's warnings, or None when there is nothing to say."""
        parts = []
        if self.cleared:
            parts.append(f"the environment's {', '.join(self.cleared)} {'was' if len(self.cleared) == 1 else 'were'} "
                         f"not passed to {server}: {'it' if len(self.cleared) == 1 else 'they'} would change what is "
                         "measured while the results name something else (use the config's own keys, or a free "
                         "flag in extra_args)")
        if self.kept:
            parts.append(f"{server} inherits {', '.join(self.kept)} from the environment (recorded here; draftbench "
                         "does not check what it changes)")
        return "; ".join(parts) or None


def _as_flags(route: EnvRoute, value: str, negated: bool) -> list[str] | None:
    """The flags a variable's value stands for, as llama.cpp reads it; None when it would not read it."""
    if route.takes_value:
        return None if negated else [route.flags[-1], value]
    if negated or value in FALSEY:
        return [route.negative[-1]] if route.negative else []
    return [route.flags[-1]] if value in TRUTHY else None


def _llama_variable(name: str, value: str, routes: Mapping[str, EnvRoute]) -> tuple[list[str] | None, str]:
    """The flags an inherited llama-server variable becomes, or None and why it is cleared."""
    route, negated = routes.get(name), False
    if route is None and name.startswith(LLAMA_NEGATED):
        route = routes.get(LLAMA_PREFIX + name[len(LLAMA_NEGATED):])
        negated = route is not None and bool(route.negative)
        route = route if negated else None
    if route is None or not route.flags:
        return None, "not an option of this llama-server"
    flag = next((f for f in route.flags + route.negative if (r := rule_for(f, "llamacpp")) is not None
                 and r.kind is not FlagKind.DRAFT_PLACEMENT), None)
    if flag is not None:
        return None, flag
    flags = _as_flags(route, value, negated)
    return (flags, "") if flags is not None else (None, f"{value!r} is not a value llama-server reads for it")


def llama_environment(environ: Mapping[str, str], routes: Mapping[str, EnvRoute]) -> ServerEnvironment:
    """The environment and leading flags of a llama-server we start, from the one we inherit and the routes
    its ``--help`` names (:class:`EnvRoute` by variable)."""
    env: dict[str, str] = {}
    args: list[str] = []
    cleared: list[str] = []
    for name in sorted(environ):
        value = environ[name]
        if not name.startswith(LLAMA_PREFIX) and name not in LLAMA_OTHERS:
            env[name] = value
            continue
        flags, why = _llama_variable(name, value, routes)
        if flags is None:
            cleared.append(f"{name} ({why})")
        else:
            args += flags
    return ServerEnvironment(env, tuple(args), tuple(cleared))


def vllm_environment(environ: Mapping[str, str]) -> ServerEnvironment:
    """vLLM's: everything passes; its own variables other than :data:`VLLM_QUIET` are recorded in the note."""
    kept = tuple(f"{name}={'***' if is_secret_name(name) else environ[name]}" for name in sorted(environ)
                 if name.startswith(VLLM_PREFIX) and name not in VLLM_QUIET)
    return ServerEnvironment(dict(environ), kept=kept)
