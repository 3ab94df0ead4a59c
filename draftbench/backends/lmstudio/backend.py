"""LM Studio: the backend, which reaches LM Studio one of two ways.

* Its Python SDK (:mod:`lmstudio_sdk`, optional ``pip install 'draftbench[lmstudio]'``): the
  draft length k and p-min per request, typed statistics, fragment data, loading without ``lms``.
* Its REST API with the ``lms`` CLI (:mod:`lmstudio_rest`, :mod:`lmstudio_lms`): nothing extra to
  install, but LM Studio's own draft settings.

``settings.lmstudio_client`` (auto|sdk|rest, :mod:`lmstudio_choice`) picks one when the config is
validated; see docs/backends.md.
"""

from __future__ import annotations

import argparse
import os

from ...common.errors import ModelProblem, Problem, UsageError
from ...common.files import PathProblem
from ...common.suggest import did_you_mean
from ...config.candidates import DRAFT_MAX, CandidateSpec
from ...config.settings import DEFAULTS, Settings
from ...results.file import Row
from ..base import Backend, Credentials, LaunchSpec, Server
from ..how_to_run import RunAdvice, shell_line, without_plumbing
from . import choice as lmstudio_choice
from .lms import IDENTIFIER, find_lms, load_command
from .rest import (
    PROBE_TIMEOUT_S,
    LMStudioServer,
    blocking_chat,
    counts_from_stats,
    launch_rest,
    list_models,
)
from .settings import CLIENTS, DEFAULT_PORT, ENDPOINTS, LMStudioSettings

# Names kept importable from here (this module held them before the split).
__all__ = ["DEFAULT_PORT", "ENDPOINTS", "IDENTIFIER", "LMStudioBackend", "LMStudioServer", "blocking_chat",
           "counts_from_stats", "find_lms", "load_command"]

