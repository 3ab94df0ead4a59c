"""draftbench.lifetime.capture: what a short command prints is read up to a cap in bytes and in time.

A ``llama_bin`` whose ``--help`` never ends used to run 104 s into a MemoryError; one that never
exits waited out subprocess.run's timeout with all of its output in memory.
"""

from __future__ import annotations

import sys
import time

import pytest
from draftbench.common.errors import DraftbenchError
from draftbench.lifetime.capture import run_capped

from helpers import WATCHDOG_S, within_watchdog


def test_a_child_that_never_stops_printing_is_cut_at_the_cap():
    start = time.monotonic()
    run = run_capped([sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"],
                     timeout_s=WATCHDOG_S, max_bytes=1_000_000)
    assert run.over_cap and not run.timed_out and len(run.output) == 1_000_000
    assert time.monotonic() - start < WATCHDOG_S


def test_a_child_that_never_ends_is_stopped_at_its_time_limit():
    run = run_capped([sys.executable, "-c", "import time; print('hello', flush=True); time.sleep(600)"],
                     timeout_s=0.5, max_bytes=1_000_000)
    assert run.timed_out and run.returncode is None and run.output == "hello\n"


def test_a_helper_left_holding_the_pipe_does_not_hold_us(tmp_path):
    # the command exits at once; what it started in the background keeps its output open
    run = run_capped(["sh", "-c", "sleep 600 & echo started"], timeout_s=WATCHDOG_S, max_bytes=1_000_000)
    assert run.returncode == 0 and run.output == "started\n" and run.complete


def test_a_llama_bin_whose_help_never_ends_is_one_clear_error(tmp_path, monkeypatch):
    from draftbench.backends.llamacpp.command import capabilities
    monkeypatch.setenv("DRAFTBENCH_CACHE", str(tmp_path / "cache"))
    endless = tmp_path / "llama-server"
    endless.write_text(f"#!{sys.executable}\nimport sys\nwhile True: sys.stdout.write('  --flag  help text\\n' * 4096)\n")
    endless.chmod(0o755)
    with pytest.raises(DraftbenchError) as info:
        within_watchdog(capabilities, str(endless))
    assert "--help printed more than 4 MB and was stopped" in info.value.message
    assert "settings.llama_bin" in (info.value.fix or "")
