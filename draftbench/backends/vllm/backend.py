"""vLLM's OpenAI-compatible server (``vllm serve``).

Facts this relies on (vLLM documentation, 2025–2026; see docs/backends.md):

* Speculation is configured with one JSON argument:
  ``vllm serve TARGET --speculative-config '{"method": …, "model": DRAFT, "num_speculative_tokens": K}'``.
  The old ``--speculative-model`` / ``--num-speculative-tokens`` flags were removed in 2025.
* ``GET /health`` answers 200 once the engine is up; the port refuses connections while the
  model loads, and ``/health`` answers 503 if the engine died.
* ``GET /metrics`` (Prometheus) has the counters ``vllm:spec_decode_num_drafts_total``,
  ``vllm:spec_decode_num_draft_tokens_total`` and ``vllm:spec_decode_num_accepted_tokens_total``
  (one series per engine; we sum them) when speculation is configured, and none of them otherwise;
  ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}`` counts accepted tokens per
  draft position.
* With ``--per-request-spec-decode-metrics summary`` newer builds put
  ``metrics.speculative_decoding`` (``num_spec_steps``, ``num_draft_tokens``,
  ``num_accepted_draft_tokens``…) on the final usage chunk of a stream.
* Streams carry several tokens per chunk; token counts come from ``usage``
  (``stream_options.include_usage``).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import requests

from ...common.errors import ModelProblem, Problem, ServerError, ServerErrorKind, UsageError
from ...common.files import PathProblem, cache_dir, expand_path
from ...common.suggest import did_you_mean
from ...config.candidates import CandidateSpec
from ...config.extra_args import bind_host, speculative_config_problems
from ...config.server_env import vllm_environment
from ...config.settings import DEFAULTS, Settings
from ...lifetime.process import ManagedProcess, read_log
from ...results.memory import ServerMemory
from ..base import (
    Backend,
    CountsSource,
    Credentials,
    DraftCounts,
    Launched,
    LaunchSpec,
    Server,
    SpeculationStatus,
    add_common_server_arguments,
    url_host,
)
from ..how_to_run import Plumbing
from ..http.client import probe_json
from ..http.server_values import counter_difference, server_count
from ..startup import launch_process
from .command import (
    COUNTERS,
    DEFAULT_NUM_SPECULATIVE_TOKENS,
    MODEL_FREE_METHODS,
    build_command,
    explain_exit,
    find_vllm,
    folder_problem,
    launcher_problem,
    looks_like_path,
    parse_counters,
    parse_totals,
    per_position_delta,
    per_step_positions,
    served_name,
    speculative_config,
    speculative_config_of,
)
from .memory import reported
from .parallel import parallel_problems, topology_from_command
from .settings import METHODS, VLLMSettings


class VLLMServer(Server):
    stop_grace_s = 10.0      # let vLLM release the GPU cleanly; then the group is killed
    methods_evidence = "its /metrics has vllm:spec_decode_* counters"

    def __init__(self, *args, expects_draft: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.expects_draft = expects_draft
        self._has_spec_counters: bool | None = None   # learnt from /metrics
        self.log_offset = 0                            # where this server's lines start in its (appended) log

    @property
    def bench_hint(self) -> str:
        return f"python bench.py --url {self.base_url} --backend vllm --model {self.model}"

    def request_body(self, messages, *, max_tokens, temperature, seed):
        body = super().request_body(messages, max_tokens=max_tokens, temperature=temperature, seed=seed)
        body["stream_options"] = {"include_usage": True}   # token counts: chunks may carry several tokens
        return body

    # -- Prometheus counters ---------------------------------------------------------------
    def _metrics_text(self) -> str | None:
        try:
            response = self.session.get(self.base_url + "/metrics", timeout=self.probe_s(5), headers=self.headers())
        except requests.RequestException:
            return None
        return response.text if response.status_code == 200 else None

    def spec_counters(self) -> dict[str, float] | None:
        text = self._metrics_text()
        if text is None:
            return None
        counters = parse_counters(text)
        self._has_spec_counters = bool(counters)
        return counters or None

    def _settled_counters(self) -> dict[str, float] | None:
        """Counters after a request, read until two readings agree (vLLM records a step's stats
        right after handing out its tokens, so the last step could otherwise be missed)."""
        last = self.spec_counters()
        for _ in range(5):
            time.sleep(0.01)
            now = self.spec_counters()
            if now == last:
                break
            last = now
        return last

    def totals(self) -> dict[str, float] | None:
        """Read until two readings agree: vLLM records a step's statistics just after its tokens went out."""
        last = None
        for _ in range(6):
            text = self._metrics_text()
            if text is None:
                return None
            now = parse_totals(text)
            if now == last:
                break
            last = now
            time.sleep(0.01)
        return last

    def memory_use(self) -> ServerMemory:
        """The weights and KV cache its log names, and /metrics' cache configuration (see ``vllm/memory.py``)."""
        log = self.log_path
        if log is None:
            return ServerMemory(unreported="draftbench did not start this server: its log is not ours to read")
        return reported(read_log(log, self.log_offset), self._metrics_text())

    def before_request(self):
        if self._has_spec_counters is False:
            return None
        return self.spec_counters()

    def draft_counts(self, response, before) -> DraftCounts:
        per_request = response.section("metrics", "speculative_decoding")
        if per_request is not None and per_request.get("num_draft_tokens") is not None:
            # Settling also keeps the next request's baseline clean.
            settled = self._settled_counters() if before is not None else None
            where = "metrics.speculative_decoding."
            return DraftCounts(drafted=server_count(per_request["num_draft_tokens"], where + "num_draft_tokens"),
                               accepted=server_count(per_request.get("num_accepted_draft_tokens"),
                                                     where + "num_accepted_draft_tokens"),
                               steps=server_count(per_request.get("num_spec_steps"), where + "num_spec_steps"),
                               source=CountsSource.RESPONSE,
                               details={k: per_request[k] for k in ("mean_acceptance_length", "draft_acceptance_rate",
                                                                     "acceptance_histogram") if k in per_request},
                               accepted_per_pos=per_step_positions(per_request)
                               or per_position_delta(before, settled))
        if before is None:
            return DraftCounts()
        after = self._settled_counters()
        if after is None:
            return DraftCounts()

        def diff(key: str) -> int | None:
            name = COUNTERS[key]
            return counter_difference(after.get(name), before.get(name), name)

        return DraftCounts(drafted=diff("draft_tokens"), accepted=diff("accepted"), steps=diff("drafts"),
                           source=CountsSource.METRICS, accepted_per_pos=per_position_delta(before, after))

    def active_methods(self) -> tuple[str, ...] | None:
        """``()`` where /metrics is vLLM's and has no spec_decode counter (vLLM exports them exactly when it
        was started with a speculative config: checked on 0.32.0), so a baseline proves it decoded plainly;
        the method from the command line where it has them; None where /metrics cannot tell."""
        text = self._metrics_text()
        if text is None or "vllm:" not in text:
            return None
        if not parse_counters(text):
            return ()
        config = speculative_config_of(self.command or [])
        method = config.get("method") if config else None
        return (str(method) if method else "speculative decoding (method not known)",)

    def speculation_status(self, requested: bool) -> SpeculationStatus:
        text = self._metrics_text()
        if text is None:
            return SpeculationStatus(None if requested else False, "")
        counters = parse_counters(text)
        self._has_spec_counters = bool(counters)
        if counters:
            return SpeculationStatus(True, "")
        if requested and "vllm:" in text:
            return SpeculationStatus(False, "vLLM is running without speculative decoding (its /metrics has no "
                                     "vllm:spec_decode_* counters); check the --speculative-config line in the log")
        return SpeculationStatus(None if requested else False, "")




