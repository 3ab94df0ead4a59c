"""Shared fixtures: the real llama-server, the forged SmolLM2 model family, and guards.

Tests that exercise llama.cpp start the real ``llama-server`` (built by ``make llama-server``)
on small forged GGUFs (``python -m draftbench.forge``). When either is missing the tests are
skipped with the command to run — except under ``make test``/CI (DRAFTBENCH_REQUIRE_LLAMA=1),
where a missing piece is a failure: CI must never go green by skipping the real thing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Upstream draftbench results files (see tests/data/upstream/README.md).
REFERENCE = REPO / "tests" / "data" / "upstream"
sys.path.insert(0, str(REPO))

from draftbench.backends.base import LaunchSpec  # noqa: E402
from draftbench.backends.llamacpp import LlamaCppBackend  # noqa: E402
from draftbench.backends.llamacpp_command import find_llama_server  # noqa: E402
from draftbench.errors import BinaryNotFoundError  # noqa: E402
from draftbench.process import free_port  # noqa: E402
from draftbench.settings_schema import COMMON_SETTINGS  # noqa: E402

REQUIRE_LLAMA = os.environ.get("DRAFTBENCH_REQUIRE_LLAMA") == "1" or os.environ.get("CI") == "true"


def _missing(what: str, how: str):
    if REQUIRE_LLAMA:
        pytest.fail(f"{what} is missing ({how}); CI requires it", pytrace=False)
    pytest.skip(f"{what} is missing: {how}")


@pytest.fixture(scope="session")
def llama_bin() -> str:
    try:
        return find_llama_server()
    except BinaryNotFoundError:
        _missing("llama-server", "run `make llama-server`")


@pytest.fixture(scope="session")
def models(llama_bin) -> dict:
    """name -> path of the forged test family (forged on first use, ~40 s, then cached)."""
    try:
        from draftbench.forge import ensure_family
        return {k: str(v) for k, v in ensure_family(which="test", quiet=True).items()}
    except ImportError:
        _missing("the gguf/numpy packages", "pip install -e '.[test]'")


def default_settings(**overrides) -> dict:
    settings = {k: f.default for k, f in COMMON_SETTINGS.items()}
    settings.update(overrides)
    return settings


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture
def start_llama(request, tmp_path, llama_bin):
    """Start a real llama-server through the backend users run; stop it after the test.

    On failure the server's log is attached to the test report.
    """
    servers = []

    def start(target: str, draft: str | None = None, *, draft_max: int | None = None, ctx_size: int = 2048,
              extra_args: tuple = (), **settings):
        port = free_port()
        spec = LaunchSpec(target=target, draft=draft, draft_max=draft_max, port=port, ctx_size=ctx_size,
                          gpu_layers=0, extra_args=tuple(extra_args), settings=default_settings(**settings),
                          startup_timeout_s=120, log_path=str(tmp_path / f"llama-server-{port}.log"))
        server = LlamaCppBackend().launch(spec)
        servers.append(server)
        return server

    yield start
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for server in servers:
        if failed:
            print(f"\n----- llama-server log ({server.log_path}) -----\n{server.log_tail(60)}")
        server.stop()


# Bounds on how long a test waits for real work (a sweep, a server loading) are guards against a hang,
# not speed expectations: CI shares its machine with other work, and a loaded 2-core machine can be
# ten times slower than a quiet one. Mechanism bounds (stopped within seconds) stay tight where they are.
SLOW_WORK_S = 900


def run_cli(*args: str, timeout: float = SLOW_WORK_S, env: dict | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run one of the top-level scripts as a user would."""
    full_env = dict(os.environ, PYTHONUNBUFFERED="1")
    full_env.update(env or {})
    script, *rest = args
    if script.endswith(".py") and not os.path.isabs(script):
        script = str(REPO / script)
    return subprocess.run([sys.executable, script, *rest], cwd=str(cwd or REPO), capture_output=True, text=True,
                          timeout=timeout, env=full_env)


def start_server_cli(*args: str) -> subprocess.Popen:
    """Start ``server.py ARGS`` as a user would, its output readable line by line."""
    return subprocess.Popen([sys.executable, str(REPO / "server.py"), *args], cwd=str(REPO), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))


def read_until(proc: subprocess.Popen, marker: str, timeout: float = 300) -> str:
    """Output up to and including the first line holding ``marker``; fail with what was seen."""
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if marker in line:
            return "".join(seen)
    raise AssertionError(f"{marker!r} not seen; output:\n{''.join(seen)}")


def interrupt_server_cli(*args: str) -> tuple[int, str]:
    """Start server.py, wait until it is ready, press Ctrl-C; return its exit code and whole output."""
    proc = start_server_cli(*args)
    try:
        text = read_until(proc, "Press Ctrl-C")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, text + out


# One thread per llama-server the tests start (inherited through the environment, so the commands stay
# as users run them). ggml's worker threads spin while they wait for each other: on a 2-core machine
# shared with other work, a 2-thread server was measured 23x slower than a 1-thread one (0.11 vs 2.6
# tok/s at load 16), which turned every bound into a failure. The tests assert mechanisms, not speed.
os.environ.setdefault("LLAMA_ARG_THREADS", "1")

# Every process this test session starts inherits this marker, so that "servers left running" counts
# ours only: other work on a shared machine may run llama-servers of its own at the same time.
SESSION_MARKER = f"DRAFTBENCH_TEST_SESSION={os.getpid()}-{time.time_ns()}"
os.environ["DRAFTBENCH_TEST_SESSION"] = SESSION_MARKER.split("=", 1)[1]


def _ours(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return SESSION_MARKER.encode() in fh.read().split(b"\0")
    except OSError:
        return False


def llama_server_pids() -> set[int]:
    """llama-server processes started by this test session (directly or by a CLI it ran)."""
    out = subprocess.run(["pgrep", "-x", "llama-server"], capture_output=True, text=True)
    return {int(p) for p in out.stdout.split() if _ours(int(p))}


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")


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