# Candidate parameters the SDK path applies per request (besides the draft model itself).
SDK_PARAMS = (DRAFT_MAX, "draft_p_min", "min_draft_length")
# ... and their names in LM Studio's prediction config (see sdk_predict.py)
SDK_CONFIG_NAMES = {DRAFT_MAX: "speculativeDecodingNumDraftTokensExact",
                    "draft_p_min": "speculativeDecodingMinContinueDraftingProbability",
                    "min_draft_length": "speculativeDecodingMinDraftLengthToConsider"}


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class LMStudioBackend(Backend):
    name = "lm-studio"
    config_name = "lmstudio"
    aliases = ("lm-studio", "lm_studio", "lmstudio")
    default_port = DEFAULT_PORT
    owns_port = False          # one LM Studio server per machine: we reuse it rather than pick a port
    path_settings = ("lms_bin",)
    settings_class = LMStudioSettings
    concurrent_streams = False # concurrency levels are not supported (validate_settings says so for a config)

    def resolve_model(self, raw: str, base_dir: str) -> tuple[str, PathProblem | None]:
        return raw.strip(), None       # LM Studio model keys, as `lms ls` prints them

    def model_problem(self, ref: str) -> ModelProblem | None:
        return None                    # checked against LM Studio's list of models when it answers

    def settings_advice(self, row: Row, settings: Settings) -> RunAdvice | None:
        """How to run a row (see how_to_run.py): LM Studio is an app, so the settings to choose there."""
        target = row.target_path or row.target
        command = (row.server or {}).get("command")
        if isinstance(command, list) and command:
            # our identifier for the loaded instance is plumbing; the model key, context and GPU are not
            load = f"load {target} (`{shell_line(without_plumbing(command, valued=('--identifier',)))}`)"
        else:
            load = f"load {target}"
        if not row.is_speculative or not row.draft_path:
            return RunAdvice("settings", f"{load} with no draft model (Speculative Decoding off).")
        params = (row.candidate or {}).get("params") if isinstance(row.candidate, dict) else None
        applied = {"draft_p_min": settings.draft_p_min, "min_draft_length":
                   LMStudioSettings.of(settings).lmstudio_min_draft_length, **(params or {})}
        tuned = {SDK_CONFIG_NAMES[k]: v for k, v in applied.items() if k in SDK_CONFIG_NAMES and v is not None}
        if row.draft_max is not None:
            tuned[SDK_CONFIG_NAMES[DRAFT_MAX]] = row.draft_max
        text = (f"{load}, then choose {row.draft_path} as its draft model (Speculative Decoding; over the API: "
                f"\"draft_model\": \"{row.draft_path}\")")
        if tuned:
            text += "; prediction config " + ", ".join(f"{k} = {v}" for k, v in sorted(tuned.items()))
        return RunAdvice("settings", text + ".")

    def validate_settings(self, settings: Settings) -> list[Problem]:
        problems = []
        gpu = LMStudioSettings.of(settings).lmstudio_gpu
        if gpu is not None and gpu not in ("off", "max"):
            try:
                ok = 0.0 <= float(gpu) <= 1.0
            except ValueError:
                ok = False
            if not ok:
                problems.append(Problem("$.settings.lmstudio_gpu", f"is {gpu!r}; must be off, max or a number from "
                                        "0 to 1", "write \"max\", \"off\" or e.g. \"0.5\""))
        if settings.concurrency not in (1, [1]):
            problems.append(Problem("$.settings.concurrency", "LM Studio concurrency levels are not supported: "
                                    "draftbench cannot give LM Studio's server a number of parallel slots",
                                    "remove it (one stream), or use backend llamacpp or vllm for concurrency levels"))
        problems.extend(lmstudio_choice.validation_problems(settings))    # k and p-min need the SDK path
        return problems

    def settled(self, settings: Settings) -> Settings:
        return lmstudio_choice.settled(settings)        # lmstudio_client auto → sdk or rest

    def validate_candidates(self, specs: tuple[CandidateSpec, ...], settings: Settings) -> list[Problem]:
        problems = super().validate_candidates(specs, settings)
        if lmstudio_choice.resolve(LMStudioSettings.of(settings).lmstudio_client) == "rest":
            problems += [Problem(f"{s.where}.params", "LM Studio takes no per-candidate parameters over its REST API",
                                 f"remove them, or use LM Studio's Python SDK ({lmstudio_choice.INSTALL}), which "
                                 f"sets {', '.join(SDK_PARAMS)} per request")
                         for s in specs if s.params and not s.where.startswith("$.drafts")]
            return problems
        for spec in specs:
            for name, value in spec.params.items():
                at = f"{spec.where}.params.{name}"
                values = value if isinstance(value, list) else [value]
                if name not in SDK_PARAMS:
                    problems.append(Problem(at, "is not a parameter LM Studio's SDK sets per request",
                                            did_you_mean(name, SDK_PARAMS)))
                elif name == "draft_p_min" and not all(_is_number(v) and 0 <= v <= 1 for v in values):
                    problems.append(Problem(at, "must be a probability from 0 to 1 (or a list of them)",
                                            "e.g. 0.75, or [0.5, 0.9]"))
                elif name == "min_draft_length" and not all(isinstance(v, int) and not isinstance(v, bool)
                                                            and 0 <= v <= 256 for v in values):
                    problems.append(Problem(at, "must be a whole number from 0 to 256 (or a list of them)",
                                            "e.g. 2"))
        return problems

    def check_ready_to_run(self, settings: Settings) -> None:
        own = LMStudioSettings.of(settings)
        if lmstudio_choice.resolve(own.lmstudio_client) == "rest":
            find_lms(own.lms_bin)   # an explicit path that is wrong is an error before anything starts

    def sweep_notes(self, settings: Settings) -> list[str]:
        return lmstudio_choice.sweep_notes(settings)

    def launch(self, spec: LaunchSpec) -> Server:
        if lmstudio_choice.resolve(LMStudioSettings.of(spec.settings).lmstudio_client) == "sdk":
            from .sdk import launch_sdk  # the optional SDK is imported only on its path
            return launch_sdk(spec)
        return launch_rest(spec)

    def attach(self, base_url: str, *, model: str | None = None, api_key: str | None = None,
               auth: tuple[str, str] | None = None, probe_timeout_s: float | None = None) -> LMStudioServer:
        """``bench.py --url``: always the REST API (the SDK path sweeps; bench.py measures a running server)."""
        api_key = api_key or (os.environ.get("LM_API_TOKEN") if auth is None else None) or None
        server = LMStudioServer(base_url, model=model or "default", credentials=Credentials(api_key, auth),
                                probe_timeout_s=probe_timeout_s)
        if model is None:
            models = list_models(server.session, server.base_url, server.headers(),
                                 timeout_s=server.probe_s(PROBE_TIMEOUT_S)) or {}
            loaded = [k for k, m in models.items() if m.get("state") == "loaded" and m.get("type") in ("llm", "vlm",
                                                                                                        None)]
            if loaded:
                server.model = loaded[0]
        return server

    # -- server.py lm-studio --------------------------------------------------------------
    def add_server_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--model", required=True, help="target model key (as `lms ls` prints it)")
        p.add_argument("--draft-model", default=None, help="draft model key: sent as \"draft_model\" with every "
                       "request (LM Studio speculates per request)")
        p.add_argument("--host", default=DEFAULTS.host, help=f"LM Studio's address (default {DEFAULTS.host})")
        p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"LM Studio's port (default {DEFAULT_PORT})")
        p.add_argument("--context-length", type=int, default=DEFAULTS.ctx_size,
                       help=f"lms load --context-length (default {DEFAULTS.ctx_size})")
        p.add_argument("--gpu", default=None, help="lms load --gpu: off, max or 0-1 (default max)")
        p.add_argument("--endpoint", default=LMStudioSettings().lmstudio_endpoint, choices=ENDPOINTS, help="native (/api/v0 streamed, with "
                       "draft statistics), native-blocking (/api/v0 unstreamed) or openai (/v1)")
        p.add_argument("--startup-timeout", type=float, default=DEFAULTS.startup_timeout_s,
                       help=f"seconds to wait for loading (default {DEFAULTS.startup_timeout_s:g})")
        p.add_argument("--log", default=None, help="log of the lms commands (default: under ~/.cache/draftbench/logs)")
        p.add_argument("--lms-bin", default=None, help="the lms CLI (default: PATH, then ~/.lmstudio/bin/lms)")
        p.add_argument("--client", default=LMStudioSettings().lmstudio_client, choices=CLIENTS, help="sdk: load through LM "
                       "Studio's Python SDK; rest: through the lms CLI; auto (default): sdk when installed")

    def spec_from_args(self, args: argparse.Namespace, extra: list[str]) -> LaunchSpec:
        if args.port < 1:
            raise UsageError("--port must be LM Studio's port (1-65535)", f"the default is {DEFAULT_PORT}")
        settings = Settings(host=args.host, ctx_size=args.context_length, backend=LMStudioSettings(
            lms_bin=args.lms_bin, lmstudio_port=args.port, lmstudio_gpu=args.gpu, lmstudio_endpoint=args.endpoint,
            lmstudio_client=args.client))
        problems = self.validate_settings(settings)
        if problems:
            option = "--gpu" if problems[0].path.endswith("lmstudio_gpu") else "--client"
            raise UsageError(f"{option} {problems[0].message}", problems[0].fix)
        settings = self.settled(settings)
        return LaunchSpec(target=args.model, draft=args.draft_model, host=args.host, port=args.port,
                          ctx_size=args.context_length, extra_args=tuple(extra), settings=settings,
                          startup_timeout_s=args.startup_timeout, log_path=args.log)
