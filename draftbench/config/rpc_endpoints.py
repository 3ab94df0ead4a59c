"""RPC endpoints a target's layers are split over (llama.cpp's RPC backend), and where a draft runs.

A target entry may carry ``"rpc": ["host:port", …]``: llama-server is then started with
``--rpc`` and offloads the target's layers to those ``ggml-rpc-server`` processes.
``settings.draft_placement`` (``"local"``, ``"rpc"`` or a list of both, swept like ``draft_max``)
says where each draft runs: on the machine that runs llama-server, or split over the target's
RPC devices.

llama.cpp's RPC README calls the backend a proof of concept that must never be exposed on an
open network, so an endpoint other than loopback needs ``settings.allow_remote``, as a server
address other than loopback does (see :mod:`draftbench.config.extra_args`; ``--rpc`` passed through to
llama-server is held to the same checks there).
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from ..common.errors import Problem
from ..common.text_safety import safe_text
from .hosts import is_loopback
from .settings import Origin, Settings

RPC_KEY = "rpc"
DRAFT_PLACEMENT = "draft_placement"
PLACEMENTS = ("local", "rpc")
# The README's own words (tools/rpc/README.md of the vendored llama.cpp), quoted wherever an endpoint is exposed.
README_WARNING = ("llama.cpp's RPC README: \"This example and the RPC backend are currently in a proof-of-concept "
                  "development stage. As such, the functionality is fragile and insecure. Never run the RPC server "
                  "on an open network or in a sensitive environment!\"")


def parse_endpoint(text: str) -> tuple[str, int] | None:
    """``"host:port"`` as llama.cpp reads it (up to the first ``:``); None when it is not one. The port is
    ASCII digits only: ``str.isdigit`` also takes ``²`` and fullwidth ``５``, which ``int`` refuses or reads
    differently from llama.cpp."""
    host, sep, port = text.strip().partition(":")
    if not sep or not host or not port.isascii() or not port.isdigit() or len(port.lstrip("0")) > 5 \
            or not 0 < int(port) < 65536:
        return None
    if any(c in host for c in " ,[]/\\\t") or ":" in port:
        return None
    return host, int(port)


def endpoint_problem(where: str, value: Any) -> Problem | None:
    """Why one configured endpoint is unusable, or None."""
    if not isinstance(value, str) or not value.strip():
        return Problem(where, f"must be a \"host:port\" string, not {json.dumps(value)[:40]}",
                       "write e.g. \"127.0.0.1:50052\" (the address of a running ggml-rpc-server)")
    if value.count(":") > 1:
        return Problem(where, f"{value!r} looks like an IPv6 address; llama.cpp reads an RPC endpoint up to its "
                       "first ':' and cannot reach one", "use an IPv4 address or a host name, e.g. \"127.0.0.1:50052\"")
    host, _, port = value.strip().partition(":")
    foreign = next((ch for ch in host if not ch.isascii() or not ch.isprintable()), None)
    if foreign is not None:     # "１２７.０.０.１": the probe's resolver reads 127.0.0.1, llama-server another text
        name = unicodedata.name(foreign, f"U+{ord(foreign):04X}")
        return Problem(where, f"{safe_text(repr(value))}: its host holds {safe_text(repr(foreign))} ({name}), not only "
                       "ASCII", "write the address in plain ASCII (an international name in its xn-- form), e.g. "
                       "\"127.0.0.1:50052\"")
    odd = next((ch for ch in port if not ("0" <= ch <= "9")), None)
    if odd is not None and port and any(ch.isdigit() for ch in port):
        name = unicodedata.name(odd, f"U+{ord(odd):04X}")
        return Problem(where, f"{safe_text(repr(value))}: its port holds {safe_text(repr(odd))} ({name}), not only the "
                       "digits 0-9", "write the port in plain digits, e.g. \"127.0.0.1:50052\"")
    if parse_endpoint(value) is None:
        return Problem(where, f"{safe_text(repr(value))} is not host:port with a port from 1 to 65535",
                       "write e.g. \"127.0.0.1:50052\" (start one with: python server.py rpc-server --port 50052)")
    return None


def check_rpc_entry(where: str, value: Any, *, allow_remote: bool, problems: list[Problem],
                    warnings: list[Problem], allow_flag: str = "settings.allow_remote") -> tuple[str, ...]:
    """A target's ``rpc`` list (or the endpoints of a ``--rpc`` passed through to llama-server), checked: the
    endpoints as llama-server will get them (stripped). ``allow_flag`` lets an endpoint leave this machine."""
    if value is None:
        return ()
    if not isinstance(value, list) or not value:
        problems.append(Problem(where, "must be a non-empty list of \"host:port\" strings",
                                "write e.g. [\"127.0.0.1:50052\", \"127.0.0.1:50053\"], or remove the key"))
        return ()
    out: list[str] = []
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        problem = endpoint_problem(at, item)
        if problem:
            problems.append(problem)
            continue
        endpoint = item.strip()
        if endpoint in out:
            problems.append(Problem(at, f"lists {endpoint} a second time", "list every endpoint once"))
            continue
        host = endpoint.partition(":")[0]
        if not is_loopback(host):
            if not allow_remote:
                allow = f"{allow_flag}: true" if allow_flag.startswith("settings.") else allow_flag
                problems.append(Problem(at, f"{endpoint} is on another machine; the RPC protocol has no "
                                        "authentication or encryption. " + README_WARNING,
                                        "keep endpoints on loopback, or use one on a trusted private network on "
                                        f"purpose with {allow}"))
                continue
            warnings.append(Problem(at, f"{endpoint} is reached over the network ({allow_flag}). "
                                    + README_WARNING))
        out.append(endpoint)
    return tuple(out)


def placements(value: Any) -> tuple[str, ...]:
    """``settings.draft_placement`` as a tuple of placements (() when not set)."""
    if value is None:
        return ()
    return tuple(value) if isinstance(value, list) else (value,)


def placement_problems(where: str, value: Any) -> list[Problem]:
    """``"local"``, ``"rpc"``, or a non-empty list of them, each once."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    if isinstance(value, list) and not value:
        return [Problem(where, "is an empty list", "give \"local\", \"rpc\" or both, or remove the key")]
    bad = [v for v in items if v not in PLACEMENTS]
    if bad:
        return [Problem(where, f"{json.dumps(bad[0])[:40]} is not a draft placement",
                        "use \"local\" (the draft on the machine running llama-server), \"rpc\" (split over the "
                        "target's RPC devices), or [\"local\", \"rpc\"] to measure both")]
    if len(set(items)) != len(items):
        return [Problem(where, "lists a placement more than once", "list every placement once")]
    return []


