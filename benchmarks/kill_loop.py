#!/usr/bin/env python3
"""SIGKILL draftbench mid-request again and again with the real llama-server; report how long the
server's process group took to disappear, and whether it always did.

    python benchmarks/kill_loop.py [--tries 20] [--guard portable|pdeathsig] [--cli server|sweep|both]

Each try starts ``server.py`` (or ``sweep.py``, alternating with ``--cli both``) on the forged test
models (``make models``), waits until llama-server is busy with a streamed request, kills the CLI
with SIGKILL, and times until nobody is left in the server's process group and its supervisor has
exited too (zombies count as gone). A try fails if anything is left after 5 s. Exit status 1 if any try failed. Linux only (reads /proc).
The suite runs the same check 20 times with a small fake server and twice with llama-server
(tests/test_lifetime.py, tests/test_lifetime_llama.py); this script is the long version.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))       # forge.py, whatever the current folder

from draftbench.common.errors import DraftbenchError  # noqa: E402
from draftbench.lifetime.process import free_port  # noqa: E402

from forge import ensure_family  # noqa: E402

LIMIT_S = 5.0


def group_members(pgid: int) -> set[int]:
    members = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.add(int(entry))
    return members


def children_named(parent: int, name: str) -> list[int]:
    """Descendants of ``parent`` whose command name is ``name``."""
    found, frontier = [], [parent]
    while frontier:
        pid = frontier.pop()
        try:
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            continue
        for kid in map(int, kids):
            frontier.append(kid)
            try:
                if Path(f"/proc/{kid}/comm").read_text().strip() == name:
                    found.append(kid)
            except OSError:
                pass
    return found


def parent_of(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rindex(")") + 2:].split()[1])


def alive(pid: int) -> bool:
    """Exists and is not a zombie (the supervisor, reparented once draftbench is killed)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rindex(")") + 2:].split()[0] != "Z"


def busy(port: int) -> bool:
    try:
        slots = requests.get(f"http://127.0.0.1:{port}/slots", timeout=1).json()
        return bool(slots[0].get("is_processing"))
    except (requests.RequestException, ValueError, IndexError, KeyError, AttributeError):
        return False


def healthy(port: int) -> bool:
    try:
        return requests.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
    except requests.RequestException:
        return False


def wait(predicate, timeout: float, interval: float = 0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return None


def one_try(cli: str, models: dict, guard: str, folder: Path) -> float | None:
    port = free_port()
    env = dict(os.environ, DRAFTBENCH_LIFETIME_GUARD=guard, PYTHONUNBUFFERED="1")
    if cli == "server":
        argv = [str(REPO / "server.py"), "llama-cpp", "--model-path", models["target-2x"], "--draft-path",
                models["base"], "--port", str(port), "--ctx-size", "1024", "--gpu-layers", "0"]
    else:
        config = folder / "c.json"
        config.write_text(json.dumps({
            "name": "kill", "hardware": "here", "backend": "llamacpp",
            "targets": [{"label": "T", "path": models["target-2x"]}], "drafts": [{"label": "D", "path": models["base"]}],
            "settings": {"runs": 1, "max_tokens": 2000, "ctx_size": 2048, "gpu_layers": 0, "port": port,
                         "prompts": ["code"]}}))
        argv = [str(REPO / "sweep.py"), "--config", str(config), "--results", str(folder / "r.json"), "--no-chart"]
    proc = subprocess.Popen([sys.executable, *argv], cwd=str(REPO), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    try:
        if cli == "server":
            ready = wait(lambda: healthy(port), timeout=180, interval=0.1)
            if not ready:
                raise RuntimeError("server.py did not get ready")
            threading.Thread(target=_long_request, args=(port,), daemon=True).start()
        servers = wait(lambda: children_named(proc.pid, "llama-server") if busy(port) else None, timeout=180)
        if not servers:
            raise RuntimeError(f"{cli}.py never got llama-server busy")
        pgid = servers[0]
        supervisor = parent_of(pgid)
        proc.kill()
        proc.wait()
        start = time.monotonic()
        gone = wait(lambda: not group_members(pgid) and not alive(supervisor), timeout=LIMIT_S)
        took = time.monotonic() - start
        if not gone:
            for pid in group_members(pgid):
                os.kill(pid, signal.SIGKILL)
            return None
        return took
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _long_request(port: int) -> None:
    try:
        requests.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=300, json={
            "messages": [{"role": "user", "content": "Count to a thousand."}], "max_tokens": 2000, "stream": True})
    except requests.RequestException:
        pass


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tries", type=int, default=20)
    p.add_argument("--guard", choices=("portable", "pdeathsig"), default="portable")
    p.add_argument("--cli", choices=("server", "sweep", "both"), default="both")
    args = p.parse_args()
    if args.tries < 1:
        p.error(f"--tries must be at least 1, not {args.tries}")
    if not sys.platform.startswith("linux"):
        print("Linux only (reads /proc)", file=sys.stderr)
        return 2
    models = {k: str(v) for k, v in ensure_family(which="test", quiet=True).items()}
    took: list[float] = []
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.tries):
            cli = args.cli if args.cli != "both" else ("server" if i % 2 == 0 else "sweep")
            folder = Path(tmp) / f"try-{i}"
            folder.mkdir()
            result = one_try(cli, models, args.guard, folder)
            if result is None:
                failures += 1
                print(f"try {i + 1:2d} ({cli}.py): FAILED, process group still there after {LIMIT_S:g} s", flush=True)
            else:
                took.append(result)
                print(f"try {i + 1:2d} ({cli}.py): group gone {result:.2f} s after SIGKILL", flush=True)
    print(f"{args.tries - failures}/{args.tries} tries left nothing behind within {LIMIT_S:g} s "
          f"(guard {args.guard})" + (f"; median {statistics.median(took):.2f} s, max {max(took):.2f} s" if took else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except DraftbenchError as exc:     # no llama-server, no models: its cause and fix in a line or two, not a traceback
        sys.exit(f"Error: {exc}")
