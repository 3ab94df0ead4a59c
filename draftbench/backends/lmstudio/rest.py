"""LM Studio through its REST API (``/api/v0``, ``/v1``), with the ``lms`` CLI where present.

Facts this relies on (LM Studio documentation and changelog; see docs/backends.md):

* ``GET /api/v0/models`` lists the downloaded models (``id``, ``state``).
* Speculative decoding is chosen per request (0.3.10+): ``"draft_model": "<key>"`` beside
  ``"model"``. The native ``/api/v0/chat/completions`` answers with ``stats``:
  ``tokens_per_second``, ``time_to_first_token``, ``generation_time``, ``draft_model``,
  ``total_draft_tokens_count`` = ``accepted_…`` + ``rejected_…`` + ``ignored_draft_tokens_count``.
  "Ignored" tokens were drafted but never checked by the main model, so they are counted
  neither as accepted nor as rejected: ``draft_n`` = accepted + rejected (the tokens the target
  verified, like llama.cpp's ``draft_n``) and acceptance = accepted / (accepted + rejected).
  The REST API cannot set the draft length or p-min per request (the SDK path can).
* The v0 documentation shows ``stats`` on non-streaming responses. We stream (client-side TTFT
  and tok/s need it) and read ``usage``/``stats`` from the stream's last chunk; an LM Studio that
  sends neither there gets a clear error (``settings.lmstudio_endpoint: "openai"`` then measures
  speed through ``/v1`` with ``stream_options.include_usage``, 0.3.18+, without acceptance).
* Without ``lms`` we can only attach to a server that is already running and let LM Studio
  load models on demand; we say so.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Any

import requests

from ...common.errors import RequestError, ServerError, ServerErrorKind
from ...common.files import cache_dir
from ...lifetime.polling import poll
from ...lifetime.process import tail_file
from ...results.memory import ServerMemory
from ..base import CountsSource, Credentials, DraftCounts, Launched, LaunchSpec, Server, SpeculationStatus, url_host
from ..http.client import StreamedResponse, expect_type, new_session, post_json, probe_json
from ..http.server_values import server_count, server_rate
from .lms import (
    HOW_TO_GET,
    IDENTIFIER,
    LMStudioLog,
    check_models,
    find_lms,
    load_command,
    load_failure,
    log_tail,
    quietly,
    run_lms,
)
from .settings import LMStudioSettings

PROBE_PROMPT = "Count from 1 to 30, separated by commas."
PROBE_TIMEOUT_S = 5.0       # LM Studio lists its models at once


def probe(session: requests.Session, base_url: str, headers: dict,
          timeout_s: float = PROBE_TIMEOUT_S) -> tuple[str, dict[str, dict] | None]:
    """``GET /api/v0/models``: ("ok", {id: entry}), or "down" (nothing listens), "auth" (a token is
    required) or "foreign" (something else answers)."""
    try:
        status, data = probe_json(session, base_url + "/api/v0/models", headers=headers, timeout_s=timeout_s)
    except requests.ConnectionError:
        return "down", None
    except requests.RequestException:         # a timeout, a redirect: not LM Studio as documented
        return "foreign", None
    if status in (401, 403):
        return "auth", None
    if status != 200 or not isinstance(data, dict) or not isinstance(data.get("data"), list):
        return "foreign", None
    return "ok", {m["id"]: m for m in data["data"] if isinstance(m, dict) and isinstance(m.get("id"), str)}


def list_models(session: requests.Session, base_url: str, headers: dict,
                timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, dict] | None:
    """``GET /api/v0/models`` as {id: entry}; None when LM Studio does not answer there."""
    return probe(session, base_url, headers, timeout_s)[1]


def counts_from_stats(stats: dict, *, draft_requested: bool) -> DraftCounts:
    """Draft counters from LM Studio's ``stats`` (ignored drafts excluded from draft_n; kept in details)."""
    accepted, rejected, ignored, total = (server_count(stats.get(f"{kind}_draft_tokens_count"),
                                                       f"stats.{kind}_draft_tokens_count")
                                          for kind in ("accepted", "rejected", "ignored", "total"))
    details = {"ignored": ignored, "total": total, "draft_model": stats.get("draft_model"),
               "time_to_first_token": stats.get("time_to_first_token")}
    if accepted is None and rejected is None and total is None:
        if draft_requested:
            # LM Studio reports these whenever it speculates: their absence is a measured "did not draft".
            return DraftCounts(drafted=0, accepted=0, source=CountsSource.STATS_WITHOUT_DRAFT, details=details)
        return DraftCounts(details=details)
    if rejected is None and total is not None and accepted is not None:
        rejected = total - accepted - (ignored or 0)
    drafted = accepted + rejected if accepted is not None and rejected is not None else None
    return DraftCounts(drafted=drafted, accepted=accepted, steps=None, source=CountsSource.STATS, details=details)


