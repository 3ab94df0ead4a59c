"""A server address given by a person (``bench.py --url``), checked and split from its credentials.

``http://user:pass@host:8080/v1`` is accepted: the base URL we print, store and connect to is
``http://host:8080``, and the user name and password travel separately, as HTTP basic auth, so
they are never shown on the terminal nor written to ``--json`` or any results file. Anything that
is not an http(s) address of a host with a port in 1–65535 is one clear error naming the flag,
never a ``requests`` exception about an "InvalidURL".
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from ...common.errors import UsageError
from ...common.redact_secrets import MASK

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(?!\d+(?:[/?#]|$))")   # "file:…", not "localhost:8080"
_HOST = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
EXAMPLE = "http://127.0.0.1:8080"


@dataclass(frozen=True)
class ServerURL:
    base: str                                 # scheme://host[:port][/prefix], no credentials, no /v1
    auth: tuple[str, str] | None = None       # (user, password) from the address, for basic auth

    def __str__(self) -> str:
        return self.base


def shown(text: str) -> str:
    """``text`` as it may be printed: a password in it masked."""
    return re.sub(r"(?<=://)([^/@\s:]*):[^/@\s]*@", rf"\1:{MASK}@", text)


def parse_server_url(text: str, flag: str = "--url") -> ServerURL:
    """Check an address and split off its credentials; :class:`UsageError` (one line) when it is not usable."""
    raw = text.strip()

    def bad(why: str) -> UsageError:
        return UsageError(f"{flag} {shown(raw) or repr(text)}: {why}", f"give the server's address, e.g. {flag} {EXAMPLE}")

    if not raw:
        raise bad("is empty")
    scheme = _SCHEME.match(raw)
    if scheme is None:
        raw = "http://" + raw
    elif scheme.group(1).lower() not in ("http", "https"):
        raise bad(f"the scheme must be http or https, not {scheme.group(1)}")
    elif not raw[scheme.end():].startswith("//"):
        raise bad("is not an address (write http://HOST:PORT)")
    parts = urlsplit(raw)
    try:
        port = parts.port
    except ValueError:
        raise bad(f"the port must be a number from 1 to 65535, not {parts.netloc.rpartition(':')[2]!r}") from None
    if port == 0:
        raise bad("the port must be a number from 1 to 65535, not 0")
    host = parts.hostname or ""
    if not host:
        raise bad("names no host")
    if ":" in host:
        try:
            ipaddress.IPv6Address(host.split("%")[0])
        except ValueError:
            raise bad(f"{host!r} is not a host name or address") from None
    elif not _HOST.match(host):
        raise bad(f"{host!r} is not a host name or address")
    if parts.query or parts.fragment or "?" in raw or "#" in raw:
        raise bad("has a query or fragment (?… or #…); give the server's root address")
    netloc = (f"[{host}]" if ":" in host else host) + (f":{port}" if port is not None else "")
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    auth = None
    if parts.username is not None or parts.password is not None:
        auth = (unquote(parts.username or ""), unquote(parts.password or ""))
    return ServerURL(f"{parts.scheme.lower()}://{netloc}{path}", auth)
