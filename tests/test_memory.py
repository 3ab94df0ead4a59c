"""Issue 47, what a draft costs in memory (no real server: stand-in logs and the in-process backend).

llama-server's buffer lines per device (CPU, CUDA, Metal, RPC; the CUDA and Metal lines are stand-ins written from
llama.cpp's log format, the CPU lines are the vendored b11434's own, see test_memory_llama.py), vLLM's log and
/metrics formats (from vLLM's source: no real vLLM here), what a row keeps, the cost over the target alone, the
limit's one decision and the "fastest that fits" verdict, the report's chart, the exports and --compare.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from draftbench.analysis.memory_cost import Over, cost_of, not_eligible, pareto_front
from draftbench.analysis.summary import verdicts_of
from draftbench.backends.llamacpp.memory import device_of, in_use
from draftbench.backends.lmstudio.backend import LMStudioBackend
from draftbench.backends.vllm.backend import VLLMBackend
from draftbench.backends.vllm.memory import reported
from draftbench.report import build_figures
from draftbench.results.file import ResultsFile, Row, load_results
from draftbench.results.kinds import Role
from draftbench.results.memory import ServerMemory, mib_text
from draftbench.share.compare import ComparedFile, compare
from draftbench.share.compare.text import render
from draftbench.share.export.table import MEMORY_COLUMNS, results_table
from draftbench.sweep import EXIT_OK
from draftbench.sweep.memory_plan import PlannedServer, memory_lines

from fakes.inprocess import FakeBackend
from test_backends_lmstudio_sdk import lm_studio  # noqa: F401 (a fixture: LM Studio's stand-in)
from test_backends_lmstudio_sdk import make_spec as sdk_spec
from test_backends_vllm import fake  # noqa: F401 (a fixture: vLLM's stand-in)
from test_backends_vllm import make_spec as vllm_spec
from test_sweep_config_file import only_problem
from test_sweep_stages import FAST, NEAR, SLOW, TARGET, config, run, script

# The llama.cpp lines as llama-server logs them at -lv 4 (with --log-prefix's timestamps): a CUDA build with a
# 32B target and a 0.5B draft whose sliding-window KV caches are two lines for one device (they add up), after an
# earlier server's lines in the same appended log.
EARLIER = ("llama_model_loader: loaded meta data with 30 key-value pairs and 579 tensors from /m/target.gguf (version "
           "GGUF V3 (latest))\nload_tensors:        CUDA0 model buffer size = 99999.00 MiB\n")
CUDA_LOG = """\
0.00.010.000 I llama_model_loader: loaded meta data with 30 key-value pairs and 579 tensors from /m/target.gguf (version GGUF V3 (latest))
0.00.020.000 I llama_prepare_model_devices: using device CUDA0 (NVIDIA GeForce RTX 4090) (0000:01:00.0) - 23500 MiB free
0.00.329.199 I load_tensors: offloaded 65/65 layers to GPU
0.00.329.203 I load_tensors:        CUDA0 model buffer size = 18508.35 MiB
0.00.329.204 I load_tensors:   CPU_Mapped model buffer size =   417.66 MiB
0.01.218.357 I llama_context:  CUDA_Host  output buffer size =     0.58 MiB
0.01.218.542 I llama_kv_cache:      CUDA0 KV buffer size =   512.00 MiB
0.01.231.094 I sched_reserve:      CUDA0 compute buffer size =   307.00 MiB
0.01.231.099 I sched_reserve:  CUDA_Host compute buffer size =    18.01 MiB
0.02.000.000 I llama_model_loader: loaded meta data with 30 key-value pairs and 291 tensors from /m/draft.gguf (version GGUF V3 (latest))
0.02.100.000 I load_tensors:        CUDA0 model buffer size =   356.21 MiB
0.02.100.001 I load_tensors:   CPU_Mapped model buffer size =   137.94 MiB
0.02.200.000 I llama_kv_cache:      CUDA0 KV buffer size =    96.00 MiB
0.02.200.001 I llama_kv_cache:      CUDA0 KV buffer size =    16.00 MiB
0.02.300.000 I sched_reserve:      CUDA0 compute buffer size =   298.50 MiB
"""
METAL_LOG = """\
llama_model_loader: loaded meta data with 34 key-value pairs and 272 tensors from /m/target.gguf (version GGUF V3 (latest))
llama_prepare_model_devices: using device MTL0 (Apple M4 Pro) - 36864 MiB free
load_tensors: offloaded 29/29 layers to GPU
load_tensors:   CPU_Mapped model buffer size =   125.19 MiB
load_tensors:  MTL0_Mapped model buffer size =  1059.89 MiB
llama_context:        CPU  output buffer size =     0.58 MiB
llama_kv_cache:       MTL0 KV buffer size =   224.00 MiB
sched_reserve:       MTL0 compute buffer size =   300.75 MiB
sched_reserve:        CPU compute buffer size =    12.01 MiB
"""


def _log(tmp_path: Path, text: str, earlier: str = "") -> tuple[str, int]:
    path = tmp_path / "llama-server.log"
    path.write_text(earlier + text)
    return str(path), len(earlier.encode())


def test_a_cuda_servers_log_gives_each_devices_buffers_for_the_target_and_its_draft(tmp_path):
    path, offset = _log(tmp_path, CUDA_LOG, EARLIER)
    memory = in_use(None, path, offset, ("/m/target.gguf", "/m/draft.gguf"))
    cuda, cpu = memory.devices["CUDA0"], memory.devices["CPU"]      # pinned host buffers are this machine's memory
    assert cuda == {"model_mib": 18864.56, "kv_mib": 624.0, "compute_mib": 605.5}    # the two SWA caches add up
    assert cpu == {"model_mib": 555.6, "output_mib": 0.58, "compute_mib": 18.01}
    assert memory.kv_mib == 624.0 and memory.held() == {"CUDA0": 20094.06, "CPU": 574.19}
    assert memory.unreported is None and "log" in memory.source
    # the log's earlier server (another run on the same port) is not this one's
    assert in_use(None, path, 0, ("/m/target.gguf", "/m/draft.gguf")).devices["CUDA0"]["model_mib"] == 18864.56


def test_a_metal_servers_mapped_buffers_are_its_gpus(tmp_path):
    path, offset = _log(tmp_path, METAL_LOG)
    memory = in_use(None, path, offset, ("/m/target.gguf", None))
    assert memory.held() == {"CPU": 137.78, "MTL0": 1584.64}
    assert memory.devices["MTL0"]["model_mib"] == 1059.89 and memory.kv_mib == 224.0


@pytest.mark.parametrize(("buffer", "device"), [
    ("CPU", "CPU"), ("CPU_Mapped", "CPU"), ("CPU_REPACK", "CPU"), ("AMX", "CPU"), ("CUDA_Host", "CPU"),
    ("CUDA0", "CUDA0"), ("CUDA1", "CUDA1"), ("MTL0_Mapped", "MTL0"), ("Metal_Mapped", "Metal"), ("Vulkan0", "Vulkan0"),
    ("RPC0[127.0.0.1:50911]", "RPC0[127.0.0.1:50911]"), ("RPC[10.0.0.4:50052]", "RPC[10.0.0.4:50052]")])
def test_buffers_are_named_by_the_device_that_holds_them(buffer, device):
    assert device_of(buffer) == device


def test_a_server_that_said_nothing_says_so_rather_than_zero(tmp_path):
    path, offset = _log(tmp_path, "main: server is listening on http://127.0.0.1:8080\n")
    silent = in_use(None, path, offset, ("/m/target.gguf", None))
    assert silent.devices is None and silent.kv_mib is None and "-lv 4" in silent.unreported
    assert not silent.has_figures and silent.total_mib() is None
    attached = in_use(None, None)
    assert "did not start this server" in attached.unreported and attached.to_dict() == {
        "unreported": attached.unreported}


def test_vllm_gives_its_weights_kv_cache_and_memory_share_from_its_log_and_metrics():
    log = ("(EngineCore_DP0 pid=1) INFO 11-27 06:40:00 [gpu_model_runner.py:2653] Model loading took 0.2622 GiB memory "
           "and 1.52 seconds\n(EngineCore_DP0 pid=1) INFO 11-27 06:40:01 [cpu_worker.py:214] Explicitly set "
           "(0.50/22.90) GiB for KV cache on node 0.\n(EngineCore_DP0 pid=1) INFO [kv_cache_utils.py:1087] GPU KV "
           "cache size: 43,680 tokens\n")
    metrics = ('vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",gpu_memory_utilization="0.92",'
               'num_gpu_blocks="2730"} 1.0\n')
    cpu = reported(log, metrics)
    assert cpu.devices == {"CPU": {"model_mib": 268.49, "kv_mib": 512.0}} and cpu.kv_tokens == 43680
    assert cpu.gpu_memory_utilization == 0.92 and "compute" in cpu.unreported
    gpu = reported("INFO Model loading took 14.25 GiB memory and 30.1 seconds\nINFO Available KV cache memory: "
                   "5.50 GiB\n", None)
    assert gpu.devices == {"GPU": {"model_mib": 14592.0, "kv_mib": 5632.0}} and gpu.kv_tokens is None
    assert "none of its memory lines" in reported("INFO Starting\n", "").unreported


def test_a_vllm_server_says_what_its_log_and_metrics_say(fake, tmp_path):  # noqa: F811 (the fixture)
    spec = vllm_spec(tmp_path, draft="org/draft-0.6b", draft_max=4, vllm_bin=str(fake.bin),
                     extra=("--kv-cache-memory-bytes", "1073741824"))
    with VLLMBackend().launch(spec) as server:
        memory = server.memory_use()
    assert memory.devices == {"CPU": {"model_mib": 402.74, "kv_mib": 1024.0}}       # the target's and the draft's
    assert memory.gpu_memory_utilization == 0.92 and memory.kv_tokens and memory.kv_tokens > 0


def test_lm_studio_says_how_large_its_models_are_and_no_more(lm_studio, tmp_path):  # noqa: F811 (the fixture)
    studio = lm_studio()
    with LMStudioBackend().launch(sdk_spec(tmp_path, studio.port, draft=None)) as server:
        memory = server.memory_use()
    assert memory.model_mib == round(4_000_000_000 / 2**20, 2) and memory.devices is None
    assert "not their KV cache" in memory.unreported


def test_a_rows_memory_is_typed_and_older_rows_write_back_as_they_were():
    older = {"target": "T", "memory": {"peak_rss_mib": 112.8, "kv_mib": 12.8, "servers": 2}}
    row = Row.from_dict(older)
    assert isinstance(row.memory, ServerMemory) and row.memory.peak_rss_mib == 112.8
    assert row.to_dict()["memory"] == older["memory"]
    first = ServerMemory(peak_rss_mib=100.0, devices={"CPU": {"model_mib": 50.0, "kv_mib": 4.0}}, servers=1)
    later = ServerMemory(peak_rss_mib=90.0, devices={"CPU": {"model_mib": 50.0, "kv_mib": 8.0}, "CUDA0": {"kv_mib": 1.0}})
    most = first.most(later, new_session=True)
    assert most.peak_rss_mib == 100.0 and most.servers == 2
    assert most.devices == {"CPU": {"model_mib": 50.0, "kv_mib": 8.0}, "CUDA0": {"kv_mib": 1.0}}
    with pytest.raises(ValueError):
        ServerMemory(peak_rss_mib=-1.0)
    assert (mib_text(912), mib_text(23654, signed=True), mib_text(-3.25, signed=True)) == ("912 MiB", "+23.1 GiB",
                                                                                            "−3.2 MiB")


def _row(draft: str | None, devices: dict | None, rss: float | None = None) -> Row:
    return Row(target="T", draft=draft, role=Role.SPECULATIVE if draft else Role.BASELINE, mean_tps=10.0,
               memory=ServerMemory(peak_rss_mib=rss, devices=devices))


def test_a_candidates_cost_is_what_its_server_adds_per_device():
    base = _row(None, {"CUDA0": {"model_mib": 18000.0, "kv_mib": 512.0}, "CPU": {"model_mib": 400.0}}, 900.0)
    draft = _row("0.5B", {"CUDA0": {"model_mib": 18400.0, "kv_mib": 1000.0}, "CPU": {"model_mib": 420.0}}, 950.0)
    cost = cost_of(draft, base, {"CUDA0": 18.5})
    assert cost.extra == {"CUDA0": 888.0, "CPU": 20.0} and cost.extra_mib == 908.0 and cost.extra_rss_mib == 50.0
    assert cost.text() == "+888 MiB on CUDA0, +20 MiB on CPU"
    assert cost.over == (Over("CUDA0", 19400.0, 18.5),) and not cost.fits
    assert "18.9 GiB on CUDA0, more than the 18.5 GiB" in cost.over[0].text()
    only_rss = cost_of(_row("d", None, 950.0), _row(None, None, 900.0))
    assert only_rss.text() == "+50 MiB resident (peak RSS)"
    silent = Row(target="T", draft="d", role=Role.SPECULATIVE, memory=ServerMemory(unreported="LM Studio says no"))
    assert cost_of(silent, base).text() == "memory not known (LM Studio says no)"


def test_the_pareto_front_keeps_what_no_other_beats_on_memory_and_speed():
    points = {"a": (100.0, 1.30), "b": (200.0, 1.50), "c": (150.0, 1.20), "d": (300.0, 1.50), "e": (0.0, 1.05)}
    assert pareto_front(points) == ("e", "a", "b")


def test_the_limit_is_an_object_of_devices_checked_with_its_json_path():
    from test_sweep_config_file import base_config
    bad = only_problem(base_config(settings={"memory_limit_gib": {"CUDA0": -2}}))
    assert bad.path == "$.settings.memory_limit_gib.CUDA0" and "must be >" in bad.message
    assert only_problem(base_config(settings={"memory_limit_gib": 23.5})).path == "$.settings.memory_limit_gib"
    odd = only_problem(base_config(settings={"memory_limit_gib": {"RPC0[10.0.0.2:50052]": "8"}}))
    assert odd.path == '$.settings.memory_limit_gib["RPC0[10.0.0.2:50052]"]' and "without quotes" in odd.fix


BIG = 4000.0        # MiB of weights the fast draft takes: over the limit below


def _limited_sweep(tmp_path, limit: dict | None):
    cfg = config(tmp_path, drafts=(("fast", FAST), ("near", NEAR), ("slow", SLOW)), search="exhaustive", stages=4,
                 **({"memory_limit_gib": limit} if limit else {}))
    backend = FakeBackend(script(speedup={FAST: 1.6, NEAR: 1.3, SLOW: 0.8}, noise={FAST: 0.02, NEAR: 0.02, SLOW: 0.02},
                                 weights_mib={TARGET: 1000.0, FAST: BIG, NEAR: 300.0, SLOW: 100.0}))
    return run(tmp_path, backend, cfg, name="limit.json" if limit else "free.json")


def _both(tmp_path) -> ResultsFile:
    code, free = _limited_sweep(tmp_path, None)
    assert code == EXIT_OK and verdicts_of(free)[0].recommended_draft == "fast", verdicts_of(free)[0].verdict
    code, limited = _limited_sweep(tmp_path, {"CPU": 2.0})
    assert code == EXIT_OK
    return limited


def test_a_limit_makes_the_verdict_the_fastest_that_fits_and_says_why_the_faster_one_is_not_it(tmp_path):
    limited = _both(tmp_path)
    verdict = verdicts_of(limited)[0]
    assert verdict.recommended_draft == "near", verdict.verdict
    # measured (it ran), never recommended, with why; measured only until its memory was known
    fast = next(r for r in limited.results if r.draft == "fast")
    assert fast.measured and fast.memory.held()["CPU"] > 2048
    assert not_eligible(limited) == {("7B", "fast"): "over the memory limit: its server held 4.9 GiB on CPU, more "
                                                      "than the 2 GiB of settings.memory_limit_gib"}
    assert "Not in the decision: fast (over the memory limit: its server held 4.9 GiB on CPU" in verdict.verdict
    assert {r.block for r in fast.requests} == {0}
    # its cost over the target alone, in the verdict and in its typed part
    # in the verdict line itself, beside the gain (issue 47: 'use 0.5B — +38% […], +0.9 GiB on CUDA0')
    assert "use near — expect +" in verdict.verdict
    assert re.search(r"tok/s, \d+% of drafted tokens accepted\), for \+300 MiB on CPU over the target alone, within the "
                     r"memory limit \(2 GiB on CPU\); chosen", verdict.verdict), verdict.verdict
    assert "Memory: near costs" not in verdict.verdict          # said once
    assert verdict.memory.costs["near"].extra == {"CPU": 300.0} and verdict.memory.costs["fast"].over
    assert verdict.to_dict()["memory"]["limit_gib"] == {"CPU": 2.0}


def test_the_same_command_with_a_limit_judges_a_finished_file_again(tmp_path):
    """The limit changes no measurement: resuming the file with it re-judges what was measured."""
    code, free = _limited_sweep(tmp_path, None)
    assert verdicts_of(free)[0].recommended_draft == "fast"
    cfg = config(tmp_path, drafts=(("fast", FAST), ("near", NEAR), ("slow", SLOW)), search="exhaustive", stages=4,
                 memory_limit_gib={"CPU": 2.0})
    backend = FakeBackend(script(weights_mib={TARGET: 1000.0, FAST: BIG, NEAR: 300.0, SLOW: 100.0}))
    code, again = run(tmp_path, backend, cfg, name="free.json")
    assert code == EXIT_OK and verdicts_of(again)[0].recommended_draft == "near", verdicts_of(again)[0].verdict
    assert backend.specs == []            # nothing was measured again


def test_the_report_the_exports_and_compare_carry_what_each_candidate_costs(tmp_path):
    limited = _both(tmp_path)
    figure = build_figures(limited)["chart-memory"]
    points, front = figure["data"][0], figure["data"][1]
    assert dict(zip(points["text"], points["x"])) == {"fast": BIG, "near": 300.0, "slow": 100.0}
    assert points["marker"]["symbol"] == ["x", "circle", "circle"]          # over the limit: a cross
    assert front["x"] == [100.0, 300.0]                   # the front leaves out what does not fit
    table = results_table(limited, "limit.json")
    assert set(MEMORY_COLUMNS) <= set(table.columns)
    near = next(r for r in table.records if r["candidate"] == "near")
    assert near["extra_mib"] == 300.0 and near["extra_by_device"] == "CPU +300" and near["fits_memory_limit"] is True
    fast = next(r for r in table.records if r["candidate"] == "fast")
    assert fast["fits_memory_limit"] is False and "over the limit" in table.text[table.records.index(fast)][-2]
    assert json.loads(json.dumps(table.records, default=str))           # JSON-ready
    text = render(compare([ComparedFile("A", "free.json", load_results(tmp_path / "free.json")),
                           ComparedFile("B", "limit.json", limited)]))
    assert "A memory (added)" in text and "+300 MiB on CPU" in text and "Memory added" in text


def test_a_file_without_memory_keeps_its_tables_and_charts_nothing():
    results = ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="f", settings={},
                          results=(Row(target="T", mean_tps=10.0),))
    table = results_table(results, "x.json")
    assert not set(MEMORY_COLUMNS) & set(table.columns) and "Memory (added)" not in [h.title for h in table.headings]
    assert "chart-memory" not in build_figures(results)


def test_the_dry_run_flags_what_would_not_fit_before_anything_starts():
    alone = ServerMemory(devices={"CUDA0": {"model_mib": 18000.0, "kv_mib": 2048.0}})
    with_draft = ServerMemory(devices={"CUDA0": {"model_mib": 18500.0, "kv_mib": 4096.0}})
    over = (Over("CUDA0", 22596.0, 21.5),)
    lines = memory_lines([PlannedServer("32B", None, 8192, 1, alone),
                          PlannedServer("32B", "0.5B", 8192, 1, with_draft, over)])
    assert lines[1] == "  32B alone: ~19.6 GiB on CUDA0 (-c 8,192)"
    assert lines[2] == "  32B + 0.5B: ~22.1 GiB on CUDA0 (-c 8,192), +2.5 GiB over the target alone"
    assert lines[3].startswith("Warning: 32B + 0.5B would not fit: ~22.1 GiB on CUDA0, over the 21.5 GiB of "
                               "settings.memory_limit_gib.CUDA0")
    assert memory_lines([PlannedServer("32B", None, 8192, 1, None)]) == []


def test_the_verdict_line_says_a_cost_it_does_not_know_as_not_known():
    from draftbench.analysis.memory_cost import MemoryCost, TargetMemory, cost_clause
    unknown = MemoryCost("x", {}, {}, unknown="its server reported no memory")
    known = MemoryCost("y", {"CPU": 900.0}, {"CPU": 300.0})
    memory = TargetMemory("T", {"CPU": 600.0}, None, {"x": unknown, "y": known}, {})
    assert cost_clause(memory, "x") == "its memory over the target alone not known (its server reported no memory)"
    assert cost_clause(memory, "y") == "for +300 MiB on CPU over the target alone"
    assert cost_clause(memory, None) is None and cost_clause(None, "y") is None
