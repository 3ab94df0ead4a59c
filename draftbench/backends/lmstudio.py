"""LM Studio: its local server, driven by the ``lms`` CLI where present.

Facts this relies on (LM Studio documentation and changelog; see docs/backends.md):

* One server per machine (default port 1234): ``lms server start --port N`` starts it and
  returns; ``lms server stop`` stops it. Models are loaded with
  ``lms load KEY --identifier ID --context-length N --gpu off|max|0-1`` and unloaded with
  ``lms unload ID``. ``GET /api/v0/models`` lists the downloaded models (``id``, ``state``).
* Speculative decoding is chosen per request (0.3.10+): ``"draft_model": "<key>"`` beside
  ``"model"``. The native ``/api/v0/chat/completions`` answers with ``stats``:
  ``tokens_per_second``, ``time_to_first_token``, ``generation_time``, ``draft_model``,
  ``total_draft_tokens_count`` = ``accepted_…`` + ``rejected_…`` + ``ignored_draft_tokens_count``.
  "Ignored" tokens were drafted but never checked by the main model, so they are counted
  neither as accepted nor as rejected: ``draft_n`` = accepted + rejected (the tokens the target
  verified, like llama.cpp's ``draft_n``) and acceptance = accepted / (accepted + rejected).
* The v0 documentation shows ``stats`` on non-streaming responses. We stream (client-side TTFT
  and tok/s need it) and read ``usage``/``stats`` from the stream's last chunk; an LM Studio that
  sends neither there gets a clear error (``settings.lmstudio_endpoint: "openai"`` then measures
  speed through ``/v1`` with ``stream_options.include_usage``, 0.3.18+, without acceptance).
* Without ``lms`` we can only attach to a server that is already running and let LM Studio
  load models on demand; we say so.
* With LM Studio's Python SDK installed (``settings.lmstudio_client``, see lmstudio_choice.py),
  sweeps go through :mod:`lmstudio_sdk` instead: k and p-min per request, typed statistics.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar

import requests

from ..client import StreamedResponse
from ..errors import BinaryNotFoundError, Problem, RequestError, ServerError
from ..paths import cache_dir
from ..process import tail_file
from ..settings_schema import Field
from . import lmstudio_choice
from .base import Backend, DraftCounts, LaunchSpec, Server, SpeculationStatus, find_executable, url_host

DEFAULT_PORT = 1234
IDENTIFIER = "draftbench-target"      # the identifier our `lms load` gives the target
ENDPOINTS = ("native", "native-blocking", "openai")
_PROBE_PROMPT = "Count from 1 to 30, separated by commas."

_HOW_TO_GET = ("install LM Studio and its CLI (`npx lmstudio install-cli`, or run ~/.lmstudio/bin/lms bootstrap), "
               "or set settings.lms_bin / --lms-bin to the `lms` executable")


def find_lms(explicit: str | None = None) -> str | None:
    """Locate ``lms``: explicit path (must exist), $DRAFTBENCH_LMS, PATH, ~/.lmstudio/bin. None if absent."""
    exe = "lms.exe" if sys.platform == "win32" else "lms"
    return find_executable("lms", explicit, env_var="DRAFTBENCH_LMS", setting="settings.lms_bin / --lms-bin",
                           how_to_get=_HOW_TO_GET, candidates=(Path.home() / ".lmstudio" / "bin" / exe,))


def gpu_value(settings: dict) -> str:
    """``lms load --gpu``: settings.lmstudio_gpu, else off for gpu_layers 0 and max otherwise."""
    explicit = settings.get("lmstudio_gpu")
    if explicit:
        return str(explicit)
    return "off" if settings.get("gpu_layers") == 0 else "max"


def load_command(lms: str, spec: LaunchSpec) -> list[str]:
    """The exact ``lms load`` command for a combination's target."""
    return [lms, "load", spec.target, "--identifier", IDENTIFIER, "--context-length", str(spec.ctx_size),
            "--gpu", gpu_value(spec.settings), *spec.extra_args]


