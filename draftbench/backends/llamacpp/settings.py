"""llama.cpp's own settings keys (``settings.backend`` of a llamacpp config)."""

from __future__ import annotations

from dataclasses import dataclass

from ...config.field import setting
from ...config.settings import BackendSettings


@dataclass(frozen=True)
class LlamaCppSettings(BackendSettings):
    method_stats: bool = setting(
        "bool", True, "start llama-server at trace verbosity (-lv 4) to record per-method statistics (every server "
        "of the sweep, the baseline too)", measured=True)