def sweep_problems(rpc_by_target: dict[str, tuple[str, ...]], settings: Settings, origin: Origin, *, backend: str,
                   backend_has_rpc: bool, candidate_placements: dict[str, Any]) -> list[Problem]:
    """What the RPC keys of a whole config get wrong together: ``rpc_by_target`` maps each target's JSON
    path to its endpoints, ``candidate_placements`` each candidate's JSON path to its ``draft_placement``."""
    placement = settings.draft_placement
    problems = placement_problems("$.settings.draft_placement", placement)
    split = {where: eps for where, eps in rpc_by_target.items() if eps}
    wants_placement = placement is not None or bool(candidate_placements)
    if not backend_has_rpc:
        problems += [Problem(f"{where}.rpc", f"{backend} cannot split a model over llama.cpp RPC endpoints",
                             "remove it, or use backend llamacpp") for where in split]
        if placement is not None:
            problems.append(Problem("$.settings.draft_placement", f"is a llama.cpp RPC setting; {backend} has none",
                                    "remove it, or use backend llamacpp"))
        problems += [Problem(f"{where}.params.draft_placement", f"is a llama.cpp RPC setting; {backend} has none",
                             "remove it, or use backend llamacpp") for where in candidate_placements]
        return problems
    if split and settings.gpu_layers == 0:
        problems.append(Problem("$.settings.gpu_layers", "is 0, which keeps every layer on this machine: the RPC "
                                "endpoints of " + ", ".join(split) + " would hold nothing",
                                "set gpu_layers to 99 (all layers offloaded to the RPC devices), or remove rpc"))
    if split and settings.design == "interleaved" and origin.flag("design"):
        problems.append(Problem(origin.where("design"), "runs two llama-servers at once, but "
                                f"{', '.join(split)} is split over RPC endpoints and a "
                                "ggml-rpc-server serves one at a time", "use --design auto (bracketed for a split "
                                "target) or --design bracketed"))
    elif split and settings.design == "interleaved":
        problems.append(Problem("$.settings.design", "is \"interleaved\", but a ggml-rpc-server serves one "
                                "llama-server at a time: the baseline and candidate servers of " + ", ".join(split)
                                + " cannot both use its endpoints", "use \"auto\" (bracketed for a target split "
                                "over RPC) or \"bracketed\""))
    if wants_placement and not split:
        problems.append(Problem("$.settings.draft_placement" if placement is not None
                                else f"{next(iter(candidate_placements))}.params.draft_placement",
                                "says where a draft runs beside a target split over RPC endpoints, but no target "
                                "has \"rpc\"", "add \"rpc\": [\"host:port\", …] to a target, or remove it"))
    return problems