class _Log:
    """Our own log for LM Studio (its server is not our child): every lms command and its output."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, text: str) -> None:
        try:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(text if text.endswith("\n") else text + "\n")
        except OSError:
            pass


def run_lms(cmd: list[str], log: _Log, timeout_s: float) -> subprocess.CompletedProcess:
    log.write("$ " + " ".join(cmd))
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s,
                              errors="replace")
    except subprocess.TimeoutExpired:
        log.write(f"(no answer within {timeout_s:g} s)")
        raise ServerError(f"`{' '.join(cmd[1:3])}` did not finish within {timeout_s:g} s",
                          "check LM Studio (is it waiting for a dialog?), or raise settings.startup_timeout_s",
                          log_path=str(log.path), kind="timeout") from None
    except OSError as exc:
        raise BinaryNotFoundError(f"cannot run {cmd[0]}: {exc}", _HOW_TO_GET) from None
    output = (proc.stdout or "") + (proc.stderr or "")
    if output.strip():
        log.write(output)
    log.write(f"(exit code {proc.returncode})")
    return proc


def _probe(session: requests.Session, base_url: str, headers: dict) -> tuple[str, dict[str, dict] | None]:
    """``GET /api/v0/models``: ("ok", {id: entry}), or "down" (nothing listens), "auth" (a token is
    required) or "foreign" (something else answers)."""
    try:
        response = session.get(base_url + "/api/v0/models", timeout=5, headers=headers)
    except requests.ConnectionError:
        return "down", None
    except requests.RequestException:
        return "foreign", None
    if response.status_code in (401, 403):
        return "auth", None
    try:
        data = response.json() if response.status_code == 200 else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        return "foreign", None
    return "ok", {m["id"]: m for m in data["data"] if isinstance(m, dict) and isinstance(m.get("id"), str)}


def _list_models(session: requests.Session, base_url: str, headers: dict) -> dict[str, dict] | None:
    """``GET /api/v0/models`` as {id: entry}; None when LM Studio does not answer there."""
    return _probe(session, base_url, headers)[1]


def _int(x) -> int | None:
    return int(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def counts_from_stats(stats: dict, *, draft_requested: bool) -> DraftCounts:
    """Draft counters from LM Studio's ``stats`` (ignored drafts excluded from draft_n; kept in extra)."""
    accepted = _int(stats.get("accepted_draft_tokens_count"))
    rejected = _int(stats.get("rejected_draft_tokens_count"))
    ignored = _int(stats.get("ignored_draft_tokens_count"))
    total = _int(stats.get("total_draft_tokens_count"))
    extra = {"ignored": ignored, "total": total, "draft_model": stats.get("draft_model"),
             "time_to_first_token": stats.get("time_to_first_token")}
    if accepted is None and rejected is None and total is None:
        if draft_requested:
            # LM Studio reports these whenever it speculates: their absence is a measured "did not draft".
            return DraftCounts(drafted=0, accepted=0, source="stats (no draft counters: LM Studio did not use "
                               "the draft)", extra=extra)
        return DraftCounts(extra=extra)
    if rejected is None and total is not None and accepted is not None:
        rejected = total - accepted - (ignored or 0)
    drafted = accepted + rejected if accepted is not None and rejected is not None else None
    return DraftCounts(drafted=drafted, accepted=accepted, steps=None, source="stats", extra=extra)


