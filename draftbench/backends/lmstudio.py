"""LM Studio (placeholder until issue 7 lands)."""

from __future__ import annotations

from ..errors import DraftbenchError
from .base import Backend


class LMStudioBackend(Backend):
    name = "lm-studio"
    config_name = "lmstudio"
    aliases = ("lm-studio", "lm_studio", "lmstudio")
    default_port = 1234

    def resolve_model(self, raw, base_dir):
        return raw, None

    def model_problem(self, ref):
        return None

    def launch(self, spec):
        raise DraftbenchError("the lmstudio backend is not implemented yet")
