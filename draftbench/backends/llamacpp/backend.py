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

import argparse
import os
import re
from pathlib import Path

import requests

from ...common.errors import ModelFileError, ModelProblem, Problem, ServerError, ServerErrorKind, UsageError
from ...common.files import cache_dir
from ...common.gguf import vocab_mismatch
from ...config.candidates import CandidateSpec
from ...config.extra_args import api_key_from_args, bind_host
from ...config.model_ref import ModelRef
from ...config.settings import COMMON_SETTINGS, DEFAULTS, Settings
from ...lifetime.process import ManagedProcess, read_log
from ...results.memory import ServerMemory
from ...results.method_stats import METHODS_KEY
from .. import prometheus
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
from ..executables import same_file
from ..how_to_run import Plumbing
from ..http.client import probe_json
from ..http.server_values import MAX_TOKENS, counter_difference
from ..slots import SlotState
from ..startup import launch_process
from .command import (
    SYNTH_LEN_FLAG,
    build_command,
    candidate_problems,
    capabilities,
    find_llama_server,
    local_devices,
    server_environment,
    spec_types,
    stats_lines_expected,
)
from .failures import RPC_LOST, RPC_LOST_FIX, explain_exit
from .memory import check_slot_context, context_problem, estimate_for, in_use, side_by_side_problem
from .rpc import device_names, probe_endpoint, reachable_endpoints, rpc_startup_timeout
from .settings import LlamaCppSettings
from .stats import VERBOSITY_FLAGS, StatsLog
from .tokenizer import LlamaCppTokenizer
from .topology import proven_topology

# --------------------------------------------------------------------------- server

DRAFTS_TOTAL = "llamacpp:spec_decode_num_drafts_total"
ACCEPTED_PER_POS = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"
# Server.totals() names -> llama-server's /metrics counters (build 11434; older builds lack some)
TOTALS = {"prompt_tokens": "llamacpp:prompt_tokens_total", "output_tokens": "llamacpp:tokens_predicted_total",
          "draft_tokens": "llamacpp:spec_decode_num_draft_tokens_total",
          "accepted_tokens": "llamacpp:spec_decode_num_accepted_tokens_total", "verify_steps": DRAFTS_TOTAL,
          "decode_calls": "llamacpp:n_decode_total"}
BUSY_PER_DECODE = "llamacpp:n_busy_slots_per_decode"     # a gauge: busy slots per decode call, since start


