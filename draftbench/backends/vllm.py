"""vLLM (placeholder until issue 7 lands)."""

from __future__ import annotations

from ..errors import DraftbenchError
from .base import Backend


class VLLMBackend(Backend):
    name = "vllm"
    config_name = "vllm"
    aliases = ("vllm",)
    default_port = 8000

    def resolve_model(self, raw, base_dir):
        return raw, None

    def model_problem(self, ref):
        return None

    def launch(self, spec):
        raise DraftbenchError("the vllm backend is not implemented yet")