def blocking_chat(session: requests.Session, url: str, body: dict, *, headers: dict,
                  request_timeout_s: float) -> StreamedResponse:
    """One unstreamed /api/v0 request: the documented format, whose ``stats`` carry the draft counts.

    Without a stream the client cannot see the first token, so TTFT is LM Studio's own
    ``stats.time_to_first_token`` and decode tok/s runs from that moment to the answer's arrival."""
    body = {k: v for k, v in body.items() if k != "stream_options"}
    body["stream"] = False
    result = StreamedResponse(t_start=time.perf_counter())
    try:
        status, data, text = post_json(session, url, body, headers=headers, timeout_s=request_timeout_s)
    except requests.Timeout:
        raise RequestError(f"{url} did not answer within {request_timeout_s:g} s",
                           "raise settings.request_timeout_s or lower max_tokens") from None
    except requests.RequestException as exc:
        raise RequestError(f"cannot reach {url}: {exc}", "is LM Studio's server running?") from None
    result.t_end = time.perf_counter()
    if status != 200:
        raise RequestError(f"{url} answered HTTP {status}: {error_text(data, text)}")
    if data is None:
        raise RequestError(f"{url} answered with something that is not JSON", "is this LM Studio?")
    choices = data.get("choices") if isinstance(data, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = choice.get("message")
    if not isinstance(message, dict):
        message = {}
    result.text = expect_type(message.get("content"), str, "choices[0].message.content") or ""
    result.reasoning = (expect_type(message.get("reasoning_content"), str, "choices[0].message.reasoning_content")
                        or expect_type(message.get("reasoning"), str, "choices[0].message.reasoning") or "")
    result.finish_reason = expect_type(choice.get("finish_reason"), str, "choices[0].finish_reason")
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


@dataclass(frozen=True)
class LMStudioChanges:
    """What draftbench changed in LM Studio through the lms CLI, undone by :meth:`LMStudioServer.stop`:
    the instance it loaded, a draft LM Studio loaded for it, a server it started. Without ``lms`` nothing
    was changed (a server somebody else runs, used as it is)."""

    lms: str | None = None
    log: LMStudioLog | None = None
    loaded_identifier: str | None = None
    started_server: bool = False
    unload_draft_after: bool = False


NO_CHANGES = LMStudioChanges()


class LMStudioServer(Server):
    def __init__(self, base_url: str, *, model: str, draft: str | None = None, endpoint: str = "native",
                 changes: LMStudioChanges = NO_CHANGES, **kwargs):
        super().__init__(base_url, model=model, **kwargs)
        self.draft = draft
        self.endpoint = endpoint
        self.lms = changes.lms
        self._log = changes.log
        self.loaded_identifier = changes.loaded_identifier
        self.started_server = changes.started_server
        self.unload_draft_after = changes.unload_draft_after
        self._stopped = False

    # -- requests -------------------------------------------------------------------------
    def chat_url(self) -> str:
        return self.base_url + ("/v1/chat/completions" if self.endpoint == "openai" else "/api/v0/chat/completions")

    def send(self, body: dict, *, request_timeout_s: float, stall_timeout_s: float) -> StreamedResponse:
        if self.endpoint != "native-blocking":
            return super().send(body, request_timeout_s=request_timeout_s, stall_timeout_s=stall_timeout_s)
        return blocking_chat(self.session, self.chat_url(), body, headers=self.headers(),
                             request_timeout_s=request_timeout_s)

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
        stats = response.section("stats")
        return server_rate(stats.get("tokens_per_second"), "stats.tokens_per_second") if stats else None

    def speculation_status(self, requested: bool) -> SpeculationStatus:
        """One short non-streaming request in the documented v0 format: do its stats show drafting?"""
        if not requested:
            return SpeculationStatus(False, "")
        if not self.draft or self.endpoint == "openai":
            return SpeculationStatus(None, "")
        body: dict[str, Any] = {"model": self.model, "draft_model": self.draft, "stream": False, "max_tokens": 24,
                "temperature": 0, "messages": [{"role": "user", "content": PROBE_PROMPT}]}
        try:
            status, data, text = post_json(self.session, self.base_url + "/api/v0/chat/completions", body,
                                           headers=self.headers(), timeout_s=600)
        except requests.RequestException as exc:
            return SpeculationStatus(None, f"could not check: {exc}")
        if status != 200:
            detail = error_text(data, text)
            if self._log:
                self._log.write(f"speculation check: HTTP {status}: {detail}")
            return SpeculationStatus(False, f"LM Studio refused draft_model {self.draft!r} (HTTP "
                                     f"{status}: {detail})")
        stats = data.get("stats") if isinstance(data, dict) else None
        if not isinstance(stats, dict):
            return SpeculationStatus(None, "")
        counts = counts_from_stats(stats, draft_requested=True)
        if self._log:
            self._log.write(f"speculation check: stats {stats}")
        if counts.drafted == 0 and counts.source is CountsSource.STATS_WITHOUT_DRAFT:
            return SpeculationStatus(False, f"LM Studio answered without draft statistics, so it did not use the "
                                     f"draft {self.draft!r}; speculative decoding needs LM Studio 0.3.10+ and a draft "
                                     "with the target's vocabulary (LM Studio's own picker lists only compatible "
                                     "drafts)")
        return SpeculationStatus(True, "")

    # -- lifecycle ------------------------------------------------------------------------
    def memory_use(self) -> ServerMemory:
        return ServerMemory(unreported="LM Studio's REST API reports no memory figures (its SDK says the loaded "
                                       "models' sizes: settings.lmstudio_client \"sdk\")")

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
                    quietly(lambda: run_lms([self.lms, "unload", self.loaded_identifier], self._log, 120))
                if self.unload_draft_after and self.draft:
                    models = list_models(self.session, self.base_url, self.headers()) or {}
                    if (models.get(self.draft) or {}).get("state") == "loaded":
                        quietly(lambda: run_lms([self.lms, "unload", self.draft], self._log, 120))
                if self.started_server:
                    quietly(lambda: run_lms([self.lms, "server", "stop"], self._log, 60))
        finally:
            self.session.close()



def error_text(data: Any, text: str) -> str:
    """LM Studio's error message from an answer's JSON body, else the start of its text."""
    err = data.get("error") if isinstance(data, dict) else None
    if isinstance(err, dict):
        err = err.get("message")
    return str(err)[:300] if err else text[:300].strip()



def wait_for_models(session, base_url, headers, timeout_s: float, log: LMStudioLog) -> dict:
    models = poll(lambda: list_models(session, base_url, headers), timeout_s)
    if models is None:
        raise ServerError(f"LM Studio's server did not answer at {base_url} within {timeout_s:g} s of "
                          "`lms server start`", "check LM Studio (`lms server status`), or raise "
                          "settings.startup_timeout_s", log_tail=log_tail(log), log_path=str(log.path),
                          kind=ServerErrorKind.TIMEOUT)
    return models



def launch_rest(spec: LaunchSpec) -> LMStudioServer:
    """Start or attach to LM Studio's server, load the target with `lms`; the caller must stop() the server."""
    own = LMStudioSettings.of(spec.settings)
    port = own.lmstudio_port
    base_url = f"http://{url_host(spec.host)}:{port}"
    log = LMStudioLog(spec.log_path or cache_dir() / "logs" / f"lmstudio-{port}.log")
    lms = find_lms(own.lms_bin)
    api_key = os.environ.get("LM_API_TOKEN") or None
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    session = new_session()         # refuses redirects: we only benchmark the server we asked
    notes: list[str] = []
    start = time.perf_counter()
    started_server = False
    loaded = None
    log.write(f"LM Studio server: {base_url}" + (f" (lms: {lms})" if lms else " (lms CLI not found)"))
    try:
        models = running_models(session, base_url, headers, port, log)
        if models is None:
            started_server = True     # before it answers: a server that started but never answered is stopped too
            models = start_server(session, base_url, headers, lms, spec.startup_timeout_s, port, log)
        else:
            notes.append(f"LM Studio's server was already running at {base_url}: using it (it stays running)")
        check_models(models, spec, log)
        command = None
        if lms is None:
            notes.append("the lms CLI was not found, so draftbench attached to the running LM Studio server and "
                         "cannot load or unload models: LM Studio loads them on the first request (just-in-time "
                         "loading must be on) with its own context length and GPU settings")
        elif (models.get(spec.target) or {}).get("state") == "loaded":
            notes.append(f"{spec.target} was already loaded in LM Studio: using that instance (its context "
                         "length and GPU offload are LM Studio's, not settings.ctx_size / lmstudio_gpu)")
        else:
            command = load_command(lms, spec)
            loaded = load_target(lms, command, spec, log)
        for note in notes:
            log.write("note: " + note)
        draft_was_loaded = (models.get(spec.draft) or {}).get("state") == "loaded" if spec.draft else True
        changes = LMStudioChanges(lms, log, loaded, started_server, unload_draft_after=not draft_was_loaded)
        server = LMStudioServer(base_url, model=loaded or spec.target, draft=spec.draft,
                                endpoint=own.lmstudio_endpoint, changes=changes,
                                credentials=Credentials(api_key=api_key),
                                launched=Launched(command=command, port=port, load_time_s=time.perf_counter() - start))
        server.notes.extend(notes)
        return server
    except BaseException:
        if lms is not None:
            if loaded:
                quietly(lambda: run_lms([lms, "unload", loaded], log, 120))
            if started_server:
                quietly(lambda: run_lms([lms, "server", "stop"], log, 60))
        raise
    finally:
        session.close()


def running_models(session: requests.Session, base_url: str, headers: dict, port: int,
                   log: LMStudioLog) -> dict[str, dict] | None:
    """The models of the LM Studio server answering at ``base_url``; None when nothing answers there.
    Something that answers but wants a token, or is not LM Studio, is an error."""
    state, models = probe(session, base_url, headers)
    if state == "auth":
        raise ServerError(f"LM Studio at {base_url} requires an API token", "export LM_API_TOKEN=<a token "
                          "from LM Studio's Developer page> (it is sent as a Bearer token and never saved)",
                          log_path=str(log.path), kind=ServerErrorKind.AUTH)
    if state == "foreign":
        raise ServerError(f"port {port} answers, but not as LM Studio (no /api/v0/models there)",
                          "set settings.lmstudio_port / --port to LM Studio's port (default 1234), or stop "
                          "the program using that port", log_path=str(log.path), kind=ServerErrorKind.FOREIGN)
    return models


def start_server(session: requests.Session, base_url: str, headers: dict, lms: str | None, timeout_s: float,
                 port: int, log: LMStudioLog) -> dict[str, dict]:
    """`lms server start` on ``port``, then its models once it answers."""
    if lms is None:
        raise ServerError(f"no LM Studio server answers at {base_url}, and the lms CLI was not found "
                          "to start one", "start LM Studio's server (Developer tab → Start server, port "
                          f"{port}) and run again, set settings.lmstudio_port if it uses another port, "
                          f"or {HOW_TO_GET}", log_path=str(log.path), kind=ServerErrorKind.UNREACHABLE)
    proc = run_lms([lms, "server", "start", "--port", str(port)], log, 120)
    if proc.returncode != 0:
        raise ServerError(f"`lms server start --port {port}` failed (exit code {proc.returncode})",
                          f"see the log lines below; is port {port} taken by another program?",
                          log_tail=log_tail(log), log_path=str(log.path), kind=ServerErrorKind.SERVER)
    return wait_for_models(session, base_url, headers, timeout_s, log)


def load_target(lms: str, command: list[str], spec: LaunchSpec, log: LMStudioLog) -> str:
    """`lms load` the target under our identifier (returned)."""
    proc = run_lms(command, log, spec.startup_timeout_s)
    if proc.returncode != 0 and re.search(r"already", proc.stdout + proc.stderr, re.IGNORECASE):
        # an instance left by an interrupted run: replace it
        run_lms([lms, "unload", IDENTIFIER], log, 120)
        proc = run_lms(command, log, spec.startup_timeout_s)
    if proc.returncode != 0:
        raise load_failure(proc, spec.target, log)
    return IDENTIFIER
