"""Addresses: which are this machine only, and what to say when a server is exposed beyond it.

A leaf of the config package, shared by the server-argument rules (:mod:`.extra_args`) and the RPC
endpoints (:mod:`.rpc_endpoints`).
"""

from __future__ import annotations

import ipaddress


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
