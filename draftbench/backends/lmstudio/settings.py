"""LM Studio's own settings keys (``settings.backend`` of an lmstudio config)."""

from __future__ import annotations

from dataclasses import dataclass

from ...config.field import setting
from ...config.settings import BackendSettings

DEFAULT_PORT = 1234
ENDPOINTS = ("native", "native-blocking", "openai")
CLIENTS = ("auto", "sdk", "rest")


@dataclass(frozen=True)
class LMStudioSettings(BackendSettings):
    lms_bin: str | None = setting("str", None, "path to LM Studio's `lms` CLI (default: PATH, then "
                                  "~/.lmstudio/bin/lms); without it draftbench attaches to a running LM Studio server")
    lmstudio_port: int = setting("int", DEFAULT_PORT, "port of LM Studio's server (settings.port is not used: LM "
                                 "Studio runs one server for all models)", min=1, max=65535)
    lmstudio_gpu: str | None = setting("str", None, "`lms load --gpu`: off, max, or a fraction 0-1 (default: off "
                                       "when gpu_layers is 0, else max)", measured=True)
    lmstudio_endpoint: str = setting(
        "str", "native", "REST path only: native = /api/v0/chat/completions streamed, with draft statistics; "
        "native-blocking = the same unstreamed (TTFT is LM Studio's own figure); openai = /v1/chat/completions "
        "(speed only, no acceptance)", choices=ENDPOINTS, measured=True)
    lmstudio_client: str = setting(
        "str", "auto", "sdk = LM Studio's Python SDK (pip install 'draftbench[lmstudio]': draft_max and draft_p_min "
        "per request, typed statistics, fragment data); rest = its REST API and the lms CLI; auto = sdk when "
        "installed", choices=CLIENTS, measured=True)
    lmstudio_min_draft_length: int | None = setting(
        "int", None, "SDK path only: LM Studio's minDraftLengthToConsider (drafts shorter than this are not "
        "verified); null = LM Studio's default", min=0, max=256, measured=True)