def blocking_chat(session: requests.Session, url: str, body: dict, *, headers: dict,
                  request_timeout_s: float) -> StreamedResponse:
    """One unstreamed /api/v0 request: the documented format, whose ``stats`` carry the draft counts.

    Without a stream the client cannot see the first token, so TTFT is LM Studio's own
    ``stats.time_to_first_token`` and decode tok/s runs from that moment to the answer's arrival."""
    body = {k: v for k, v in body.items() if k != "stream_options"}
    body["stream"] = False
    result = StreamedResponse(t_start=time.perf_counter())
    try:
        response = session.post(url, json=body, headers=headers, timeout=(10, request_timeout_s))
    except requests.Timeout:
        raise RequestError(f"{url} did not answer within {request_timeout_s:g} s",
                           "raise settings.request_timeout_s or lower max_tokens") from None
    except requests.RequestException as exc:
        raise RequestError(f"cannot reach {url}: {exc}", "is LM Studio's server running?") from None
    result.t_end = time.perf_counter()
    if response.status_code != 200:
        raise RequestError(f"{url} answered HTTP {response.status_code}: {_error_text(response)}")
    try:
        data = response.json()
    except ValueError:
        raise RequestError(f"{url} answered with something that is not JSON", "is this LM Studio?") from None
    choices = data.get("choices") if isinstance(data, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    result.text = message.get("content") or ""
    result.reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    result.finish_reason = choice.get("finish_reason")
    result.usage = data.get("usage") if isinstance(data.get("usage"), dict) else None
    result.n_events = 1
    stats = data.get("stats")
    if isinstance(stats, dict):
        result.extras["stats"] = stats
        ttft = stats.get("time_to_first_token")
        if isinstance(ttft, (int, float)) and not isinstance(ttft, bool) and 0 <= ttft < result.t_end - result.t_start:
            result.t_first = result.t_start + ttft
            result.t_last = result.t_end
    return result


class LMStudioServer(Server):
    backend_name = "lmstudio"

    def __init__(self, base_url: str, *, model: str, draft: str | None = None, endpoint: str = "native",
                 lms: str | None = None, log: _Log | None = None, api_key: str | None = None,
                 loaded_identifier: str | None = None, started_server: bool = False,
                 unload_draft_after: bool = False, **kwargs):
        super().__init__(base_url, model=model, **kwargs)
        self.draft = draft
        self.endpoint = endpoint
        self.lms = lms
        self._log = log
        self._api_key = api_key
        self.loaded_identifier = loaded_identifier
        self.started_server = started_server
        self.unload_draft_after = unload_draft_after
        self._stopped = False

    # -- requests -------------------------------------------------------------------------
    def chat_url(self) -> str:
        return self.base_url + ("/v1/chat/completions" if self.endpoint == "openai" else "/api/v0/chat/completions")

    def send(self, body: dict, *, request_timeout_s: float, stall_timeout_s: float) -> StreamedResponse:
        if self.endpoint != "native-blocking":
            return super().send(body, request_timeout_s=request_timeout_s, stall_timeout_s=stall_timeout_s)
        return blocking_chat(self.session, self.chat_url(), body, headers=self.headers(),
                             request_timeout_s=request_timeout_s)

    def headers(self) -> dict:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    @property
    def bench_hint(self) -> str:
        hint = f"python bench.py --url {self.base_url} --backend lmstudio --model {self.model}"
        if self.draft:
            hint += (f"  (bench.py sends no draft_model, so it measures {self.model} alone; a sweep with backend "
                     "lmstudio sends the draft)")
        return hint

    def request_body(self, messages, *, max_tokens, temperature, seed):
        body = super().request_body(messages, max_tokens=max_tokens, temperature=temperature, seed=seed)
        if self.draft:
            body["draft_model"] = self.draft
        return body

    def draft_counts(self, response, before) -> DraftCounts:
        if response.usage is None:
            where = "/v1/chat/completions" if self.endpoint == "openai" else "/api/v0/chat/completions"
            fix = ("update LM Studio; or set settings.lmstudio_endpoint to \"native-blocking\" (the documented "
                   "non-streaming format: acceptance and LM Studio's own TTFT) or \"openai\" (LM Studio 0.3.18+: "
                   "streamed speed without draft statistics)") if self.endpoint != "openai" else \
                "update LM Studio to 0.3.18 or newer (stream_options.include_usage)"
            raise RequestError(f"LM Studio streamed no token counts (no usage in the {where} stream), so tok/s "
                               "cannot be measured", fix)
        stats = response.extras.get("stats")
        if not isinstance(stats, dict):
            return DraftCounts()
        return counts_from_stats(stats, draft_requested=self.draft is not None)

    def server_decode_tps(self, response) -> float | None:
        stats = response.extras.get("stats")
        tps = stats.get("tokens_per_second") if isinstance(stats, dict) else None
        return float(tps) if isinstance(tps, (int, float)) and not isinstance(tps, bool) else None

    def speculation_status(self, requested: bool) -> SpeculationStatus:
        """One short non-streaming request in the documented v0 format: do its stats show drafting?"""
        if not requested:
            return SpeculationStatus(False, "")
        if not self.draft or self.endpoint == "openai":
            return SpeculationStatus(None, "")
        body = {"model": self.model, "draft_model": self.draft, "stream": False, "max_tokens": 24,
                "temperature": 0, "messages": [{"role": "user", "content": _PROBE_PROMPT}]}
        try:
            response = self.session.post(self.base_url + "/api/v0/chat/completions", json=body, timeout=600,
                                         headers=self.headers())
        except requests.RequestException as exc:
            return SpeculationStatus(None, f"could not check: {exc}")
        if response.status_code != 200:
            detail = _error_text(response)
            if self._log:
                self._log.write(f"speculation check: HTTP {response.status_code}: {detail}")
            return SpeculationStatus(False, f"LM Studio refused draft_model {self.draft!r} (HTTP "
                                     f"{response.status_code}: {detail})")
        try:
            stats = response.json().get("stats")
        except (ValueError, AttributeError):
            stats = None
        if not isinstance(stats, dict):
            return SpeculationStatus(None, "")
        counts = counts_from_stats(stats, draft_requested=True)
        if self._log:
            self._log.write(f"speculation check: stats {stats}")
        if counts.drafted == 0 and counts.source.startswith("stats (no draft"):
            return SpeculationStatus(False, f"LM Studio answered without draft statistics, so it did not use the "
                                     f"draft {self.draft!r}; speculative decoding needs LM Studio 0.3.10+ and a draft "
                                     "with the target's vocabulary (LM Studio's own picker lists only compatible "
                                     "drafts)")
        return SpeculationStatus(True, "")

    # -- lifecycle ------------------------------------------------------------------------
    @property
    def log_path(self) -> str | None:
        return str(self._log.path) if self._log else None

    def log_tail(self, lines: int = 25) -> str:
        return tail_file(self._log.path, lines) if self._log else ""

    def stop(self) -> None:
        """Undo what we did: unload our target (and a draft LM Studio loaded for us), stop a server we started."""
        if self._stopped:
            return
        self._stopped = True
        try:
            if self.lms and self._log:
                if self.loaded_identifier:
                    _quietly(lambda: run_lms([self.lms, "unload", self.loaded_identifier], self._log, 120))
                if self.unload_draft_after and self.draft:
                    models = _list_models(self.session, self.base_url, self.headers()) or {}
                    if (models.get(self.draft) or {}).get("state") == "loaded":
                        _quietly(lambda: run_lms([self.lms, "unload", self.draft], self._log, 120))
                if self.started_server:
                    _quietly(lambda: run_lms([self.lms, "server", "stop"], self._log, 60))
        finally:
            self.session.close()


def _quietly(action) -> None:
    try:
        action()
    except Exception:   # cleanup must not hide the real outcome; the log has the details
        pass


def _error_text(response: requests.Response) -> str:
    try:
        data = response.json()
        err = data.get("error") if isinstance(data, dict) else None
        if isinstance(err, dict):
            err = err.get("message")
        if err:
            return str(err)[:300]
    except ValueError:
        pass
    return (response.text or response.reason or "")[:300].strip()


_LOAD_FAILURES = (
    (r"out of memory|insufficient|not enough memory|exceeds.*memory|guardrail", "oom",
     "LM Studio could not load {target}: not enough memory",
     "lower settings.ctx_size, set settings.lmstudio_gpu to a fraction such as \"0.5\", or use a smaller quantisation"),
    (r"not found|no model|cannot find|could not find|unknown model", "model", "LM Studio has no model {target!r}",
     "use a model key from `lms ls`"),
)


class LMStudioBackend(Backend):
    name = "lm-studio"
    config_name = "lmstudio"
    aliases = ("lm-studio", "lm_studio", "lmstudio")
    default_port = DEFAULT_PORT
    owns_port = False          # one LM Studio server per machine: we reuse it rather than pick a port
    path_settings = ("lms_bin",)
    settings_schema: ClassVar[dict[str, Field]] = {
        "lms_bin": Field("str", None, "path to LM Studio's `lms` CLI (default: PATH, then ~/.lmstudio/bin/lms); "
                         "without it draftbench attaches to a running LM Studio server"),
        "lmstudio_port": Field("int", DEFAULT_PORT, "port of LM Studio's server (settings.port is not used: LM "
                               "Studio runs one server for all models)", min=1, max=65535),
        "lmstudio_gpu": Field("str", None, "`lms load --gpu`: off, max, or a fraction 0-1 (default: off when "
                              "gpu_layers is 0, else max)"),
        "lmstudio_endpoint": Field("str", "native", "REST path only: native = /api/v0/chat/completions streamed, "
                                   "with draft statistics; native-blocking = the same unstreamed (TTFT is LM "
                                   "Studio's own figure); openai = /v1/chat/completions (speed only, no acceptance)",
                                   choices=ENDPOINTS),
        "lmstudio_client": Field("str", "auto", "sdk = LM Studio's Python SDK (pip install 'draftbench[lmstudio]': "
                                 "draft_max and draft_p_min per request, typed statistics, fragment data); rest = "
                                 "its REST API and the lms CLI; auto = sdk when installed", choices=lmstudio_choice.CHOICES),
        "lmstudio_min_draft_length": Field("int", None, "SDK path only: LM Studio's minDraftLengthToConsider (drafts "
                                           "shorter than this are not verified); null = LM Studio's default", min=0,
                                           max=256),
    }

    def resolve_model(self, raw: str, base_dir: str) -> tuple[str, str | None]:
        return raw.strip(), None       # LM Studio model keys, as `lms ls` prints them

    def model_problem(self, ref: str) -> str | None:
        return None                    # checked against /api/v0/models when the server is up

    def validate_settings(self, settings: dict) -> list[Problem]:
        problems = []
        gpu = settings.get("lmstudio_gpu")
        if gpu is not None and gpu not in ("off", "max"):
            try:
                ok = 0.0 <= float(gpu) <= 1.0
            except ValueError:
                ok = False
            if not ok:
                problems.append(Problem("$.settings.lmstudio_gpu", f"is {gpu!r}; must be off, max or a number from "
                                        "0 to 1", "write \"max\", \"off\" or e.g. \"0.5\""))
        # k and p-min need the SDK path; this also settles lmstudio_client (auto → sdk or rest)
        problems.extend(lmstudio_choice.validation_problems(settings))
        return problems

    def check_ready_to_run(self, settings: dict) -> None:
        find_lms(settings.get("lms_bin"))   # an explicit path that is wrong is an error before anything starts

    def sweep_notes(self, settings: dict) -> list[str]:
        return lmstudio_choice.sweep_notes(settings)

    def launch(self, spec: LaunchSpec) -> Server:
        if lmstudio_choice.resolve(spec.settings.get("lmstudio_client")) == "sdk":
            from .lmstudio_sdk import launch_sdk  # the optional SDK is imported only on its path
            return launch_sdk(spec)
        return self.launch_rest(spec)

    def launch_rest(self, spec: LaunchSpec) -> LMStudioServer:
        settings = spec.settings
        port = settings.get("lmstudio_port") or DEFAULT_PORT
        base_url = f"http://{url_host(spec.host)}:{port}"
        log = _Log(spec.log_path or cache_dir() / "logs" / f"lmstudio-{port}.log")
        lms = find_lms(settings.get("lms_bin"))
        api_key = os.environ.get("LM_API_TOKEN") or None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        endpoint = settings.get("lmstudio_endpoint") or "native"
        session = requests.Session()
        notes: list[str] = []
        start = time.perf_counter()
        started_server = False
        loaded = None
        log.write(f"LM Studio server: {base_url}" + (f" (lms: {lms})" if lms else " (lms CLI not found)"))
        try:
            state, models = _probe(session, base_url, headers)
            if state == "auth":
                raise ServerError(f"LM Studio at {base_url} requires an API token", "export LM_API_TOKEN=<a token "
                                  "from LM Studio's Developer page> (it is sent as a Bearer token and never saved)",
                                  log_path=str(log.path), kind="auth")
            if state == "foreign":
                raise ServerError(f"port {port} answers, but not as LM Studio (no /api/v0/models there)",
                                  "set settings.lmstudio_port / --port to LM Studio's port (default 1234), or stop "
                                  "the program using that port", log_path=str(log.path), kind="foreign")
            if models is None:
                if lms is None:
                    raise ServerError(f"no LM Studio server answers at {base_url}, and the lms CLI was not found "
                                      "to start one", "start LM Studio's server (Developer tab → Start server, port "
                                      f"{port}) and run again, set settings.lmstudio_port if it uses another port, "
                                      f"or {_HOW_TO_GET}", log_path=str(log.path), kind="unreachable")
                proc = run_lms([lms, "server", "start", "--port", str(port)], log, 120)
                started_server = True
                if proc.returncode != 0:
                    raise ServerError(f"`lms server start --port {port}` failed (exit code {proc.returncode})",
                                      f"see the log lines below; is port {port} taken by another program?",
                                      log_tail=log_tail(log), log_path=str(log.path), kind="server")
                models = _wait_for_models(session, base_url, headers, spec.startup_timeout_s, log)
            else:
                notes.append(f"LM Studio's server was already running at {base_url}: using it (it stays running)")
            if lms is None:
                notes.append("the lms CLI was not found, so draftbench attached to the running LM Studio server and "
                             "cannot load or unload models: LM Studio loads them on the first request (just-in-time "
                             "loading must be on) with its own context length and GPU settings")
            for ref, kind in ((spec.target, "model"), (spec.draft, "draft_model")):
                if ref is not None and ref not in models:
                    known = ", ".join(sorted(models)[:12]) or "none"
                    raise ServerError(f"LM Studio has no model {ref!r}", f"use a model key from `lms ls` (LM Studio "
                                      f"lists: {known})", log_path=str(log.path), kind=kind)
            model_name = spec.target
            command = None
            if lms is not None:
                if (models.get(spec.target) or {}).get("state") == "loaded":
                    notes.append(f"{spec.target} was already loaded in LM Studio: using that instance (its context "
                                 "length and GPU offload are LM Studio's, not settings.ctx_size / lmstudio_gpu)")
                else:
                    command = load_command(lms, spec)
                    proc = run_lms(command, log, spec.startup_timeout_s)
                    if proc.returncode != 0 and re.search(r"already", proc.stdout + proc.stderr, re.IGNORECASE):
                        # an instance left by an interrupted run: replace it
                        run_lms([lms, "unload", IDENTIFIER], log, 120)
                        proc = run_lms(command, log, spec.startup_timeout_s)
                    if proc.returncode != 0:
                        raise _load_failure(proc, spec.target, log)
                    loaded = IDENTIFIER
                    model_name = IDENTIFIER
            for note in notes:
                log.write("note: " + note)
            draft_was_loaded = (models.get(spec.draft) or {}).get("state") == "loaded" if spec.draft else True
            server = LMStudioServer(base_url, model=model_name, draft=spec.draft, endpoint=endpoint, lms=lms, log=log,
                                    api_key=api_key, loaded_identifier=loaded, started_server=started_server,
                                    unload_draft_after=not draft_was_loaded, command=command, port=port, spec=spec,
                                    load_time_s=time.perf_counter() - start)
            server.warnings.extend(notes)
            session.close()
            return server
        except BaseException:
            if lms is not None:
                if loaded:
                    _quietly(lambda: run_lms([lms, "unload", loaded], log, 120))
                if started_server:
                    _quietly(lambda: run_lms([lms, "server", "stop"], log, 60))
            session.close()
            raise

    def attach(self, base_url: str, *, model: str | None = None, api_key: str | None = None) -> LMStudioServer:
        api_key = api_key or os.environ.get("LM_API_TOKEN") or None
        server = LMStudioServer(base_url, model=model or "default", api_key=api_key)
        if model is None:
            models = _list_models(server.session, server.base_url, server.headers()) or {}
            loaded = [k for k, m in models.items() if m.get("state") == "loaded" and m.get("type") in ("llm", "vlm",
                                                                                                        None)]
            if loaded:
                server.model = loaded[0]
        return server

    # -- server.py lm-studio --------------------------------------------------------------
    def add_server_arguments(self, p) -> None:
        p.add_argument("--model", required=True, help="target model key (as `lms ls` prints it)")
        p.add_argument("--draft-model", default=None, help="draft model key: sent as \"draft_model\" with every "
                       "request (LM Studio speculates per request)")
        p.add_argument("--host", default="127.0.0.1", help="LM Studio's address (default 127.0.0.1)")
        p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"LM Studio's port (default {DEFAULT_PORT})")
        p.add_argument("--context-length", type=int, default=4096, help="lms load --context-length (default 4096)")
        p.add_argument("--gpu", default=None, help="lms load --gpu: off, max or 0-1 (default max)")
        p.add_argument("--endpoint", default="native", choices=ENDPOINTS, help="native (/api/v0 streamed, with "
                       "draft statistics), native-blocking (/api/v0 unstreamed) or openai (/v1)")
        p.add_argument("--startup-timeout", type=float, default=600.0, help="seconds to wait for loading (default 600)")
        p.add_argument("--log", default=None, help="log of the lms commands (default: under ~/.cache/draftbench/logs)")
        p.add_argument("--lms-bin", default=None, help="the lms CLI (default: PATH, then ~/.lmstudio/bin/lms)")
        p.add_argument("--client", default="auto", choices=lmstudio_choice.CHOICES, help="sdk: load through LM "
                       "Studio's Python SDK; rest: through the lms CLI; auto (default): sdk when installed")

    def spec_from_args(self, args, extra: list[str]) -> LaunchSpec:
        from ..errors import UsageError
        from ..settings_schema import COMMON_SETTINGS
        if args.port < 1:
            raise UsageError("--port must be LM Studio's port (1-65535)", f"the default is {DEFAULT_PORT}")
        problems = self.validate_settings({"lmstudio_gpu": args.gpu})
        if problems:
            raise UsageError(f"--gpu {problems[0].message}", problems[0].fix)
        settings = {k: f.default for k, f in COMMON_SETTINGS.items()}
        settings.update({k: f.default for k, f in self.settings_schema.items()})
        settings.update(lms_bin=args.lms_bin, lmstudio_port=args.port, lmstudio_gpu=args.gpu,
                        lmstudio_endpoint=args.endpoint, lmstudio_client=args.client, host=args.host,
                        ctx_size=args.context_length)
        client_problems = lmstudio_choice.validation_problems(settings)
        if client_problems:
            raise UsageError(f"--client {client_problems[0].message}", client_problems[0].fix)
        return LaunchSpec(target=args.model, draft=args.draft_model, host=args.host, port=args.port,
                          ctx_size=args.context_length, extra_args=tuple(extra), settings=settings,
                          startup_timeout_s=args.startup_timeout, log_path=args.log)


