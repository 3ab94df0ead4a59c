"""LM Studio through its official Python SDK (``pip install 'draftbench[lmstudio]'``).

Facts this relies on, read from the source of ``lmstudio`` 1.5.0 (see docs/backends.md):

* ``lmstudio.Client("HOST:PORT")`` speaks LM Studio's websocket API, one socket per namespace
  (``ws://HOST:PORT/llm``, ``/system``); ``GET /lmstudio-greeting`` → ``{"lmstudio": true}`` tells
  LM Studio apart. LM Studio's server port (1234) answers; since SDK 1.5.0 the app's own API
  ports (``Client.find_default_local_api_host``) answer even with the HTTP server off.
* Models: ``client.llm.list_downloaded()`` (model keys), ``list_loaded()`` (handles; ``get_info()``
  gives an instance's model key), ``load_new_instance(key, identifier, config={"contextLength",
  "gpu": {"ratio"}})`` and ``unload(identifier)`` — no ``lms`` CLI on this path. LM Studio loads
  the draft named in a request itself; we unload it again if it was not loaded before.
* Per request (:mod:`lmstudio_sdk_predict`): draft model, k, p-min and minimum draft length;
  typed statistics and per-fragment ``tokensCount``/``containsDrafted``.
* One LM Studio serves the whole machine: we attach to it (nothing to start), load our target
  under our own identifier and unload it when done; a target already loaded is used as it is.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

import lmstudio
import requests

from ...common.errors import RequestError, ServerError, ServerErrorKind
from ...common.files import cache_dir
from ...config.settings import Settings
from ...lifetime.process import tail_file
from ...results.memory import ServerMemory
from ..base import DraftCounts, Launched, LaunchSpec, Server, SpeculationStatus, url_host
from ..http.client import StreamedResponse, new_session, probe_json
from ..http.server_values import server_rate
from .lms import IDENTIFIER, LMStudioLog, check_models, gpu_value, quietly
from .sdk_predict import DraftSettings, PredictionRefused, draft_counts, predict, server_error_text
from .settings import LMStudioSettings

_PROBE_PROMPT = "Count from 1 to 30, separated by commas."
_QUICK_CALL_S = 60.0      # listing and unloading models: LM Studio answers these at once
_START_LM_STUDIO = ("start LM Studio (the app, or headless: `lms daemon up` / `lms server start --port {port}`) and "
                    "run again; set settings.lmstudio_port if its server uses another port, or "
                    "settings.lmstudio_client to \"rest\" to let draftbench start it with the lms CLI")


class SDKLogRouter(logging.Handler):
    """While an SDK server is up, the SDK's own log records (e.g. fragments that still arrive after
    an interrupted prediction) go to our log file instead of the console; other records are
    printed as Python would have printed them without this handler."""

    MAX_RECORDS = 20      # after an interrupted prediction the SDK logs every late fragment

    def __init__(self, log: LMStudioLog):
        super().__init__()
        self.log = log
        self.sdk_dir = os.path.dirname(os.path.abspath(lmstudio.__file__))
        self.records = 0

    def emit(self, record: logging.LogRecord) -> None:
        if os.path.abspath(record.pathname).startswith(self.sdk_dir):
            self.records += 1
            if self.records <= self.MAX_RECORDS:
                self.log.write(f"lmstudio SDK {record.levelname.lower()}: {record.getMessage()[:500]}")
            elif self.records == self.MAX_RECORDS + 1:
                self.log.write("lmstudio SDK: further messages left out")
        elif logging.getLogger().handlers == [self] and logging.lastResort is not None \
                and record.levelno >= logging.lastResort.level:
            logging.lastResort.handle(record)

    def __enter__(self) -> SDKLogRouter:
        logging.getLogger().addHandler(self)
        return self

    def close(self) -> None:
        logging.getLogger().removeHandler(self)
        super().close()


def probe(api_host: str, timeout_s: float = 5.0) -> str:
    """``GET /lmstudio-greeting``: "ok", "down" (nothing listens) or "foreign" (something else answers)."""
    try:
        with new_session() as session:       # bounded in time and size, redirects refused
            status, data = probe_json(session, f"http://{api_host}/lmstudio-greeting", timeout_s=timeout_s)
    except requests.ConnectionError:
        return "down"
    except requests.RequestException:
        return "foreign"
    return "ok" if status == 200 and isinstance(data, dict) and data.get("lmstudio") is True else "foreign"


def find_api_host(host: str, port: int, log: LMStudioLog) -> tuple[str, list[str]]:
    """LM Studio's API address: its server at host:port, else the app's own API ports. Notes say which."""
    api_host = f"{host}:{port}"
    state = probe(api_host)
    log.write(f"LM Studio at {api_host}: {state}")
    if state == "ok":
        return api_host, []
    if state == "foreign":
        raise ServerError(f"port {port} answers, but not as LM Studio (no /lmstudio-greeting there)",
                          "set settings.lmstudio_port to LM Studio's port (default 1234), or stop the program using "
                          "that port", log_path=str(log.path), kind=ServerErrorKind.FOREIGN)
    try:
        found = lmstudio.Client.find_default_local_api_host()
    except Exception:       # something else on one of those ports (the SDK only expects refusals)
        found = None
    if found is None:
        raise ServerError(f"LM Studio does not answer at {api_host}, nor on the LM Studio app's own API ports",
                          _START_LM_STUDIO.format(port=port), log_path=str(log.path), kind=ServerErrorKind.UNREACHABLE)
    log.write(f"using the LM Studio app's API at {found}")
    return found, [f"LM Studio's server does not answer at {api_host}; using the LM Studio app's own API at {found}"]


def gpu_ratio(settings: Settings) -> float:
    """The GPU offload ratio for ``gpu.ratio`` from settings.lmstudio_gpu (off, max, 0-1) or gpu_layers."""
    value = gpu_value(settings)
    if value == "off":
        return 0.0
    if value == "max":
        return 1.0
    return float(value)


def _launch_error(exc: BaseException, what: str, log: LMStudioLog) -> ServerError:
    """A ServerError naming what failed and why, from an SDK exception."""
    text = server_error_text(exc)
    log.write(f"{what} failed: {text}")
    lowered = f"{text} {exc}".lower()
    if isinstance(exc, lmstudio.LMStudioTimeoutError):
        return ServerError(f"{what}: LM Studio sent nothing for too long", "check LM Studio (is it waiting for a "
                           "dialog?), or raise settings.startup_timeout_s", log_path=str(log.path), kind=ServerErrorKind.TIMEOUT)
    if "authentication" in lowered:
        return ServerError(f"LM Studio refused draftbench's connection ({text})", "allow API clients in LM Studio's "
                           "Developer settings, or set settings.lmstudio_client to \"rest\" and export LM_API_TOKEN",
                           log_path=str(log.path), kind=ServerErrorKind.AUTH)
    if any(word in lowered for word in ("memory", "insufficient", "resources", "guardrail")):
        return ServerError(f"{what}: not enough memory ({text})", "lower settings.ctx_size, set settings.lmstudio_gpu "
                           "to a fraction such as \"0.5\", or use a smaller quantisation", log_path=str(log.path),
                           kind=ServerErrorKind.OOM)
    if isinstance(exc, lmstudio.LMStudioWebsocketError):
        return ServerError(f"{what}: the connection to LM Studio broke ({text})", "check that LM Studio is running",
                           log_path=str(log.path), kind=ServerErrorKind.UNREACHABLE)
    return ServerError(f"{what}: {text}", "see LM Studio's Developer log (`lms log stream`)", log_path=str(log.path),
                       kind=ServerErrorKind.MODEL)


def launch_sdk(spec: LaunchSpec) -> LMStudioSDKServer:
    """Attach to LM Studio, check the models, load the target; the caller must stop() the server."""
    port = LMStudioSettings.of(spec.settings).lmstudio_port
    log = LMStudioLog(spec.log_path or cache_dir() / "logs" / f"lmstudio-sdk-{port}.log")
    start = time.perf_counter()
    api_host, notes = find_api_host(url_host(spec.host), port, log)
    client = lmstudio.Client(api_host)
    router = SDKLogRouter(log).__enter__()
    loaded: str | None = None
    try:
        try:
            lmstudio.set_sync_api_timeout(_QUICK_CALL_S)
            downloaded, instances = known_models(client, log)
            check_models(downloaded, spec, log)
            if IDENTIFIER in instances:          # left by an interrupted run: ours, so replace it
                log.write(f"unloading {IDENTIFIER}, left loaded by an earlier run")
                client.llm.unload(IDENTIFIER)
                del instances[IDENTIFIER]
            model = next((handle for handle, key in instances.values() if key == spec.target), None)
            command = None
            if model is not None:
                notes.append(f"{spec.target} was already loaded in LM Studio: using that instance (its context length "
                             "and GPU offload are LM Studio's, not settings.ctx_size / lmstudio_gpu)")
            else:
                model, command = load_target(client, spec, log)
                loaded = IDENTIFIER
            if spec.extra_args:
                notes.append(f"extra_args ({' '.join(spec.extra_args)}) are not used with LM Studio's SDK")
            for note in notes:
                log.write("note: " + note)
            draft_was_loaded = spec.draft is None or any(key == spec.draft for _, key in instances.values())
            server = LMStudioSDKServer(f"http://{api_host}", connection=SDKConnection(client, log, router), llm=model,
                                       draft_settings=draft_settings(spec), loaded_identifier=loaded,
                                       unload_draft_after=not draft_was_loaded,
                                       launched=Launched(command=command, port=port,
                                                         version=f"lmstudio SDK {lmstudio.__version__}",
                                                         load_time_s=time.perf_counter() - start))
            server.notes.extend(notes)
            return server
        except lmstudio.LMStudioError as exc:       # anything the SDK raises becomes a named error
            raise _launch_error(exc, "talking to LM Studio", log) from None
    except BaseException:
        if loaded:
            quietly(lambda: client.llm.unload(IDENTIFIER))
        client.close()
        router.close()
        raise


def known_models(client: lmstudio.Client, log: LMStudioLog) -> tuple[set[str], dict[str, tuple[lmstudio.LLM, str]]]:
    """The model keys LM Studio has downloaded, and its loaded instances: identifier -> (handle, model key)."""
    try:
        downloaded = {m.model_key for m in client.llm.list_downloaded()}
        instances = {h.identifier: (h, h.get_info().model_key) for h in client.llm.list_loaded()}
    except lmstudio.LMStudioError as exc:
        raise _launch_error(exc, "listing LM Studio's models", log) from None
    return downloaded, instances


def load_target(client: lmstudio.Client, spec: LaunchSpec, log: LMStudioLog) -> tuple[lmstudio.LLM, list[str]]:
    """Load the target under our identifier with the settings' context and GPU share; the command as logged."""
    ratio = gpu_ratio(spec.settings)
    config: lmstudio.LlmLoadModelConfigDict = {"contextLength": spec.ctx_size, "gpu": {"ratio": ratio}}
    command = ["llm.load_new_instance", spec.target, f"identifier={IDENTIFIER}",
               f"contextLength={spec.ctx_size}", f"gpu.ratio={ratio:g}"]
    log.write("$ " + " ".join(command))
    lmstudio.set_sync_api_timeout(spec.startup_timeout_s)
    try:
        model = client.llm.load_new_instance(spec.target, IDENTIFIER, config=config)
    except lmstudio.LMStudioError as exc:
        raise _launch_error(exc, f"LM Studio could not load {spec.target}", log) from None
    log.write(f"loaded {spec.target} as {IDENTIFIER}")
    return model, command