class LlamaCppServer(Server):
    methods_evidence = "/slots speculative.types"

    def __init__(self, *args, has_metrics: bool = False, expects_draft: bool | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.has_metrics = has_metrics
        self.expects_draft = expects_draft
        self.props: dict = {}
        self.stats_log: StatsLog | None = None     # per-method statistics, when started at trace verbosity
        self.log_offset = 0                         # where this server's lines start in its (appended) log
        self.model_paths: tuple[str, str | None] | None = None   # target and draft as passed (the log names them)

    def request_body(self, messages, *, max_tokens, temperature, seed):
        body = super().request_body(messages, max_tokens=max_tokens, temperature=temperature, seed=seed)
        body["cache_prompt"] = False  # a repeated prompt would otherwise skip prompt processing
        return body

    def _metrics(self) -> list[prometheus.Sample] | None:
        if not self.has_metrics:
            return None
        try:
            response = self.http().get(self.base_url + "/metrics", timeout=self.probe_s(5), headers=self.headers())
        except requests.RequestException:
            return None
        return prometheus.parse(response.text, prefix="llamacpp:") if response.status_code == 200 else None

    def before_request(self):
        return self._metrics()

    def draft_counts(self, response, before) -> DraftCounts:
        timings = response.timings
        if not timings:
            return DraftCounts()
        drafted = response.timing_count("draft_n")
        accepted = response.timing_count("draft_n_accepted")
        if drafted is None and self.expects_draft:
            # llama-server omits the draft fields when nothing was drafted.
            drafted, accepted = 0, 0
        steps, per_pos = None, None
        after = self._metrics() if before is not None else None
        if before is not None and after is not None:
            steps = counter_difference(prometheus.total(after, DRAFTS_TOTAL), prometheus.total(before, DRAFTS_TOTAL),
                                       DRAFTS_TOTAL)
            # One slot, one request in flight: the counters' change is this request's.
            per_pos = prometheus.position_delta(before, after, ACCEPTED_PER_POS, present_before=DRAFTS_TOTAL)
        methods = self.stats_log.after_request() if self.stats_log else None
        return DraftCounts(drafted=drafted, accepted=accepted, steps=steps, source=CountsSource.TIMINGS,
                           details={METHODS_KEY: methods} if methods else {}, accepted_per_pos=per_pos)

    def totals(self) -> dict[str, float] | None:
        samples = self._metrics()
        if samples is None:
            return None
        out = {name: value for name, metric in TOTALS.items() if (value := prometheus.total(samples, metric)) is not None}
        busy, calls = prometheus.total(samples, BUSY_PER_DECODE), out.get("decode_calls")
        if busy is not None and calls is not None:
            out["busy_slot_decodes"] = busy * calls   # the gauge is a running mean; its sum is what differences
        return out

    def death_cause(self) -> ServerError | None:
        """An RPC endpoint that went away makes llama-server abort (ggml-rpc.cpp), a backtrace after the line."""
        m = re.search(RPC_LOST, self.log_tail(400))
        if m is None:
            return None
        return ServerError(f"an RPC endpoint went away (llama-server: \"{m.group(0).strip()}\")", RPC_LOST_FIX,
                           kind=ServerErrorKind.UNREACHABLE)

    def slot_states(self) -> tuple[SlotState, ...] | None:
        try:
            status, slots = probe_json(self.http(), self.base_url + "/slots", headers=self.headers(),
                                      timeout_s=self.probe_s(5))
        except requests.RequestException:
            return None
        if status != 200 or not isinstance(slots, list):
            return None

        def whole(value, default):   # a slot's id or context: a small whole number, or we do not know
            return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS \
                else default
        return tuple(SlotState(whole(s.get("id"), i), whole(s.get("n_ctx"), None), s.get("is_processing") is True)
                     for i, s in enumerate(slots) if isinstance(s, dict))

    def server_decode_tps(self, response) -> float | None:
        return response.timing_rate("predicted_per_second")

    def server_prefill(self, response) -> tuple[float | None, float | None]:
        prompt_ms = response.timing_rate("prompt_ms")     # a finite, non-negative number, checked as a rate is
        return (prompt_ms / 1000 if prompt_ms is not None else None), response.timing_rate("prompt_per_second")

    def tokenizer(self) -> LlamaCppTokenizer:
        return LlamaCppTokenizer(self)

    def memory_use(self) -> ServerMemory:
        return in_use(self.pid, self.log_path, self.log_offset, self.model_paths)

    def active_methods(self) -> tuple[str, ...] | None:
        """From ``/slots[0].params["speculative.types"]`` (e.g. ``none,ngram-simple``), which the server
        fills in once a request ran. ``/props`` is not reliable for this: it said ``none`` while on."""
        try:
            _, slots = probe_json(self.session, self.base_url + "/slots", headers=self.headers(),
                                  timeout_s=self.probe_s(5))
        except requests.RequestException:
            return None
        params = slots[0].get("params") if isinstance(slots, list) and slots and isinstance(slots[0], dict) else None
        types = params.get("speculative.types") if isinstance(params, dict) else None
        if not isinstance(types, str):
            return None
        return tuple(t for t in (part.strip() for part in types.split(",")) if t and t != "none")

    def speculation_status(self, requested: bool) -> SpeculationStatus:
        tail = self.log_tail(400)
        if requested and re.search(r"vocabs are not compatible|draft model vocab type", tail, re.IGNORECASE):
            return SpeculationStatus(False, "llama-server says the draft's vocabulary is not compatible with the "
                                     "target's; it runs without speculation. Use a draft from the same model family")
        failed = re.search(r"failed to initiali[sz]e speculative decoding context:?\s*(.*)", tail, re.IGNORECASE)
        if requested and failed:
            # Say what llama-server said: an EAGLE3 run on a plain draft fails here for another reason entirely.
            why = failed.group(1).strip() or "no reason given (see the log)"
            return SpeculationStatus(False, f"llama-server could not start speculative decoding ({why}); it runs "
                                     "without speculation. Check that the draft suits the method (an EAGLE3, MTP or "
                                     "DFlash method needs a draft head made for it and for this target)")
        try:
            _, slots = probe_json(self.session, self.base_url + "/slots", headers=self.headers(),
                                  timeout_s=self.probe_s(5))
        except requests.RequestException:
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
    path_settings = ("llama_bin",)
    default_draft_method = "draft-simple"
    synthetic_acceptance = True       # --spec-synth-len / --spec-synth-rates (settings.ceiling)
    # Ours: the address and port we chose, the counters and trace log we read, one slot for single-stream
    # numbers (several slots were measured as such and stay).
    plumbing = Plumbing(valued=("--host", "--port", "-np", "--parallel", *VERBOSITY_FLAGS), switches=("--metrics",),
                        only_values={"-np": ("1",), "--parallel": ("1",)})
    rpc_endpoints = True              # --rpc host:port,… (targets[].rpc; the binary must be built with GGML_RPC)
    tokenizes = True                  # /tokenize, /detokenize, /apply-template (settings.context_tokens)
    settings_class = LlamaCppSettings

    def validate_candidates(self, specs: tuple[CandidateSpec, ...], settings: Settings) -> list[Problem]:
        if not settings.ceiling and not any(s.method or s.params for s in specs):
            return []          # plain drafts: every llama-server build runs them
        binary = find_llama_server(settings.llama_bin)
        caps = capabilities(binary)
        problems = candidate_problems(specs, caps, binary)
        if settings.ceiling and SYNTH_LEN_FLAG not in caps["flags"]:
            problems.append(Problem("$.settings.ceiling", f"{binary} has no {SYNTH_LEN_FLAG}, so it cannot run drafts "
                                    "at synthetic acceptance", "use a newer llama.cpp build, or remove "
                                    "settings.ceiling / --ceiling"))
        return problems

    def validate_settings(self, settings: Settings) -> list[Problem]:
        """llama-server gets ``-c ctx_size × N`` for N slots (each keeps ctx_size): bounded like ctx_size."""
        ctx, most = settings.ctx_size, COMMON_SETTINGS["ctx_size"].max or 0
        value = settings.concurrency
        streams = max([v for v in (value if isinstance(value, list) else [value]) if isinstance(v, int)] or [1])
        if isinstance(ctx, int) and ctx * streams > most:
            return [Problem("$.settings.concurrency", f"{streams} streams of settings.ctx_size {ctx} would start "
                            f"llama-server with -c {ctx * streams} (every slot keeps ctx_size), more than the "
                            f"{most:,} tokens ctx_size itself may be", f"use at most {most // ctx} streams, or a "
                            "smaller ctx_size")]
        return []

    def pair_problem(self, target: str, draft: str, method: tuple[str, ...] = ()) -> ModelProblem | None:
        """llama.cpp compares the vocabularies for draft-simple only: an EAGLE3, MTP or DFlash head carries a
        draft vocabulary of its own (mapped to the target's), so a difference there is no problem."""
        if method and "draft-simple" not in method:
            return None
        try:
            why = vocab_mismatch(target, draft)
        except ModelFileError:
            return None       # model_problem reports unreadable files
        if why is None:
            return None
        return ModelProblem(f"the draft cannot speculate for this target (its vocabulary differs: {why}); llama-server would run without "
                            "speculation", "use a draft from the same model family (the same tokenizer)")

    def side_by_side(self, settings: Settings, target: str, draft: str | None) -> str | None:
        return side_by_side_problem(settings, target, draft)

    def context_problem(self, target: str, draft: str | None, prompt_tokens: int, ctx_size: int,
                        settings: Settings, slots: int = 1) -> ModelProblem | None:
        try:
            return context_problem(target, draft, prompt_tokens, ctx_size, settings, slots)
        except ModelFileError:
            return None       # model_problem reports unreadable files

    def check_ready_to_run(self, settings: Settings) -> None:
        binary = find_llama_server(settings.llama_bin)
        capabilities(binary)


    def target_problems(self, targets: tuple[ModelRef, ...], settings: Settings) -> list[Problem]:
        """Every RPC endpoint must answer before the sweep starts (the build must have --rpc too)."""
        split = [(i, t) for i, t in enumerate(targets) if t.rpc]
        if not split:
            return []
        binary = find_llama_server(settings.llama_bin)
        if "--rpc" not in capabilities(binary)["flags"]:
            return [Problem(f"$.targets[{i}].rpc", f"{binary} was built without RPC support (its --help lists no "
                            "--rpc)", "build one with RPC: `make llama-server` (GGML_RPC=ON), or point "
                            "settings.llama_bin at such a build") for i, _ in split]
        problems = []
        for i, target in split:
            for j, probe in enumerate(probe_endpoint(e) for e in target.rpc):
                if not probe.reachable:
                    port = probe.endpoint.rpartition(":")[2]
                    problems.append(Problem(f"$.targets[{i}].rpc[{j}]", f"{probe.endpoint} {probe.error}",
                                            f"start it (on that host: python server.py rpc-server --port {port}), "
                                            "or remove it from the list"))
        return problems

    def launch(self, spec: LaunchSpec) -> LlamaCppServer:
        binary = find_llama_server(spec.settings.llama_bin)
        caps = capabilities(binary)
        # RPC endpoints are probed first: llama-server aborts on one it cannot reach, and an endpoint answers
        # one client at a time, so its round trip cannot be timed once llama-server holds it.
        probes = reachable_endpoints(spec.rpc) if spec.rpc else []
        local = local_devices(binary) if spec.rpc and spec.draft and spec.draft_placement == "local" else []
        environment = server_environment(caps, dict(os.environ))      # the one we decided (config/server_env.py)
        cmd = build_command(binary, caps, spec, rpc_devices=device_names(probes), local=local,
                            inherited=environment.args)
        log_path = spec.log_path or str(cache_dir() / "logs" / f"llama-server-{spec.port}.log")
        start_offset = os.path.getsize(log_path) if os.path.isfile(log_path) else 0   # the log is appended to
        server = LlamaCppServer(f"http://{url_host(bind_host(spec.host, spec.extra_args))}:{spec.port}", model=Path(spec.target).name,
                                launched=Launched(ManagedProcess(cmd, log_path, environment.env, port=spec.port),
                                                  cmd, spec.port, version=caps.get("version")),
                                has_metrics="--metrics" in cmd,
                                expects_draft=bool(spec_types(spec)),   # model-free methods draft too
                                credentials=Credentials(api_key=api_key_from_args(spec.extra_args)))
        server.log_offset, server.model_paths = start_offset, (spec.target, spec.draft)
        server.notes += [note for note in (environment.note("llama-server"),) if note]
        try:
            launch_process(server, spec, what="llama-server", health_path="/health",
                           explain_exit=lambda code, tail: explain_exit(code, tail, spec.port, log_path),
                           verify=lambda s: self._verify_identity(server, spec))
        except ServerError as exc:
            if spec.rpc and exc.kind == ServerErrorKind.TIMEOUT:
                raise rpc_startup_timeout(exc, spec.rpc) from None
            raise
        if spec.rpc:
            try:
                topology, notes = proven_topology(read_log(log_path, start_offset), target=spec.target,
                                                  draft=spec.draft, endpoints=spec.rpc,
                                                  placement=spec.draft_placement, log_path=log_path)
            except BaseException:
                server.stop()
                raise
            names = device_names(probes)
            topology["endpoints"] = [dict(p.to_dict(), device_names=names[p.endpoint]) for p in probes]
            server.topology = topology
            server.notes += notes
        # The statistics lines of concurrent requests interleave and count per slot: one stream only.
        expected = stats_lines_expected(cmd) if spec.concurrency == 1 else 0
        if expected:
            server.stats_log = StatsLog(log_path, start_offset, expected)
        return server

    def memory_estimate(self, target: str, draft: str | None, settings: Settings, ctx_size: int,
                        slots: int = 1) -> ServerMemory | None:
        return estimate_for(target, draft, settings, ctx_size, slots)

    def attach(self, base_url: str, *, model: str | None = None, api_key: str | None = None,
               auth: tuple[str, str] | None = None, probe_timeout_s: float | None = None) -> LlamaCppServer:
        server = LlamaCppServer(base_url, model=model or "default", credentials=Credentials(api_key, auth),
                                probe_timeout_s=probe_timeout_s)
        try:
            _, props = probe_json(server.session, server.base_url + "/props", headers=server.headers(),
                                  timeout_s=server.probe_s(10))
        except requests.RequestException:
            props = {}
        server.props = props if isinstance(props, dict) else {}
        server.version = server.props.get("build_info")
        server.has_metrics = bool(server.props.get("endpoint_metrics"))
        status = server.speculation_status(requested=True)
        server.expects_draft = status.active
        return server

    def _verify_identity(self, server: LlamaCppServer, spec: LaunchSpec) -> None:
        """Refuse to benchmark a server that is not the one we started."""
        try:
            status_code, answer = probe_json(server.session, server.base_url + "/props", timeout_s=server.probe_s(10))
            # Ours knows the key we gave it (if any): a 401/403 means someone else answers on this port.
            props = None if status_code in (401, 403) else answer
        except requests.RequestException:
            props = None
        model_path = props.get("model_path") if isinstance(props, dict) else None
        if not isinstance(props, dict) or (model_path and not same_file(model_path, spec.target)):
            raise ServerError(f"port {spec.port} answers, but not as the llama-server we started "
                              f"(it serves {model_path or 'something else'})",
                              "another program is listening on that port; stop it or set settings.port",
                              kind=ServerErrorKind.FOREIGN)
        server.props = props
        check_slot_context(server, spec.ctx_size)

    # -- server.py llama-cpp --------------------------------------------------------------
    def add_server_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--model-path", required=True, help="target GGUF")
        p.add_argument("--draft-path", default=None, help="draft GGUF (turns speculative decoding on)")
        p.add_argument("--draft-max", type=int, default=None, help="draft length k (default: the server's)")
        add_common_server_arguments(p, port=self.default_port, what="llama-server")
        p.add_argument("--gpu-layers", type=int, default=DEFAULTS.gpu_layers,
                       help=f"layers on the GPU (default {DEFAULTS.gpu_layers})")
        p.add_argument("--ctx-size", type=int, default=DEFAULTS.ctx_size,
                       help=f"context size per slot (default {DEFAULTS.ctx_size})")
        p.add_argument("--parallel", type=int, default=1, help="slots: requests served at once (default 1; "
                       "for bench.py --concurrency); each slot keeps --ctx-size")
        p.add_argument("--llama-bin", default=None, help="llama-server binary (default: searched)")

    def spec_from_args(self, args: argparse.Namespace, extra: list[str]) -> LaunchSpec:
        for flag, path in (("--model-path", args.model_path), ("--draft-path", args.draft_path)):
            problem = self.model_problem(path) if path else None
            if problem:
                raise UsageError(f"{flag}: {problem.message}", problem.fix)
        if args.parallel < 1:
            raise UsageError(f"--parallel must be at least 1 (got {args.parallel})")
        # a server for people: no trace-level log (method_stats is for the sweep's own servers)
        settings = Settings(llama_bin=args.llama_bin, host=args.host, backend=LlamaCppSettings(method_stats=False))
        return LaunchSpec(target=args.model_path, draft=args.draft_path, draft_max=args.draft_max, host=args.host,
                          port=args.port, ctx_size=args.ctx_size, gpu_layers=args.gpu_layers, extra_args=tuple(extra),
                          settings=settings, startup_timeout_s=args.startup_timeout, log_path=args.log,
                          concurrency=args.parallel)