def _wait_for_models(session, base_url, headers, timeout_s: float, log: _Log) -> dict:
    deadline = time.perf_counter() + timeout_s
    delay = 0.05
    while True:
        models = _list_models(session, base_url, headers)
        if models is not None:
            return models
        if time.perf_counter() > deadline:
            raise ServerError(f"LM Studio's server did not answer at {base_url} within {timeout_s:g} s of "
                              "`lms server start`", "check LM Studio (`lms server status`), or raise "
                              "settings.startup_timeout_s", log_tail=log_tail(log), log_path=str(log.path),
                              kind="timeout")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)


def _load_failure(proc: subprocess.CompletedProcess, target: str, log: _Log) -> ServerError:
    output = (proc.stdout or "") + (proc.stderr or "")
    for pattern, kind, message, fix in _LOAD_FAILURES:
        if re.search(pattern, output, re.IGNORECASE):
            return ServerError(message.format(target=target) + f" (`lms load` exit code {proc.returncode})", fix,
                               log_tail=log_tail(log), log_path=str(log.path), kind=kind)
    return ServerError(f"`lms load {target}` failed (exit code {proc.returncode})", "see the log lines below",
                       log_tail=log_tail(log), log_path=str(log.path), kind="model")


def log_tail(log: _Log, lines: int = 20) -> str:
    return tail_file(log.path, lines)
