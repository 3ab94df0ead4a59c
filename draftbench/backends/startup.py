"""Starting a server process: wait until it answers, check that it is ours, time its load.

Shared by the backends that start a process of their own (llama.cpp, vLLM); LM Studio runs its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import requests

from ..common.errors import ServerError, ServerErrorKind
from ..lifetime.polling import poll
from ..lifetime.process import ManagedProcess
from .base import LaunchSpec, Server
from .exit_reasons import log_fix


def launch_process(server: Server, spec: LaunchSpec, *, what: str, health_path: str,
                   explain_exit: Callable[[int | None, str], ServerError],
                   verify: Callable[[Server], None]) -> Server:
    """Wait until the process behind ``server`` is ready, check it is ours, and time the load. Shared by the
    backends that start a server process: on any failure (or Ctrl-C) the process group is stopped first."""
    assert server.process is not None
    start = server.process.started_at
    try:
        wait_until_ready(server.process, server.base_url + health_path, spec.startup_timeout_s, what=what,
                         on_exit=explain_exit)
        server.load_time_s = time.perf_counter() - start
        if not server.alive():
            raise explain_exit(server.returncode, server.log_tail(30))
        verify(server)
    except BaseException:
        server.stop()
        raise
    return server


def wait_until_ready(process: ManagedProcess, url: str, timeout_s: float, *, what: str,
                     ready: Callable[[requests.Response], bool] | None = None,
                     on_exit: Callable[[int | None, str], ServerError] | None = None) -> float:
    """Poll ``url`` until it answers 200 (and ``ready(response)`` agrees), at short, growing intervals; raise
    :class:`ServerError` if the process exits (with its log's tail) or the time-out passes. Seconds waited."""
    start = time.perf_counter()
    session = requests.Session()

    def ready_now() -> bool | None:
        if not process.alive():
            tail = process.log_tail(30)
            if on_exit:
                raise on_exit(process.returncode, tail)
            raise ServerError(f"{what} exited with code {process.returncode} while loading",
                              log_fix("see the log lines below", tail, str(process.log_path)), log_tail=tail,
                              log_path=str(process.log_path))
        try:
            response = session.get(url, timeout=2)
        except requests.RequestException:
            return None   # not listening yet
        # Anything else (503 while loading, 404 before routes are mounted) means: not yet.
        return True if response.status_code == 200 and (ready is None or ready(response)) else None

    try:
        if poll(ready_now, timeout_s) is None:
            raise ServerError(f"{what} did not become ready within {timeout_s:g} s",
                              "raise settings.startup_timeout_s (big models load slowly), or read the log",
                              log_tail=process.log_tail(30), log_path=str(process.log_path),
                              kind=ServerErrorKind.TIMEOUT)
        return time.perf_counter() - start
    finally:
        session.close()
