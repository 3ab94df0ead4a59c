"""A model as a config names it: a label and where the model is. A leaf module (configs,
candidates, the planner and backends all speak of models)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelRef:
    label: str
    path: str                   # resolved (absolute) path, or a backend-specific model id
    extra_args: tuple[str, ...] = ()
    raw_path: str = ""          # as written in the config
    rpc: tuple[str, ...] = ()   # llama.cpp RPC endpoints ("host:port") the model's layers are split over
