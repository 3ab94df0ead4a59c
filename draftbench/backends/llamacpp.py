"""llama.cpp's ``llama-server``.

llama.cpp renames flags often, so nothing here assumes a build: the flags a binary accepts
are read from its ``--help`` (cached per binary) and the command is built from those.
Facts this relies on (checked on build 11434; see README "llama.cpp versions"):

* ``-md DRAFT`` alone loads the draft but does not speculate in new builds: add
  ``--spec-type draft-simple`` where that flag exists (old builds imply it).
* Draft length is ``--spec-draft-n-max`` in new builds, ``--draft-max`` in old ones.
* ``-np`` defaults to several slots: we pass ``-np 1`` for single-stream numbers.
* ``timings.draft_n``/``draft_n_accepted`` appear in a request's timings only when
  ``draft_n > 0``; ``/slots[].speculative`` says whether speculation is configured.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import ClassVar

import requests

from ..errors import BinaryNotFoundError, ServerError
from ..paths import cache_dir
from ..process import ManagedProcess
from ..settings_schema import Field
from .base import (
    Backend,
    DraftCounts,
    LaunchSpec,
    Server,
    SpeculationStatus,
    explain_exit_from_log,
    find_executable,
    same_file,
    url_host,
    wait_until_ready,
)

COMMON_BUILD_DIRS = (
    "~/llama.cpp/build/bin",
    "~/Code/llama.cpp/build/bin",
    "~/code/llama.cpp/build/bin",
    "~/src/llama.cpp/build/bin",
    "~/Code/ml/llama.cpp/build/bin",
    "./llama.cpp/build/bin",
    "/opt/llama.cpp/build/bin",
    "/usr/local/bin",
    "/opt/homebrew/bin",
)

_HOW_TO_GET = ("run `make llama-server` in the draftbench folder (builds it once into ~/.cache/draftbench), "
               "install llama.cpp (e.g. `brew install llama.cpp`), or set settings.llama_bin / --llama-bin")


def find_llama_server(explicit: str | None = None) -> str:
    """Locate llama-server: explicit path, $DRAFTBENCH_LLAMA_SERVER, PATH, build folders, our cache."""
    cached = sorted(glob.glob(str(cache_dir() / "llama-server-*" / "bin" / "llama-server")), reverse=True)
    found = find_executable("llama-server", explicit, env_var="DRAFTBENCH_LLAMA_SERVER",
                            setting="settings.llama_bin / --llama-bin", how_to_get=_HOW_TO_GET,
                            candidates=tuple(os.path.join(d, "llama-server") for d in COMMON_BUILD_DIRS)
                            + tuple(cached))
    if found is None:
        raise BinaryNotFoundError("llama-server was not found (searched PATH, common build folders and "
                                  f"{cache_dir()})", _HOW_TO_GET)
    return found


# --------------------------------------------------------------------------- capabilities

_caps_memo: dict[str, dict] = {}


def _binary_key(binary: str) -> str:
    st = os.stat(binary)
    return hashlib.sha256(f"{os.path.realpath(binary)}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]


def capabilities(binary: str) -> dict:
    """Flags the binary accepts (from ``--help``) and its version; cached per binary."""
    key = _binary_key(binary)
    if key in _caps_memo:
        return _caps_memo[key]
    cache_file = cache_dir() / "capabilities" / f"{key}.json"
    try:
        caps = json.loads(cache_file.read_text())
        _caps_memo[key] = caps
        return caps
    except (OSError, ValueError):
        pass
    try:
        help_out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60,
                                  errors="replace")
        version_out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60,
                                     errors="replace")
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BinaryNotFoundError(f"cannot run {binary} --help: {exc}", f"check that it is a working llama-server; "
                                  f"{_HOW_TO_GET}") from None
    text = help_out.stdout + help_out.stderr
    flags = sorted(set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text)))
    if "--model" not in flags and "-m" not in flags:
        raise BinaryNotFoundError(f"{binary} does not look like llama-server (its --help lists no --model)",
                                  f"point settings.llama_bin at llama-server; {_HOW_TO_GET}")
    version = None
    for line in (version_out.stdout + version_out.stderr).splitlines():
        if line.startswith("version:"):
            version = line.split(":", 1)[1].strip()
            break
    spec_types = []
    m = re.search(r"--spec-type[^\n]*\n?(?:[^\n]*\n){0,6}", text)
    if m:
        spec_types = sorted(set(re.findall(r"\b((?:draft|ngram)-[a-z0-9-]+)\b", m.group(0))))
    caps = {"flags": flags, "version": version, "spec_types": spec_types, "binary": os.path.realpath(binary)}
    _caps_memo[key] = caps
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(caps))
        os.replace(tmp, cache_file)
    except OSError:
        pass
    return caps


def _first(caps: dict, *names: str) -> str | None:
    flags = set(caps["flags"])
    return next((n for n in names if n in flags), None)


def build_command(binary: str, caps: dict, spec: LaunchSpec) -> list[str]:
    """The exact llama-server command for one combination, using only flags this build knows."""
    cmd = [binary, "-m", spec.target, "--host", spec.host, "--port", str(spec.port),
           "-c", str(spec.ctx_size), "-ngl", str(spec.gpu_layers)]
    slots = _first(caps, "-np", "--parallel")
    if slots:
        cmd += [slots, "1"]
    if _first(caps, "--metrics"):
        cmd += ["--metrics"]
    if spec.draft:
        cmd += [_first(caps, "-md", "--model-draft", "--spec-draft-model") or "-md", spec.draft]
        if "--spec-type" in caps["flags"]:
            cmd += ["--spec-type", "draft-simple"]
        draft_ngl = _first(caps, "-ngld", "--spec-draft-ngl", "--gpu-layers-draft", "--n-gpu-layers-draft")
        if draft_ngl:
            cmd += [draft_ngl, str(spec.gpu_layers)]
        if spec.draft_max is not None:
            flag = _first(caps, "--spec-draft-n-max", "--draft-max", "--draft-n-max", "--draft")
            if flag is None:
                raise ServerError("this llama-server has no flag for the draft length",
                                  "remove settings.draft_max, or use a newer llama.cpp", kind="flags")
            cmd += [flag, str(spec.draft_max)]
        p_min = spec.settings.get("draft_p_min")
        if p_min is not None:
            flag = _first(caps, "--spec-draft-p-min", "--draft-p-min")
            if flag is None:
                raise ServerError("this llama-server has no flag for the draft p-min",
                                  "remove settings.draft_p_min", kind="flags")
            cmd += [flag, f"{p_min:g}"]
    cmd += list(spec.extra_args)
    return cmd


# --------------------------------------------------------------------------- failures

_FAILURES = (
    # (regex on the log, kind, message, fix)
    (r"couldn't bind HTTP server socket", "port_in_use", "port {port} is already in use",
     "stop the program using it, or set settings.port to another port (0 = any free port)"),
    (r"the argument has been removed", "flags", "this llama-server rejected a removed flag",
     "remove it from extra_args; the log line below names its replacement"),
    (r"error: invalid argument|unknown argument", "flags", "this llama-server does not know one of the arguments",
     "check extra_args against `llama-server --help`"),
    (r"failed to load draft model|failed to load the draft", "draft_model", "llama-server could not load the draft",
     "check the draft file (corrupt or incomplete download?)"),
    (r"invalid magic|not within the file bounds|failed to open GGUF|failed to read|model is corrupted|"
     r"unknown model architecture|error loading model", "model", "llama-server could not load the model",
     "check the model file (corrupt, incomplete, or an architecture this llama.cpp build does not know)"),
    (r"out of memory|failed to allocate|cudaMalloc failed|unable to allocate|ErrorOutOfDeviceMemory|"
     r"insufficient memory", "oom", "llama-server ran out of memory",
     "lower settings.gpu_layers or settings.ctx_size, or use a smaller quantisation"),
)


def explain_exit(returncode: int | None, log_tail: str, port: int, log_path: str | None) -> ServerError:
    return explain_exit_from_log(_FAILURES, "llama-server", "see the log lines below; a corrupt model or an "
                                 "assertion in llama.cpp are the usual causes", returncode, log_tail, port, log_path)


# --------------------------------------------------------------------------- server

_METRIC = re.compile(r"^(llamacpp:[a-z_]+)(?:\{[^}]*\})?\s+([0-9.eE+-]+)\s*$", re.MULTILINE)


class LlamaCppServer(Server):
    backend_name = "llamacpp"

    def __init__(self, *args, has_metrics: bool = False, expects_draft: bool | None = None, api_key: str | None = None,
                 **kwargs):
        super().__init__(*args, **kwargs)
        self.has_metrics = has_metrics
        self.expects_draft = expects_draft
        self._api_key = api_key
        self.props: dict = {}

    def headers(self) -> dict:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def request_body(self, messages, *, max_tokens, temperature, seed):
        body = super().request_body(messages, max_tokens=max_tokens, temperature=temperature, seed=seed)
        body["cache_prompt"] = False  # a repeated prompt would otherwise skip prompt processing
        return body

    def _metrics(self) -> dict | None:
        if not self.has_metrics:
            return None
        try:
            text = self.session.get(self.base_url + "/metrics", timeout=5).text
        except requests.RequestException:
            return None
        return {name: float(value) for name, value in _METRIC.findall(text)}

    def before_request(self):
        return self._metrics()

    def draft_counts(self, response, before) -> DraftCounts:
        timings = response.timings
        if not timings:
            return DraftCounts()
        drafted = timings.get("draft_n")
        accepted = timings.get("draft_n_accepted")
        if drafted is None and self.expects_draft:
            # llama-server omits the draft fields when nothing was drafted.
            drafted, accepted = 0, 0
        steps = None
        after = self._metrics() if before is not None else None
        if before is not None and after is not None:
            key = "llamacpp:spec_decode_num_drafts_total"
            if key in after and key in before:
                steps = round(after[key] - before.get(key, 0))
        return DraftCounts(drafted=drafted, accepted=accepted, steps=steps, source="timings")

    def server_decode_tps(self, response) -> float | None:
        if response.timings and isinstance(response.timings.get("predicted_per_second"), (int, float)):
            return float(response.timings["predicted_per_second"])
        return None

    def speculation_status(self, requested: bool) -> SpeculationStatus:
        tail = self.log_tail(400)
        if requested and re.search(r"vocabs are not compatible|draft model vocab type|failed to initialize "
                                   r"speculative|not compatible with", tail, re.IGNORECASE):
            return SpeculationStatus(False, "llama-server says the draft's vocabulary is not compatible with the "
                                     "target's; it runs without speculation. Use a draft from the same model family")
        try:
            slots = self.session.get(self.base_url + "/slots", timeout=5).json()
        except (requests.RequestException, ValueError):
            slots = None
        if isinstance(slots, list) and slots and isinstance(slots[0], dict) and "speculative" in slots[0]:
            active = bool(slots[0]["speculative"])
            if requested and not active:
                return SpeculationStatus(False, "llama-server loaded the draft but speculation is off (/slots says "
                                         "speculative: false); with new builds this happens without "
                                         "--spec-type draft-simple")
            return SpeculationStatus(active, "")
        return SpeculationStatus(None if requested else False, "")


class LlamaCppBackend(Backend):
    name = "llama-cpp"
    config_name = "llamacpp"
    aliases = ("llama.cpp", "llama_cpp", "llamacpp", "llama-cpp")
    default_port = 8080
    settings_schema: ClassVar[dict[str, Field]] = {}

    def check_ready_to_run(self, settings: dict) -> None:
        binary = find_llama_server(settings.get("llama_bin"))
        capabilities(binary)

    def launch(self, spec: LaunchSpec) -> LlamaCppServer:
        binary = find_llama_server(spec.settings.get("llama_bin"))
        caps = capabilities(binary)
        cmd = build_command(binary, caps, spec)
        log_path = spec.log_path or str(cache_dir() / "logs" / f"llama-server-{spec.port}.log")
        start = time.perf_counter()
        proc = ManagedProcess(cmd, log_path, port=spec.port)
        server = LlamaCppServer(f"http://{url_host(spec.host)}:{spec.port}", model=Path(spec.target).name,
                                process=proc, command=cmd, version=caps.get("version"), port=spec.port, spec=spec,
                                has_metrics="--metrics" in cmd, expects_draft=spec.draft is not None)
        try:
            wait_until_ready(proc, server.base_url + "/health", spec.startup_timeout_s, what="llama-server",
                             on_exit=lambda code, tail: explain_exit(code, tail, spec.port, log_path))
            server.load_time_s = time.perf_counter() - start
            self._verify_identity(server, spec)
        except BaseException:
            server.stop()
            raise
        return server

    def attach(self, base_url: str, *, model: str | None = None, api_key: str | None = None) -> LlamaCppServer:
        server = LlamaCppServer(base_url, model=model or "default", api_key=api_key)
        try:
            props = server.session.get(server.base_url + "/props", timeout=10, headers=server.headers()).json()
        except (requests.RequestException, ValueError):
            props = {}
        server.props = props if isinstance(props, dict) else {}
        server.version = server.props.get("build_info")
        server.has_metrics = bool(server.props.get("endpoint_metrics"))
        status = server.speculation_status(requested=True)
        server.expects_draft = status.active
        return server

    def _verify_identity(self, server: LlamaCppServer, spec: LaunchSpec) -> None:
        """Refuse to benchmark a server that is not the one we started."""
        if not server.alive():
            raise explain_exit(server.process.returncode, server.log_tail(30), spec.port, server.log_path)
        try:
            props = server.session.get(server.base_url + "/props", timeout=10).json()
        except (requests.RequestException, ValueError):
            props = None
        model_path = props.get("model_path") if isinstance(props, dict) else None
        if not isinstance(props, dict) or (model_path and not same_file(model_path, spec.target)):
            raise ServerError(f"port {spec.port} answers, but not as the llama-server we started "
                              f"(it serves {model_path or 'something else'})",
                              "another program is listening on that port; stop it or set settings.port",
                              kind="foreign")
        server.props = props