def draft_settings(spec: LaunchSpec) -> DraftSettings:
    """What every request asks of the draft: a candidate's own parameters win over the settings (see
    LMStudioBackend.validate_candidates)."""
    own = LMStudioSettings.of(spec.settings)
    return DraftSettings(draft=spec.draft, num_draft_tokens=spec.draft_max,
                         min_continue_probability=spec.params.get("draft_p_min", spec.settings.draft_p_min),
                         min_draft_length=spec.params.get("min_draft_length", own.lmstudio_min_draft_length))


@dataclass(frozen=True)
class SDKConnection:
    """The SDK's connection to LM Studio, the log and the router of the SDK's own log records: all closed
    by :meth:`LMStudioSDKServer.stop`."""

    client: lmstudio.Client
    log: LMStudioLog
    log_router: SDKLogRouter


class LMStudioSDKServer(Server):
    """A model loaded in LM Studio, driven through its SDK. Stopping unloads what we loaded."""

    def __init__(self, base_url: str, *, connection: SDKConnection, llm: lmstudio.LLM, draft_settings: DraftSettings,
                 loaded_identifier: str | None, unload_draft_after: bool, **kwargs):
        super().__init__(base_url, model=llm.identifier, **kwargs)
        self.client = connection.client
        self.llm = llm
        self.draft_settings = draft_settings
        self._log = connection.log
        self._log_router = connection.log_router
        self.loaded_identifier = loaded_identifier
        self.unload_draft_after = unload_draft_after
        self._stopped = False

    @property
    def draft(self) -> str | None:
        return self.draft_settings.draft

    # -- requests -------------------------------------------------------------------------
    def request_body(self, messages: list[dict], *, max_tokens: int, temperature: float, seed: int) -> dict:
        # LM Studio's SDK has no per-request seed; at temperature 0 the answer does not depend on one.
        return {"messages": messages, "config": self.draft_settings.config(max_tokens=max_tokens,
                                                                           temperature=temperature)}

    def send(self, body: dict, *, request_timeout_s: float, stall_timeout_s: float) -> StreamedResponse:
        try:
            return predict(self.llm, body["messages"], body["config"], record_fragments=self.draft is not None,
                           request_timeout_s=request_timeout_s, stall_timeout_s=stall_timeout_s)
        except RequestError as exc:
            self._log.write(f"prediction failed: {exc.message}")
            raise

    def draft_counts(self, response, before) -> DraftCounts:
        stats = response.extras.get("sdk_stats")
        if stats is None:
            return DraftCounts()
        counts = draft_counts(stats, response.extras.get("applied") or {}, draft_requested=self.draft is not None)
        asked = self.draft_settings.num_draft_tokens
        applied = counts.details.get("num_draft_tokens_exact")
        if self.draft and asked is not None and applied is not None and applied != asked:
            warning = (f"LM Studio reports applying k={applied} although draftbench asked for k={asked}: this row "
                       "measures its k, not the one in its name")
            if warning not in self.notes:
                self.notes.append(warning)
        return counts

    def server_decode_tps(self, response) -> float | None:
        stats = response.extras.get("sdk_stats")
        return server_rate(stats.tokens_per_second, "stats.tokensPerSecond") if stats is not None else None

    def speculation_status(self, requested: bool) -> SpeculationStatus:
        """One short prediction with the draft: do LM Studio's typed statistics show drafting?"""
        if not requested:
            return SpeculationStatus(False, "")
        if not self.draft:
            return SpeculationStatus(None, "")
        try:
            response = predict(self.llm, [{"role": "user", "content": _PROBE_PROMPT}],
                               self.draft_settings.config(max_tokens=24, temperature=0.0), record_fragments=False,
                               request_timeout_s=600.0, stall_timeout_s=120.0)
        except PredictionRefused as exc:
            self._log.write(f"speculation check: {exc.message}")
            return SpeculationStatus(False, f"LM Studio refused draft model {self.draft!r}: {exc.detail}")
        except RequestError as exc:
            return SpeculationStatus(None, f"could not check: {exc.message}")
        stats = response.extras["sdk_stats"]
        if stats.used_draft_model_key is None and stats.total_draft_tokens_count is None \
                and stats.accepted_draft_tokens_count is None:
            return SpeculationStatus(False, f"LM Studio did not use the draft model {self.draft!r} (its statistics "
                                     "name no draft model and count no draft tokens)")
        return SpeculationStatus(True, f"LM Studio used {stats.used_draft_model_key or self.draft}")

    def memory_use(self) -> ServerMemory:
        """The loaded models' sizes (``sizeBytes`` of the target's instance and of a loaded draft): LM Studio's SDK
        says how large each model is, not what its KV cache or buffers take, nor on which device."""
        try:
            lmstudio.set_sync_api_timeout(_QUICK_CALL_S)
            sizes = [self.llm.get_info().size_bytes]
            if self.draft:
                sizes += [info.size_bytes for info in (h.get_info() for h in self.client.llm.list_loaded())
                          if info.model_key == self.draft]
        except lmstudio.LMStudioError as exc:
            return ServerMemory(unreported=f"LM Studio did not say how large the loaded models are ({exc})")
        return ServerMemory(model_mib=round(sum(sizes) / 2**20, 2), source="LM Studio's SDK (the loaded models' "
                            "sizeBytes)", unreported="LM Studio reports the models' sizes, not their KV cache, "
                            "buffers or devices")

    @property
    def bench_hint(self) -> str:
        return (f"python bench.py --url {self.base_url} --backend lmstudio --model {self.model}  (bench.py measures "
                "through LM Studio's REST API, without the draft; a sweep with backend lmstudio uses the SDK)")

    # -- lifecycle ------------------------------------------------------------------------
    @property
    def log_path(self) -> str | None:
        return str(self._log.path)

    def log_tail(self, lines: int = 25) -> str:
        return tail_file(self._log.path, lines)

    def stop(self) -> None:
        """Unload our target (and a draft LM Studio loaded for us); close the connection."""
        if self._stopped:
            return
        self._stopped = True
        try:
            lmstudio.set_sync_api_timeout(_QUICK_CALL_S)
            if self.loaded_identifier:
                self._log.write(f"unloading {self.loaded_identifier}")
                quietly(lambda: self.client.llm.unload(self.loaded_identifier or ""))
            if self.unload_draft_after and self.draft:
                quietly(self._unload_draft)
        finally:
            self.client.close()
            self.session.close()
            self._log_router.close()

    def _unload_draft(self) -> None:
        for handle in self.client.llm.list_loaded():
            if handle.get_info().model_key == self.draft:
                self._log.write(f"unloading the draft {handle.identifier}, which LM Studio loaded for this run")
                self.client.llm.unload(handle.identifier)
