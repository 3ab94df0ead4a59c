"""vLLM's own settings keys (``settings.backend`` of a vllm config), its parallelism options included
(see :mod:`draftbench.backends.vllm.parallel` for their flags and checks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...config.field import setting
from ...config.settings import BackendSettings

# vLLM 0.32.0's --spec-method choices that draftbench can run (the model-specific *_mtp names map to mtp).
METHODS = ("draft_model", "ngram", "suffix", "mtp", "eagle", "eagle3", "medusa", "mlp_speculator", "dflash")
EXECUTOR_BACKENDS = ("ray", "mp", "uni", "external_launcher")


@dataclass(frozen=True)
class VLLMSettings(BackendSettings):
    vllm_bin: str | None = setting(
        "str", None, "the `vllm` executable, or the Python of an environment that has vLLM (started as python -m "
        "vllm.entrypoints.openai.api_server); default: PATH, then next to this Python, then the CPU build of "
        "`make vllm`")
    vllm_method: str = setting(
        "str", "draft_model", "speculative method for every draft: draft_model (a separate draft model), or ngram "
        "/ suffix / mtp (no draft model: the draft entry's path is ignored), eagle / eagle3 (the draft path is the "
        "EAGLE head)", choices=METHODS, measured=True)
    vllm_speculative_config: Any = setting(
        "any", None, "extra keys merged into --speculative-config (last, so they win), e.g. "
        "{\"prompt_lookup_max\": 4, \"draft_tensor_parallel_size\": 1}", measured=True)
    vllm_per_request_metrics: str | None = setting(
        "str", None, "none | summary | detailed: pass --per-request-spec-decode-metrics (newer vLLM) so acceptance "
        "comes from each response instead of /metrics differences", choices=("none", "summary", "detailed"))
    vllm_prefix_caching: bool = setting(
        "bool", False, "keep vLLM's prefix cache on (default off: repeated prompts would skip their prefill and "
        "flatter TTFT)", measured=True)
    # parallelism
    vllm_tensor_parallel_size: int | None = setting(
        "int", None, "GPUs each layer is split over (--tensor-parallel-size); null = vLLM's default (1)", min=1,
        max=4096, measured=True)
    vllm_pipeline_parallel_size: int | None = setting(
        "int", None, "stages the layers are split into, one GPU group each (--pipeline-parallel-size; across "
        "nodes); null = 1", min=1, max=4096, measured=True)
    vllm_data_parallel_size: int | None = setting(
        "int", None, "model replicas (--data-parallel-size); null = 1", min=1, max=4096, measured=True)
    vllm_distributed_executor_backend: str | None = setting(
        "str", None, "how vLLM runs its workers (--distributed-executor-backend): ray (a Ray cluster you started, "
        "for several nodes), mp (processes; several nodes with vllm_nnodes), uni, external_launcher; null = "
        "vLLM's choice", choices=EXECUTOR_BACKENDS, measured=True)
    vllm_nnodes: int | None = setting(
        "int", None, "nodes for multi-node without Ray (--nnodes, with vllm_distributed_executor_backend \"mp\"); "
        "the others run `vllm serve … --node-rank N --headless`, started by you", min=1, max=4096, measured=True)
    vllm_master_addr: str | None = setting(
        "str", None, "address of this (rank 0) node for multi-node mp (--master-addr); not loopback needs "
        "settings.allow_remote")
    vllm_master_port: int | None = setting("int", None, "port of rank 0 for multi-node mp (--master-port)", min=1,
                                           max=65535)
