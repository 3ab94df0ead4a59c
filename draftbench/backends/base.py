"""The backend protocol: start → wait until ready → base URL → stream → stop.

A :class:`Backend` knows how to launch one kind of inference server and validate its
settings; :meth:`Backend.launch` returns a ready :class:`Server`, which the caller must
stop (it is a context manager, and stopping is idempotent).
"""

from __future__ import annotations

import argparse
import os
import threading
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar

import requests

from ..common.errors import ModelFileError, ModelProblem, Problem, ServerError
from ..common.files import PathProblem, expand_path
from ..common.gguf import read_info
from ..config.candidates import CandidateSpec
from ..config.long_prompts import Tokenizer
from ..config.model_ref import ModelRef
from ..config.settings import DEFAULTS, BackendSettings, Settings
from ..lifetime import machine_load
from ..lifetime.process import ManagedProcess
from ..results.memory import ServerMemory
from .exit_reasons import explain_exit_from_log  # noqa: F401 (re-exported)
from .http.client import StreamedResponse, new_session, stream_chat
from .slots import SlotState


@dataclass(frozen=True)
class LaunchSpec:
    """Everything a backend needs to start one server for one combination."""

    target: str                      # model path or id
    draft: str | None = None         # draft model path or id (None: no draft model)
    draft_max: int | None = None
    method: tuple[str, ...] = ()     # speculative methods, the backend's names (): a draft's default, or none
    params: dict = field(default_factory=dict)     # the candidate's method parameters (backend names)
    host: str = DEFAULTS.host
    port: int = DEFAULTS.port
    ctx_size: int = DEFAULTS.ctx_size
    gpu_layers: int = DEFAULTS.gpu_layers
    extra_args: tuple[str, ...] = ()
    settings: Settings = DEFAULTS               # the whole validated settings (the backend's own in .backend)
    startup_timeout_s: float = DEFAULTS.startup_timeout_s
    log_path: str | None = None
    concurrency: int = 1             # requests served at once (llama.cpp slots; ctx_size stays per slot)
    rpc: tuple[str, ...] = ()        # llama.cpp RPC endpoints the target is split over ("host:port")
    draft_placement: str | None = None   # "local" | "rpc": where the draft runs beside an RPC target (None: default)
    context_tokens: int | None = None    # the context axis: the prompts' length (ctx_size is sized to fit it)


class CountsSource(str, Enum):
    """Where a request's draft counters came from (recorded with every request)."""

    TIMINGS = "timings"              # llama.cpp's per-request ``timings``
    METRICS = "metrics"              # Prometheus counters read before and after the request
    RESPONSE = "response"            # vLLM's per-request ``metrics.speculative_decoding``
    STATS = "stats"                  # LM Studio's ``stats``
    STATS_WITHOUT_DRAFT = "stats-without-draft"   # LM Studio answered, with no draft counters: it did not draft
    SDK_STATS = "sdk-stats"          # LM Studio's typed ``LlmPredictionStats`` through its Python SDK
    SDK_STATS_WITHOUT_DRAFT = "sdk-stats-without-draft"   # the same, with no draft counters: it did not draft


@dataclass(frozen=True)
class DraftCounts:
    """Speculation counters for one request. ``None`` = not measured (never 0 for unknown)."""
    drafted: int | None = None       # draft tokens the target verified
    accepted: int | None = None      # of those, accepted by the target
    steps: int | None = None         # verify steps (drafts) — gives mean accepted length
    source: CountsSource | None = None
    accepted_per_pos: tuple[int, ...] | None = None   # accepted by draft position (0 = first); None: not reported
    details: dict = field(default_factory=dict)   # backend-specific extras, saved with the request


@dataclass(frozen=True)
class SpeculationStatus:
    active: bool | None              # None: cannot tell (e.g. attached to a foreign server)
    reason: str = ""


@dataclass(frozen=True)
class Launched:
    """How a server we started was started, as its rows record it: the process group to stop (None where
    another program runs it, e.g. LM Studio), the command, the port, the binary's version, the load time."""

    process: ManagedProcess | None = None
    command: list[str] | None = None
    port: int | None = None
    version: str | None = None
    load_time_s: float | None = None


@dataclass(frozen=True)
class Credentials:
    """How to be let in: an API key (a Bearer token) or an address's user:password. Memory only: never
    written to results or logs."""

    api_key: str | None = None
    auth: tuple[str, str] | None = None


NOT_LAUNCHED = Launched()        # a server somebody else started (bench.py --url)
NO_CREDENTIALS = Credentials()


