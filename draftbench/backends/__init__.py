"""Backend registry: name → backend. Unknown names list the valid ones."""

from __future__ import annotations

from .base import Backend, DraftCounts, LaunchSpec, Server, SpeculationStatus
from .llamacpp.backend import LlamaCppBackend
from .lmstudio.backend import LMStudioBackend
from .vllm.backend import VLLMBackend

REGISTRY: dict[str, Backend] = {
    "llamacpp": LlamaCppBackend(),
    "vllm": VLLMBackend(),
    "lmstudio": LMStudioBackend(),
}

_ALIASES = {alias: key for key, backend in REGISTRY.items() for alias in (key, backend.name, *backend.aliases)}


def backend_names() -> list[str]:
    return list(REGISTRY)


def get_backend(name: str) -> Backend:
    """Look a backend up by its config name or an alias (``llama-cpp``, ``lm-studio``…)."""
    key = _ALIASES.get(name.strip().lower())
    if key is None:
        raise KeyError(f"unknown backend {name!r}; valid: {', '.join(backend_names())}")
    return REGISTRY[key]


__all__ = [
    "REGISTRY",
    "Backend",
    "DraftCounts",
    "LaunchSpec",
    "Server",
    "SpeculationStatus",
    "backend_names",
    "get_backend",
]
