"""vLLM's parallelism as settings: validated, in the argv, recorded per row — against the vLLM stand-in."""

from __future__ import annotations

import json

import pytest
from draftbench.backends.vllm.backend import VLLMBackend
from draftbench.backends.vllm.command import build_command
from draftbench.backends.vllm.parallel import topology_from_command
from draftbench.common.errors import ConfigError
from draftbench.report.page import render_report
from draftbench.results.file import load_results
from draftbench.sweep.config_file import validate_config

from helpers import run_cli
from test_backends_vllm import DRAFT, TARGET, fake, make_spec  # noqa: F401  (fake is a fixture)

MULTI_NODE = {"vllm_tensor_parallel_size": 2, "vllm_pipeline_parallel_size": 2,
              "vllm_distributed_executor_backend": "ray"}


def config(**settings) -> dict:
    return {"name": "tp", "backend": "vllm", "targets": [{"label": "70B", "path": TARGET}],
            "drafts": [{"label": "1B", "path": DRAFT}], "settings": settings}


def problem_paths(**settings) -> list[str]:
    with pytest.raises(ConfigError) as info:
        validate_config(config(**settings))
    assert all(p.fix for p in info.value.problems)
    return [p.path for p in info.value.problems]


def test_parallel_settings_are_validated():
    assert validate_config(config(**MULTI_NODE)).settings.backend.vllm_tensor_parallel_size == 2
    validate_config(config(vllm_distributed_executor_backend="mp", vllm_nnodes=2, vllm_master_addr="127.0.0.1",
                           vllm_master_port=29501, vllm_tensor_parallel_size=8))
    assert problem_paths(vllm_tensor_parallel_size=0) == ["$.settings.vllm_tensor_parallel_size"]
    assert problem_paths(vllm_pipeline_parallel_size="2") == ["$.settings.vllm_pipeline_parallel_size"]
    assert problem_paths(vllm_distributed_executor_backend="slurm") == ["$.settings.vllm_distributed_executor_backend"]
    assert problem_paths(vllm_distributed_executor_backend="uni", vllm_tensor_parallel_size=2) == [
        "$.settings.vllm_distributed_executor_backend"]
    assert problem_paths(vllm_nnodes=2, vllm_distributed_executor_backend="ray") == ["$.settings.vllm_nnodes"]
    assert problem_paths(vllm_master_port=29501) == ["$.settings.vllm_master_port"]
    # rank 0 listens there for the other nodes: another address is exposure, as for any server
    assert problem_paths(vllm_distributed_executor_backend="mp", vllm_nnodes=2,
                         vllm_master_addr="10.0.0.5") == ["$.settings.vllm_master_addr"]
    validate_config(config(vllm_distributed_executor_backend="mp", vllm_nnodes=2, vllm_master_addr="10.0.0.5",
                           allow_remote=True))
    # a llama.cpp setting is not silently ignored by vLLM
    assert problem_paths(draft_placement="rpc") == ["$.settings.draft_placement"]


def test_parallel_flags_reach_the_argv_and_the_topology(tmp_path):
    spec = make_spec(tmp_path, draft=DRAFT, draft_max=4, **MULTI_NODE)
    cmd = build_command("/opt/vllm/bin/vllm", spec)
    i = cmd.index("--tensor-parallel-size")
    assert cmd[i:i + 6] == ["--tensor-parallel-size", "2", "--pipeline-parallel-size", "2",
                            "--distributed-executor-backend", "ray"]
    assert topology_from_command(cmd) == {"kind": "vllm", "tensor_parallel_size": 2, "pipeline_parallel_size": 2,
                                          "distributed_executor_backend": "ray", "world_size": 4}
    # passed through extra_args, the last value wins (argparse): the record says what the server got
    overridden = build_command("/opt/vllm/bin/vllm", make_spec(tmp_path, extra=("-tp", "8"), **MULTI_NODE))
    assert topology_from_command(overridden)["tensor_parallel_size"] == 8
    assert topology_from_command(build_command("/opt/vllm/bin/vllm", make_spec(tmp_path))) is None
    assert topology_from_command(cmd, {"draft_tensor_parallel_size": 1})["draft_tensor_parallel_size"] == 1


def test_a_launched_server_records_its_parallelism(fake, tmp_path):  # noqa: F811
    spec = make_spec(tmp_path, vllm_bin=str(fake.bin), vllm_data_parallel_size=2,
                     vllm_distributed_executor_backend="mp")
    with VLLMBackend().launch(spec) as server:
        assert server.topology == {"kind": "vllm", "data_parallel_size": 2, "distributed_executor_backend": "mp",
                                   "world_size": 2}
    argv = fake.argv()[-1]
    assert argv[argv.index("--data-parallel-size") + 1] == "2"


def test_sweep_rows_and_report_show_the_parallelism(fake, tmp_path):  # noqa: F811
    cfg = config(vllm_bin=str(fake.bin), runs=1, warmup=0, max_tokens=8, draft_max=4, port=0, prompts=["code"],
                 startup_timeout_s=30, **MULTI_NODE)
    path = tmp_path / "tp.json"
    path.write_text(json.dumps(cfg))
    results = tmp_path / "out.json"
    proc = run_cli("sweep.py", "--config", str(path), "--results", str(results), "--no-chart", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = load_results(results).results
    assert [r.topology["world_size"] for r in rows] == [4, 4]
    assert all(r.topology["distributed_executor_backend"] == "ray" for r in rows)
    assert all("--pipeline-parallel-size" in r.server["command"] for r in rows)
    assert "tensor parallel 2 × pipeline parallel 2 over ray (4 GPUs)" in render_report(load_results(results))