class Server:
    """A ready server: the one object the measurement code talks to.

    Every member is declared here with the behaviour of a plain OpenAI-compatible server; backends override
    what differs. ``stop()`` is idempotent and the object is a context manager, so whoever launched it can
    always stop it."""

    stop_grace_s: float = 3.0        # SIGTERM → SIGKILL grace for the server's process group
    methods_evidence: str = "the server's own report"   # where active_methods() reads what the server runs

    def __init__(self, base_url: str, *, model: str = "default", launched: Launched = NOT_LAUNCHED,
                 credentials: Credentials = NO_CREDENTIALS, probe_timeout_s: float | None = None):
        self.base_url = base_url.rstrip("/")
        self.model = model
        # attributes, not the frozen record: a backend learns the version and the load time after starting
        self.process = launched.process
        self.command = launched.command
        self.version = launched.version
        self.load_time_s = launched.load_time_s
        self.port = launched.port
        self.api_key = credentials.api_key     # kept in memory only: never written to results or logs
        self.session = new_session()      # refuses redirects: we measure this server or nothing
        if credentials.api_key:   # every probe (/props, /slots, /metrics) needs it too when the server has one
            self.session.headers["Authorization"] = f"Bearer {credentials.api_key}"
        self.session.auth = credentials.auth   # basic auth from an address's user:password (memory only)
        self.notes: list[str] = []        # facts about how the server was reached, shown to the user
        self.probe_timeout_s = probe_timeout_s   # one deadline for every probe; None: each probe's usual one
        self.topology: dict | None = None  # where the models run, when spread over several devices or hosts
        self._owner, self._local = threading.get_ident(), threading.local()
        self._thread_sessions: list[requests.Session] = []     # list.append is atomic: no lock needed

    def probe_s(self, usual: float) -> float:
        """A probe's deadline (/props, /slots, /metrics, /version, /v1/models): ``usual``, unless set for all."""
        return usual if self.probe_timeout_s is None else self.probe_timeout_s

    def http(self) -> requests.Session:
        """:attr:`session` on the thread that made this object; one of its own on every other (streams never share)."""
        if threading.get_ident() == self._owner:
            return self.session
        if not hasattr(self._local, "session"):
            self._local.session = new_session()     # refuses redirects, as the main one does
            self._local.session.headers.update(self.session.headers)
            self._local.session.auth = self.session.auth
            self._thread_sessions.append(self._local.session)
        return self._local.session

    # -- requests -------------------------------------------------------------------------
    def chat_url(self) -> str:
        return self.base_url + "/v1/chat/completions"

    def request_body(self, messages: list[dict], *, max_tokens: int, temperature: float, seed: int) -> dict:
        return {"model": self.model, "messages": messages, "max_tokens": max_tokens, "temperature": temperature,
                "seed": seed, "stream": True, "stream_options": {"include_usage": True}}

    def headers(self) -> dict:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def send(self, body: dict, *, request_timeout_s: float, stall_timeout_s: float) -> StreamedResponse:
        """Run one request and time it (streamed; a backend may answer differently)."""
        return stream_chat(self.http(), self.chat_url(), body, headers=self.headers(),
                           request_timeout_s=request_timeout_s, stall_timeout_s=stall_timeout_s)

    def machine_reading(self) -> machine_load.Reading | None:
        """The machine's CPU counters just before a request, for :meth:`others_share`; None where this server
        does not run on a machine we can read (a simulated one)."""
        return machine_load.read()

    def others_share(self, first: machine_load.Reading | None) -> float | None:
        """Other programs' share of the machine since ``first`` (see analysis/pairing.py: a burst of it leaves
        the request's pair out); None where it cannot be read."""
        return machine_load.between(first, machine_load.read()).other_cpu_share if first is not None else None

    def before_request(self) -> Any:
        """Snapshot taken just before a request (e.g. Prometheus counters), passed to :meth:`draft_counts`."""
        return None

    def draft_counts(self, response: StreamedResponse, before: Any) -> DraftCounts:
        return DraftCounts()

    def server_decode_tps(self, response: StreamedResponse) -> float | None:
        """The server's own decode rate for one request, where it reports one."""
        return None

    def server_prefill(self, response: StreamedResponse) -> tuple[float | None, float | None]:
        """The server's own prompt processing for one request: (seconds, prompt tok/s), where it says."""
        return None, None

    def tokenizer(self) -> Tokenizer | None:
        """The server's own tokenizer (long prompts are cut to an exact length with it); None: it has none."""
        return None

    def memory_use(self) -> ServerMemory:
        """What the server holds in memory (per device, as it says), asked before it stops; a server that says
        nothing gives what it did not say and why (``ServerMemory.unreported``), never 0."""
        return ServerMemory(unreported="this server reports no memory figures")

    def speculation_status(self, requested: bool) -> SpeculationStatus:
        """Is the server speculating? Asked once after launch; ``requested`` says whether we asked it to."""
        return SpeculationStatus(None if requested else False, "")

    def active_methods(self) -> tuple[str, ...] | None:
        """The speculative methods the server says it is running (``()``: plain decoding); None when it
        does not say. Asked after the warm-up: a baseline must prove it did not speculate."""
        return None

    def draft_sampling(self) -> tuple[str, str] | None:
        """How the server samples its draft model's tokens (llama.cpp: ``greedy`` or ``probabilistic``) and where
        that was read; None where it has no draft model or no such choice."""
        return None

    def totals(self) -> dict[str, float] | None:
        """The server's cumulative counters (keys from ``slots.TOTAL_NAMES``) or None: their difference over
        a window is its total, which cannot be split per request while several are in flight."""
        return None

    def slot_states(self) -> tuple[SlotState, ...] | None:
        """The server's slots right now, where it reports them (None otherwise)."""
        return None

    @property
    def bench_hint(self) -> str:
        """How to benchmark this server by hand (printed by server.py)."""
        return f"python bench.py --url {self.base_url}"

    # -- lifecycle ------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def log_path(self) -> str | None:
        return str(self.process.log_path) if self.process else None

    @property
    def returncode(self) -> int | None:
        return self.process.returncode if self.process else None

    def alive(self) -> bool:
        return self.process.alive() if self.process else True

    def wait(self) -> int | None:
        """Block until the server exits (None at once for a server we do not own)."""
        return self.process.wait() if self.process else None   # Ctrl-C interrupts it on every OS

    def died(self, grace_s: float = 2.0) -> bool:
        """Did the server we started exit (waiting up to ``grace_s`` for it to be reaped)?"""
        return self.process.exited_within(grace_s) if self.process else False

    def log_tail(self, lines: int = 25) -> str:
        return self.process.log_tail(lines) if self.process else ""

    def death_cause(self) -> ServerError | None:
        """Why the server died, when its log names a cause the backend knows (message, fix, kind), else None."""
        return None

    def stop(self) -> None:
        try:
            for session in (self.session, *self._thread_sessions):
                session.close()
        finally:
            if self.process:
                self.process.stop(grace_s=self.stop_grace_s)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


