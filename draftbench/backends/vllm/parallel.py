"""vLLM across GPUs and nodes: its parallelism options as first-class settings.

Names and choices as vLLM 0.33.0's own argument parser has them (``vllm/engine/arg_utils.py``,
``vllm/config/parallel.py`` of the PyPI wheel, read 2026-11-25): ``--tensor-parallel-size/-tp``,
``--pipeline-parallel-size/-pp``, ``--data-parallel-size/-dp`` (each ≥ 1), ``--distributed-executor-backend
{ray,mp,uni,external_launcher}``, and for multi-node without Ray (``mp``) ``--nnodes/-n``,
``--master-addr``, ``--master-port`` (``--node-rank`` and ``--headless`` are for the other nodes, which
the user starts: draftbench measures the node that serves the API). With ``ray`` the Ray cluster,
started by the user, decides the nodes.

The topology a row records is read back from the command the server was started with (the last
value of each flag wins, as in argparse), so one passed through ``extra_args`` is recorded too.
"""

from __future__ import annotations

from ...common.errors import Problem
from ...config.extra_args import host_problems
from ...config.settings import Settings
from ...results.topology import PARALLELISM
from .settings import VLLMSettings

# setting -> (vLLM's flag, its short alias, the topology key)
SIZES = {
    "vllm_tensor_parallel_size": ("--tensor-parallel-size", "-tp", "tensor_parallel_size"),
    "vllm_pipeline_parallel_size": ("--pipeline-parallel-size", "-pp", "pipeline_parallel_size"),
    "vllm_data_parallel_size": ("--data-parallel-size", "-dp", "data_parallel_size"),
}
OTHERS = {
    "vllm_distributed_executor_backend": ("--distributed-executor-backend", None, "distributed_executor_backend"),
    "vllm_nnodes": ("--nnodes", "-n", "nnodes"),
    "vllm_master_addr": ("--master-addr", None, "master_addr"),
    "vllm_master_port": ("--master-port", None, "master_port"),
}
INT_KEYS = {"tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "nnodes", "master_port"}

def parallel_args(settings: Settings) -> list[str]:
    """The flags for the parallelism settings that are set, in a fixed order."""
    own = VLLMSettings.of(settings)
    out: list[str] = []
    for key, (flag, _alias, _name) in (SIZES | OTHERS).items():
        value = getattr(own, key)
        if value is not None:
            out += [flag, str(value)]
    return out


def parallel_problems(settings: Settings, warnings: list[str] | None = None) -> list[Problem]:
    """Combinations vLLM would refuse or that cannot be what the user meant."""
    own = VLLMSettings.of(settings)
    problems: list[Problem] = []
    executor, nnodes = own.vllm_distributed_executor_backend, own.vllm_nnodes
    world = 1
    for size in (own.vllm_tensor_parallel_size, own.vllm_pipeline_parallel_size, own.vllm_data_parallel_size):
        world *= size or 1
    if executor == "uni" and world > 1:
        problems.append(Problem("$.settings.vllm_distributed_executor_backend", f"is \"uni\" (one process), but "
                                f"the parallel sizes ask for {world} GPUs", "use \"mp\" (one machine, or several "
                                "with vllm_nnodes) or \"ray\" (a Ray cluster)"))
    if nnodes is not None and nnodes > 1 and executor != "mp":
        problems.append(Problem("$.settings.vllm_nnodes", f"is {nnodes}: vLLM's --nnodes is for its multi-node mode "
                                "without Ray", "set vllm_distributed_executor_backend to \"mp\", or with \"ray\" "
                                "remove vllm_nnodes (the Ray cluster decides the nodes)"))
    for key, value in (("vllm_master_addr", own.vllm_master_addr), ("vllm_master_port", own.vllm_master_port)):
        if value is not None and not (nnodes and nnodes > 1):
            problems.append(Problem(f"$.settings.{key}", "only applies to multi-node mp (vllm_nnodes > 1)",
                                    "remove it, or set vllm_nnodes and vllm_distributed_executor_backend \"mp\""))
    if isinstance(own.vllm_master_addr, str):
        notes: list[str] = []
        problems += host_problems("$.settings.vllm_master_addr", own.vllm_master_addr,
                                  allow_remote=settings.allow_remote, allow_flag="settings.allow_remote",
                                  warnings=notes)
        if warnings is not None:
            warnings += notes
    return problems


def topology_from_command(cmd: list[str], speculative_config: dict | None = None) -> dict | None:
    """What the server was started with (None when no parallelism flag was given: one GPU)."""
    flags = {flag: name for flag, alias, name in (SIZES | OTHERS).values()}
    flags |= {alias: name for _flag, alias, name in (SIZES | OTHERS).values() if alias}
    found: dict = {}
    for i, arg in enumerate(cmd):
        name, eq, value = arg.partition("=")
        if name in flags:
            raw = value if eq else (cmd[i + 1] if i + 1 < len(cmd) else None)
            key = flags[name]
            if raw is not None and key in INT_KEYS:
                if raw.isdigit():        # anything else vLLM refuses at start-up
                    found[key] = int(raw)
            elif raw is not None:
                found[key] = raw
    draft_tp = (speculative_config or {}).get("draft_tensor_parallel_size")
    if not found and draft_tp is None:
        return None
    world = 1
    for _flag, _alias, name in SIZES.values():
        size = found.get(name)
        world *= size if isinstance(size, int) else 1
    out = {"kind": PARALLELISM, **found, "world_size": world}
    if isinstance(draft_tp, int):
        out["draft_tensor_parallel_size"] = draft_tp
    return out
