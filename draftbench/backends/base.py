"""The backend protocol: start → wait until ready → base URL → stream → stop.

A :class:`Backend` knows how to launch one kind of inference server and validate its
settings; :meth:`Backend.launch` returns a ready :class:`Server`, which the caller must
stop (it is a context manager, and stopping is idempotent).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import requests

from ..errors import BinaryNotFoundError, Problem, ServerError
from ..paths import expand_path
from ..process import ManagedProcess
from ..settings_schema import Field


@dataclass(frozen=True)
class LaunchSpec:
    """Everything a backend needs to start one server for one combination."""

    target: str                      # model path or id
    draft: str | None = None
    draft_max: int | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    ctx_size: int = 4096
    gpu_layers: int = 99
    extra_args: tuple[str, ...] = ()
    settings: dict = field(default_factory=dict)   # the whole validated settings (backend keys too)
    startup_timeout_s: float = 600.0
    log_path: str | None = None


@dataclass(frozen=True)
class DraftCounts:
    """Speculation counters for one request. ``None`` = not measured (never 0 for unknown)."""

    drafted: int | None = None       # draft tokens proposed
    accepted: int | None = None      # of those, accepted by the target
    steps: int | None = None         # verify steps (drafts) — gives mean accepted length
    source: str = ""                 # where the numbers came from (timings, metrics, stats…)
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SpeculationStatus:
    active: bool | None              # None: cannot tell (e.g. attached to a foreign server)
    reason: str = ""


class Server:
    """A ready server. Subclasses override what differs; the defaults suit OpenAI-style servers."""

    backend_name = "generic"

    def __init__(self, base_url: str, *, model: str = "default", process: ManagedProcess | None = None,
                 command: list[str] | None = None, version: str | None = None, load_time_s: float | None = None,
                 port: int | None = None, spec: LaunchSpec | None = None):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.process = process
        self.command = command
        self.version = version
        self.load_time_s = load_time_s
        self.port = port
        self.spec = spec
        self.session = requests.Session()
        self.warnings: list[str] = []

    # -- requests -------------------------------------------------------------------------
    def chat_url(self) -> str:
        return self.base_url + "/v1/chat/completions"

    def request_body(self, messages: list[dict], *, max_tokens: int, temperature: float, seed: int) -> dict:
        return {"model": self.model, "messages": messages, "max_tokens": max_tokens, "temperature": temperature,
                "seed": seed, "stream": True, "stream_options": {"include_usage": True}}

    def headers(self) -> dict:
        return {}

    def send(self, body: dict, *, request_timeout_s: float, stall_timeout_s: float):
        """Run one request and time it (streamed; a backend may answer differently)."""
        from ..client import stream_chat
        return stream_chat(self.session, self.chat_url(), body, headers=self.headers(),
                           request_timeout_s=request_timeout_s, stall_timeout_s=stall_timeout_s)

    def before_request(self) -> Any:
        """Snapshot taken just before a request (e.g. Prometheus counters)."""
        return None

    def draft_counts(self, response, before: Any) -> DraftCounts:
        return DraftCounts()

    def server_decode_tps(self, response) -> float | None:
        return None

    def speculation_status(self, requested: bool) -> SpeculationStatus:
        return SpeculationStatus(None if requested else False, "")

    # -- lifecycle ------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def log_path(self) -> str | None:
        return str(self.process.log_path) if self.process else None

    def alive(self) -> bool:
        return self.process.alive() if self.process else True

    def died(self, grace_s: float = 2.0) -> bool:
        """Did the server we started exit (waiting up to ``grace_s`` for it to be reaped)?"""
        return self.process.exited_within(grace_s) if self.process else False

    def log_tail(self, lines: int = 25) -> str:
        return self.process.log_tail(lines) if self.process else ""

    def stop(self) -> None:
        try:
            self.session.close()
        finally:
            if self.process:
                self.process.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


class Backend:
    """Launches one kind of server. Instances are stateless; register them in ``backends.REGISTRY``."""

    name = "base"                 # name used by server.py (e.g. "llama-cpp")
    config_name = "base"          # name used in sweep configs and results (e.g. "llamacpp")
    aliases: tuple[str, ...] = ()
    settings_schema: ClassVar[dict[str, Field]] = {}
    default_port = 8080

    def resolve_model(self, raw: str, base_dir: str) -> tuple[str, str | None]:
        """Turn a config ``path`` into what the server needs. Default: a local file path."""
        return expand_path(raw, base_dir)

    def model_problem(self, ref: str) -> str | None:
        """Why this model cannot be used (e.g. a missing file), or None. Checked before each run."""
        from ..errors import ModelFileError
        from ..gguf_meta import read_info
        try:
            read_info(ref)
        except ModelFileError as exc:
            return str(exc)
        return None

    def validate_settings(self, settings: dict) -> list[Problem]:
        return []

    def check_ready_to_run(self, settings: dict) -> None:
        """Raise a clear error before a sweep starts if the backend cannot run at all."""

    def sweep_notes(self, settings: dict) -> list[str]:
        """Lines the console prints once before a sweep (e.g. what the chosen client path cannot measure)."""
        return []

    def launch(self, spec: LaunchSpec) -> Server:
        raise NotImplementedError

    def attach(self, base_url: str, *, model: str | None = None, api_key: str | None = None) -> Server:
        """A server somebody else started (``bench.py --url``). We measure it; we never stop it."""
        return AttachedServer(base_url, model=model or "default", api_key=api_key)


class AttachedServer(Server):
    """An OpenAI-compatible server we did not start: no process, optional API key."""

    def __init__(self, base_url: str, *, model: str = "default", api_key: str | None = None):
        super().__init__(base_url, model=model)
        self._api_key = api_key  # kept in memory only: never written to results or logs

    def headers(self) -> dict:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}


def wait_until_ready(process: ManagedProcess, url: str, timeout_s: float, *, what: str,
                     ready: Callable[[requests.Response], bool] | None = None,
                     on_exit: Callable[[int | None, str], ServerError] | None = None) -> float:
    """Poll ``url`` until it answers 200 (and ``ready(response)`` agrees).

    Short, growing intervals (no fixed sleeps). Raises :class:`ServerError` if the process
    exits (with the tail of its log) or the time-out passes. Returns seconds waited.
    """
    start = time.perf_counter()
    delay = 0.05
    session = requests.Session()
    try:
        while True:
            if not process.alive():
                tail = process.log_tail(30)
                if on_exit:
                    raise on_exit(process.returncode, tail)
                raise ServerError(f"{what} exited with code {process.returncode} while loading",
                                  "see the log lines below", log_tail=tail, log_path=str(process.log_path))
            try:
                response = session.get(url, timeout=2)
                # Anything else (503 while loading, 404 before routes are mounted) means: not yet.
                if response.status_code == 200 and (ready is None or ready(response)):
                    return time.perf_counter() - start
            except requests.RequestException:
                pass  # not listening yet
            if time.perf_counter() - start > timeout_s:
                raise ServerError(f"{what} did not become ready within {timeout_s:g} s",
                                  "raise settings.startup_timeout_s (big models load slowly), or read the log",
                                  log_tail=process.log_tail(30), log_path=str(process.log_path), kind="timeout")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)
    finally:
        session.close()


def same_file(a: str | None, b: str | None) -> bool:
    if not a or not b:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b) or Path(a).name == Path(b).name


def find_executable(name: str, explicit: str | None, *, env_var: str, setting: str, how_to_get: str,
                    candidates: tuple = ()) -> str | None:
    """An explicit path (a folder holding ``name`` will do; it must exist and be executable), else
    ``$env_var``, else ``PATH``, else the first executable of ``candidates``; None if none is found."""
    if explicit:
        path = os.path.expanduser(explicit)
        if os.path.isdir(path):
            path = os.path.join(path, name)
        if not os.path.isfile(path):
            raise BinaryNotFoundError(f"{name} not found at {explicit}", f"fix {setting}, or remove it to search "
                                      f"automatically; or {how_to_get}")
        if not os.access(path, os.X_OK):
            raise BinaryNotFoundError(f"{name} at {path} is not executable", f"chmod +x {path}")
        return os.path.abspath(path)
    from_env = os.environ.get(env_var)
    if from_env:
        return find_executable(name, from_env, env_var=env_var, setting=f"${env_var}", how_to_get=how_to_get)
    on_path = shutil.which(name)
    if on_path:
        return on_path
    for candidate in candidates:
        candidate = os.path.expanduser(str(candidate))
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    return None


def url_host(host: str) -> str:
    """The address to connect to for a server bound to ``host`` (wildcards mean this machine)."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def explain_exit_from_log(failures: tuple, server_name: str, crash_fix: str, returncode: int | None,
                          log_tail: str, port: int, log_path: str | None) -> ServerError:
    """Name why a server exited: the first of ``failures`` (pattern, kind, message, fix) whose
    pattern the log tail matches, else a crash (killed by a signal) or a plain exit."""
    for pattern, kind, message, fix in failures:
        if re.search(pattern, log_tail, re.IGNORECASE):
            return ServerError(message.format(port=port) + f" (exit code {returncode})", fix, log_tail=log_tail,
                               log_path=log_path, kind=kind)
    if returncode is not None and returncode < 0:
        return ServerError(f"{server_name} crashed (signal {-returncode})", crash_fix, log_tail=log_tail,
                           log_path=log_path, kind="crash")
    return ServerError(f"{server_name} exited with code {returncode} while loading", "see the log lines below",
                       log_tail=log_tail, log_path=log_path, kind="server")