class Backend:
    """Launches one kind of server. Instances are stateless; register them in ``backends.REGISTRY``.

    The contract, in order of use: a config is validated with :attr:`settings_class` (the backend's own
    keys, ``settings.backend``), :meth:`resolve_model`, :meth:`validate_settings` and :meth:`settled`; before a sweep starts
    :meth:`check_ready_to_run`; before each combination :meth:`model_problem`; then
    :meth:`launch` returns a ready :class:`Server` (or raises :class:`ServerError`), which the
    caller stops. ``server.py`` builds its sub-command from :meth:`add_server_arguments` and
    :meth:`spec_from_args`; ``bench.py --url`` uses :meth:`attach`.
    """

    name: ClassVar[str] = "base"            # name used by server.py (e.g. "llama-cpp")
    config_name: ClassVar[str] = "base"     # name used in sweep configs and results (e.g. "llamacpp")
    aliases: ClassVar[tuple[str, ...]] = ()
    settings_class: ClassVar[type[BackendSettings]] = BackendSettings   # the backend's own settings keys
    path_settings: ClassVar[tuple[str, ...]] = ()       # settings holding executable paths (expanded like paths)
    default_port: ClassVar[int] = 8080
    owns_port: ClassVar[bool] = True        # False: one server per machine that we reuse (LM Studio)
    default_draft_method: ClassVar[str] = "draft"   # the method a plain draft file uses
    synthetic_acceptance: ClassVar[bool] = False    # can run a draft at a given acceptance (settings.ceiling)
    rpc_endpoints: ClassVar[bool] = False           # can split a target over llama.cpp RPC endpoints (targets[].rpc)
    tokenizes: ClassVar[bool] = False               # its servers' tokenizer cuts long prompts (settings.context_tokens)
    concurrent_streams: ClassVar[bool] = True       # measured with N client streams at once (settings.concurrency)

    def resolve_model(self, raw: str, base_dir: str) -> tuple[str, PathProblem | None]:
        """Turn a config ``path`` into what the server needs. Default: a local file path."""
        return expand_path(raw, base_dir)

    def model_problem(self, ref: str) -> ModelProblem | None:
        """Why this model cannot be used (e.g. a missing file), or None. Checked before each run."""
        try:
            read_info(ref)
        except ModelFileError as exc:
            return ModelProblem(exc.message, exc.fix, missing=not os.path.exists(ref))
        return None

    def validate_candidates(self, specs: tuple[CandidateSpec, ...], settings: Settings) -> list[Problem]:
        """Problems with the candidates for this backend (methods it lacks, unknown parameters). May run
        the server binary (``--help``); called before anything starts. Default: plain drafts only."""
        return [Problem(f"{s.where}.method", f"{self.config_name} runs draft models only, not {', '.join(s.method)}",
                        "remove the candidate, or use backend llamacpp or vllm") for s in specs if s.method]

    def pair_problem(self, target: str, draft: str, method: tuple[str, ...] = ()) -> ModelProblem | None:
        """Why this draft cannot speculate for this target with ``method`` (the candidate's, ``()``: the
        default for a draft file), known before any server starts (or None)."""
        return None

    def context_problem(self, target: str, draft: str | None, prompt_tokens: int, ctx_size: int,
                        settings: Settings, slots: int = 1) -> ModelProblem | None:
        """Why a server of ``target`` (with ``draft``) and ``-c ctx_size`` per slot cannot take ``prompt_tokens``-token
        prompts (its trained context, the memory for its KV cache), known before any server starts; None: it
        can, or it cannot tell. The fix names the longest prompt that would fit."""
        return None

    def size_label(self, ref: str) -> str | None:
        """The model's size as people write it (``135M``, ``7B``) where its file says; None otherwise."""
        try:
            return read_info(ref).size_label
        except ModelFileError:
            return None

    def validate_settings(self, settings: Settings) -> list[Problem]:
        return []

    def settled(self, settings: Settings) -> Settings:
        """The settings with what validation decided filled in (LM Studio: its client "auto" → sdk or rest)."""
        return settings

    def check_ready_to_run(self, settings: Settings) -> None:
        """Raise a clear error before a sweep starts if the backend cannot run at all."""

    def memory_estimate(self, target: str, draft: str | None, settings: Settings, ctx_size: int,
                        slots: int = 1) -> ServerMemory | None:
        """What a server of this target (and draft) would hold, per device, estimated from the model files before
        anything starts (``--dry-run``); None: this backend's files do not say."""
        return None

    def target_problems(self, targets: tuple[ModelRef, ...], settings: Settings) -> list[Problem]:
        """Problems with the targets that only the machine can reveal (an RPC endpoint that does not answer),
        found before anything starts. May connect to endpoints; starts nothing."""
        return []

    def sweep_notes(self, settings: Settings) -> list[str]:
        """Lines the console prints once before a sweep (e.g. what the chosen client path cannot measure)."""
        return []

    def launch(self, spec: LaunchSpec) -> Server:
        raise NotImplementedError

    def attach(self, base_url: str, *, model: str | None = None, api_key: str | None = None,
               auth: tuple[str, str] | None = None, probe_timeout_s: float | None = None) -> Server:
        """A server somebody else started (``bench.py --url``): measured, never stopped; probes see probe_s."""
        return Server(base_url, model=model or "default", credentials=Credentials(api_key, auth),
                      probe_timeout_s=probe_timeout_s)

    def add_server_arguments(self, parser: argparse.ArgumentParser) -> None:
        """``server.py <name>``'s options."""
        raise NotImplementedError

    def spec_from_args(self, args: argparse.Namespace, extra: list[str]) -> LaunchSpec:
        """A :class:`LaunchSpec` from ``server.py``'s parsed options and the arguments after ``--``."""
        raise NotImplementedError


def add_common_server_arguments(p: argparse.ArgumentParser, *, port: int, what: str = "the server") -> None:
    """Options every ``server.py`` sub-command shares."""
    p.add_argument("--host", default=DEFAULTS.host, help=f"address to bind (default {DEFAULTS.host}; another address "
                   "needs --allow-remote)")
    p.add_argument("--port", type=int, default=port, help=f"port (default {port}; 0 = any free port)")
    p.add_argument("--startup-timeout", type=float, default=DEFAULTS.startup_timeout_s, help=f"seconds to wait for loading (default {DEFAULTS.startup_timeout_s:g})")
    p.add_argument("--log", default=None, help=f"log of {what} (default: under ~/.cache/draftbench/logs)")


def url_host(host: str) -> str:
    """The address to connect to for a server bound to ``host`` (wildcards mean this machine)."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host
