"""Run a short command and read what it prints, bounded in bytes and in time.

``subprocess.run(capture_output=True)`` keeps everything a program prints: a ``llama_bin``
whose ``--help`` never ends grows draftbench's memory until the timeout (or a MemoryError).
:func:`run_capped` reads standard output and error merged, at most ``max_bytes``, within
``timeout_s``; past either, the program's whole process group is killed at once and the result
says which limit it reached.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from . import groups

_READ = 64 * 1024
_AFTER_KILL_S = 5.0
_STEP_S = 0.05


@dataclass(frozen=True)
class Captured:
    """What a command printed (stdout and stderr, merged; at most the cap) and how it ended."""

    output: str
    returncode: int | None         # None: it was killed before it exited on its own
    over_cap: bool = False         # it printed more than max_bytes (the rest was never read)
    timed_out: bool = False        # it did not finish within timeout_s

    @property
    def complete(self) -> bool:
        return not (self.over_cap or self.timed_out)


def run_capped(cmd: Sequence[str], *, timeout_s: float, max_bytes: int, env: dict | None = None) -> Captured:
    """Run ``cmd`` (stdin closed, in a process group of its own); raise ``OSError`` if it cannot start."""
    # POSIX: a session of its own, so that killing it reaches its children; Windows needs none for that
    # (kill_group ends the process tree with taskkill /T)
    group = {} if groups.is_windows() else groups.new_group_kwargs()
    proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env, **group)
    stream = proc.stdout
    assert stream is not None
    chunks: list[bytes] = []
    over = threading.Event()

    fd = stream.fileno()

    def read() -> None:
        total = 0
        try:
            while True:
                chunk = os.read(fd, _READ)
                if not chunk:
                    return
                chunks.append(chunk[: max(0, max_bytes - total)])
                total += len(chunk)
                if total > max_bytes:
                    over.set()
                    return
        except (OSError, ValueError):
            return

    deadline = time.monotonic() + timeout_s
    reader = threading.Thread(target=read, name="capture", daemon=True)
    reader.start()
    while reader.is_alive() and time.monotonic() < deadline:
        reader.join(_STEP_S)
        if proc.poll() is not None:     # it exited; a helper it left may still hold the pipe open
            reader.join(min(_STEP_S * 10, max(0.0, deadline - time.monotonic())))
            break
    returncode: int | None = proc.poll()
    timed_out = False
    if returncode is None and not over.is_set():
        try:     # it closed its output; give it what is left of the time to exit
            returncode = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
    if returncode is None:
        groups.kill_group(proc.pid)
        try:
            proc.wait(timeout=_AFTER_KILL_S)
        except subprocess.TimeoutExpired:
            pass
    else:
        groups.kill_group_remains(proc.pid)    # a helper it left behind holding our pipe
    reader.join(_AFTER_KILL_S)
    if not reader.is_alive():
        stream.close()
    text = b"".join(chunks).decode("utf-8", errors="replace")
    return Captured(text, returncode, over_cap=over.is_set(), timed_out=timed_out)