def _served_models(server: Server) -> list[str] | None:
    try:
        _, data = probe_json(server.session, server.base_url + "/v1/models", headers=server.headers(),
                             timeout_s=server.probe_s(10))
    except requests.RequestException:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        return None
    return [m["id"] for m in data["data"] if isinstance(m, dict) and isinstance(m.get("id"), str)]


def _version(server: Server) -> str | None:
    try:
        _, data = probe_json(server.session, server.base_url + "/version", headers=server.headers(),
                             timeout_s=server.probe_s(5))
    except requests.RequestException:
        return None
    return str(data["version"]) if isinstance(data, dict) and data.get("version") else None


class VLLMBackend(Backend):
    name = "vllm"
    config_name = "vllm"
    aliases = ("vllm",)
    default_port = 8000
    path_settings = ("vllm_bin",)
    # Ours: the address and port, per-request counters, and the prefix cache turned off so a repeated prompt
    # cannot flatter TTFT (a server for people wants it on).
    plumbing = Plumbing(valued=("--host", "--port", "--per-request-spec-decode-metrics"),
                        switches=("--no-enable-prefix-caching",))
    settings_class = VLLMSettings

    def resolve_model(self, raw: str, base_dir: str) -> tuple[str, PathProblem | None]:
        """A Hugging Face id (``org/name``) stays as written; a path is expanded like any other."""
        candidate = os.path.join(base_dir, os.path.expanduser(raw))
        if looks_like_path(raw) or os.path.exists(candidate):
            return expand_path(raw, base_dir)
        return raw, None


    def model_problem(self, ref: str) -> ModelProblem | None:
        if ref.startswith("-"):      # `vllm serve --model=…` would read it as an option, not a model
            return ModelProblem(f"{ref!r} starts with '-', so vLLM would read it as an option, not a model",
                                "give a local folder or a Hugging Face id (org/name)")
        if os.path.isabs(ref) and not os.path.exists(ref):
            return ModelProblem(f"model folder {ref} does not exist", "check the path, or give a Hugging Face id "
                                "(org/name)", missing=True)
        problem = folder_problem(ref) if os.path.isabs(ref) else None
        return ModelProblem(problem, "give a checkpoint folder (config.json and the weights) or a Hugging Face id "
                            "(org/name)") if problem else None

    def validate_settings(self, settings: Settings) -> list[Problem]:
        problems = []
        if settings.draft_p_min is not None:
            problems.append(Problem("$.settings.draft_p_min", "is a llama.cpp setting; vLLM has no equivalent",
                                    "remove it (or use backend llamacpp)"))
        extra = VLLMSettings.of(settings).vllm_speculative_config
        if extra is not None:
            if not isinstance(extra, dict):
                problems.append(Problem("$.settings.vllm_speculative_config",
                                        f"must be an object, not {json.dumps(extra)[:60]}",
                                        "write e.g. {\"prompt_lookup_max\": 4}"))
            else:
                try:
                    json.dumps(extra)
                except (TypeError, ValueError):
                    problems.append(Problem("$.settings.vllm_speculative_config", "is not plain JSON"))
                problems += speculative_config_problems("$.settings.vllm_speculative_config", extra)
        return problems + parallel_problems(settings)

    def validate_candidates(self, specs: tuple[CandidateSpec, ...], settings: Settings) -> list[Problem]:
        """One method per candidate (vLLM has no hybrids); parameters are --speculative-config keys."""
        problems = []
        for s in specs:
            if len(s.method) > 1:
                problems.append(Problem(f"{s.where}.method", "vLLM runs one speculative method at a time",
                                        "give one method (hybrids are a llama.cpp feature)"))
            for m in s.method:
                if m not in METHODS:
                    problems.append(Problem(f"{s.where}.method", f"{m!r} is not a vLLM speculative method",
                                            did_you_mean(m, METHODS, quote=True)))
                elif m not in MODEL_FREE_METHODS and s.draft is None:
                    problems.append(Problem(s.where, f"method {m} needs a draft model", "add \"draft\": a label "
                                            "from drafts (an id or folder)"))
            # parameters are --speculative-config keys: the same rules as -sc in extra_args
            problems += speculative_config_problems(f"{s.where}.params", s.params)
        explicit = VLLMSettings.of(settings).vllm_bin
        bad_bin = launcher_problem(explicit) if explicit else None     # what the run's start would find
        if bad_bin:
            problems.append(Problem("$.settings.vllm_bin", bad_bin, "point it at the `vllm` command of an environment "
                                    "that has vLLM, or at that environment's Python"))
        return problems

    def check_ready_to_run(self, settings: Settings) -> None:
        find_vllm(VLLMSettings.of(settings).vllm_bin)

    def launch(self, spec: LaunchSpec) -> VLLMServer:
        launcher = find_vllm(VLLMSettings.of(spec.settings).vllm_bin)
        cmd = build_command(launcher, spec)
        environment = vllm_environment(os.environ)     # passed on, its VLLM_* variables noted (config/server_env.py)
        log_path = spec.log_path or str(cache_dir() / "logs" / f"vllm-{spec.port}.log")
        offset = os.path.getsize(log_path) if os.path.isfile(log_path) else 0   # the log is appended to
        server = VLLMServer(f"http://{url_host(bind_host(spec.host, spec.extra_args))}:{spec.port}", model=served_name(spec),
                            launched=Launched(ManagedProcess(cmd, log_path, environment.env, port=spec.port,
                                                             grace_s=VLLMServer.stop_grace_s), cmd, spec.port),
                            expects_draft=spec.draft is not None)
        server.log_offset = offset
        server.notes += [n for n in (launcher.note, environment.note("vLLM")) if n]
        launch_process(server, spec, what="vLLM", health_path="/health",
                       explain_exit=lambda code, tail: explain_exit(code, tail, spec.port, log_path),
                       verify=lambda s: self._verify_identity(server, spec))
        server.version = _version(server)
        server.topology = topology_from_command(cmd, speculative_config(spec))
        return server

    def attach(self, base_url: str, *, model: str | None = None, api_key: str | None = None,
               auth: tuple[str, str] | None = None, probe_timeout_s: float | None = None) -> VLLMServer:
        server = VLLMServer(base_url, model=model or "default", credentials=Credentials(api_key, auth),
                            probe_timeout_s=probe_timeout_s)
        if model is None:
            served = _served_models(server)
            if served:
                server.model = served[0]
        server.version = _version(server)
        server.expects_draft = bool(server.speculation_status(requested=True).active)
        return server

    def _verify_identity(self, server: VLLMServer, spec: LaunchSpec) -> None:
        """Refuse to benchmark a server that is not the one we started."""
        served = _served_models(server)
        if served is None or server.model not in served:
            raise ServerError(f"port {spec.port} answers, but not as the vLLM we started (it serves "
                              f"{', '.join(served) if served else 'something else'}, not {server.model})",
                              "another program is listening on that port; stop it or set settings.port",
                              kind=ServerErrorKind.FOREIGN)


    # -- server.py vllm ---------------------------------------------------------------------

    def add_server_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--model", required=True, help="target: a Hugging Face id (org/name) or a local folder")
        p.add_argument("--draft-model", default=None, help="draft model (id or folder); turns speculative decoding on")
        p.add_argument("--num-speculative-tokens", type=int, default=None,
                       help=f"draft length k (default {DEFAULT_NUM_SPECULATIVE_TOKENS} for methods that need one)")
        p.add_argument("--method", default=None, choices=METHODS,
                       help="speculative method (default draft_model with --draft-model; ngram, suffix and mtp need "
                       "no draft model)")
        p.add_argument("--per-request-metrics", default=None, choices=("none", "summary", "detailed"),
                       help="pass --per-request-spec-decode-metrics (newer vLLM)")
        add_common_server_arguments(p, port=self.default_port, what="vLLM")
        p.add_argument("--max-model-len", type=int, default=DEFAULTS.ctx_size,
                       help=f"context length (default {DEFAULTS.ctx_size})")
        p.add_argument("--vllm-bin", default=None, help="the vllm executable, or the Python of an environment that "
                       "has vLLM (default: PATH, then the CPU build of `make vllm`)")


    def spec_from_args(self, args: argparse.Namespace, extra: list[str]) -> LaunchSpec:
        method = args.method
        if method is None:
            method = "draft_model"
        elif method not in MODEL_FREE_METHODS and not args.draft_model:
            raise UsageError(f"--method {method} needs --draft-model", f"give the {method} model with --draft-model, "
                             f"or use --method ngram / suffix / mtp")
        draft = args.draft_model
        if draft is None and args.method in MODEL_FREE_METHODS:
            draft = args.method        # speculation on, no separate model
        if args.num_speculative_tokens is not None and draft is None:
            raise UsageError("--num-speculative-tokens needs --draft-model or --method",
                             "add --draft-model D (or --method ngram)")
        settings = Settings(host=args.host, ctx_size=args.max_model_len, backend=VLLMSettings(
            vllm_bin=args.vllm_bin, vllm_method=method, vllm_per_request_metrics=args.per_request_metrics))
        return LaunchSpec(target=args.model, draft=draft, draft_max=args.num_speculative_tokens, host=args.host,
                          port=args.port, ctx_size=args.max_model_len, extra_args=tuple(extra), settings=settings,
                          startup_timeout_s=args.startup_timeout, log_path=args.log)
