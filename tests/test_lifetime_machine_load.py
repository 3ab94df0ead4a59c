"""A busy machine made visible (issue 37): the load read before and during a sweep, recorded, said up front,
carried by every row measured under it. Mechanisms only — what the machine's load is, no test may assume."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from draftbench.analysis import busy
from draftbench.lifetime import machine_load
from draftbench.lifetime.machine_load import Load, Reading, add_window, between
from draftbench.report import render_report
from draftbench.results.file import load_results
from draftbench.results.findings import Code
from draftbench.sweep import Console, Sweep
from draftbench.sweep.config_file import validate_config

from fakes.inprocess import FakeBackend, Script

LINUX_PROC = os.path.exists("/proc/stat")


def test_other_processes_share_is_the_machines_busy_time_less_ours():
    a = Reading(0.0, busy_ticks=1000, total_ticks=4000, own_ticks=100, load_avg=(0.5, 0.5, 0.5))
    b = Reading(2.0, busy_ticks=1300, total_ticks=4400, own_ticks=300, load_avg=(1.5, 0.7, 0.6))
    load = between(a, b)          # 300 busy of 400 ticks, 200 of them ours: others 100 / 400
    assert load.other_cpu_share == pytest.approx(0.25) and load.load_avg_1m == 1.5 and load.seconds == 2.0
    assert load.busy
    unknown = between(Reading(0.0, None, None, None, (3.0, 3.0, 3.0)), Reading(1.0, None, None, None, (3.0, 3, 3)))
    assert unknown.other_cpu_share is None and unknown.load_avg_1m == 3.0     # no /proc: the load average alone
    assert Load(None, 3.0, 2, 1.0).busy and not Load(None, 0.4, 2, 1.0).busy


def test_a_rows_windows_add_up_weighted_by_their_seconds():
    one = add_window(None, Load(0.8, 4.0, 2, 10.0))
    two = add_window(one, Load(0.2, 1.0, 2, 30.0))
    assert two == {"other_cpu_share": 0.35, "other_cpu_share_max": 0.8, "load_avg_1m_max": 4.0, "cpu_count": 2,
                   "seconds": 40.0, "windows": 2}


@pytest.mark.skipif(not LINUX_PROC, reason="/proc is Linux's: elsewhere the share is not measured (None)")
def test_our_own_cpu_time_is_counted_as_ours_and_a_strangers_is_not():
    a = machine_load.read()
    spent = time.process_time()
    while time.process_time() - spent < 0.3:       # 0.3 s of our own CPU, however busy the machine is
        pass
    b = machine_load.read()
    hz = os.sysconf("SC_CLK_TCK")
    assert b.own_ticks - a.own_ticks >= 0.25 * hz
    # a process we did not start as a server is someone else's: it shows in the others' share
    hog = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 3: pass"])
    try:
        load = machine_load.now(1.0)
    finally:
        hog.kill()
        hog.wait()
    assert load.other_cpu_share is not None and load.other_cpu_share > 0.05, load


# A stand-in server that does its work in a child process, as vLLM's API server does in its engine subprocess.
SERVER_WITH_A_BUSY_CHILD = r"""
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 60: pass"])
time.sleep(120)
"""


def cpu_ticks(pid: int) -> int:
    """utime + stime of a live process, from /proc."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return sum(int(v) for v in text.rpartition(")")[2].split()[11:13])


@pytest.mark.skipif(not LINUX_PROC, reason="/proc is Linux's: elsewhere the share is not measured (None)")
def test_a_servers_child_process_is_the_servers_own_load_not_another_programs(tmp_path):
    """Every CPU tick the server's busy child spends between two readings is counted as ours (so it never
    shows in other programs' share, and never leaves a pair out as a burst); whatever else the machine does."""
    from draftbench.lifetime import escaped
    from draftbench.lifetime.process import ManagedProcess

    server = ManagedProcess([sys.executable, "-c", SERVER_WITH_A_BUSY_CHILD], tmp_path / "server.log", grace_s=1.0)
    try:
        deadline = time.monotonic() + 60
        children: list[int] = []
        while not children:
            assert time.monotonic() < deadline, "the stand-in server never started its child"
            time.sleep(0.05)
            children = escaped.descendants(server.pid)
        child = children[0]
        hz = os.sysconf("SC_CLK_TCK")
        first = machine_load.read()
        at_first = cpu_ticks(child)                  # read after ``first``: no earlier than what it counted
        while cpu_ticks(child) - at_first < 0.2 * hz:            # 0.2 s of the child's CPU
            assert time.monotonic() < deadline, "the busy child got no CPU time in a minute"
            time.sleep(0.05)
        at_last = cpu_ticks(child)                   # read before ``last``
        last = machine_load.read()
        assert last.own_ticks - first.own_ticks >= at_last - at_first >= 0.2 * hz
    finally:
        server.stop(grace_s=1.0)


def test_the_monitor_gives_the_load_over_a_recent_window():
    with machine_load.Monitor(every_s=0.05) as monitor:
        time.sleep(0.3)
        load = monitor.over_last(0.2)
    assert load is not None and 0.15 <= load.seconds <= 1.0
    assert (load.other_cpu_share is None) is (not LINUX_PROC)


def config(tmp_path):
    data = {"name": "unit", "hardware": "box", "backend": "llamacpp", "targets": [{"label": "7B", "path": "/m/t.gguf"}],
            "drafts": [{"label": "d", "path": "/m/d.gguf"}],
            "settings": {"runs": 2, "max_tokens": 64, "prompts": ["code", "json"], "port": 0}}
    return validate_config(data, source=str(tmp_path / "c.json"), base_dir=str(tmp_path))


def test_a_sweep_on_a_busy_machine_says_so_up_front_and_records_the_load(tmp_path, monkeypatch):
    monkeypatch.setattr(machine_load, "now", lambda window_s=1.0: Load(0.85, 8.7, 2, window_s))
    monkeypatch.setattr(machine_load.Monitor, "over_last", lambda self, seconds: Load(0.6, 5.0, 2, seconds))
    out = io.StringIO()
    path = tmp_path / "r.json"
    Sweep(config(tmp_path), path, None, reporter=Console(out), backend=FakeBackend(Script())).run()
    text = out.getvalue()
    warning = text.index("Warning: the machine is busy: before the sweep started, other programs used 85% of the CPU")
    assert warning < text.index("[1/")                     # up front, before anything is measured
    assert "--threads N" in text
    results = load_results(path)
    assert results.load_before[-1]["other_cpu_share"] == 0.85 and results.load_before[-1]["cpu_count"] == 2
    for row in results.results:
        assert row.machine_load["other_cpu_share"] == 0.6 and row.machine_load["windows"] >= 1, row.machine_load
        assert [w.code for w in row.warnings].count(Code.BUSY_MACHINE) == 1
    assert "while this row was measured" in text
    assert busy.busy(results) and "before it: other programs used 85%" in busy.describe(results)
    page = render_report(results)
    assert 'id="busy-machine"' in page and "Measured on a busy machine — before it: other programs used 85%" in page
    # a resume adds its own reading; nothing of the first is lost
    Sweep(config(tmp_path), path, None, reporter=Console(io.StringIO()), backend=FakeBackend(Script())).run()
    assert len(load_results(path).load_before) == 2


def test_a_quiet_machine_gets_no_warning(tmp_path, monkeypatch):
    monkeypatch.setattr(machine_load, "now", lambda window_s=1.0: Load(0.02, 0.1, 2, window_s))
    monkeypatch.setattr(machine_load.Monitor, "over_last", lambda self, seconds: Load(0.01, 1.0, 2, seconds))
    out = io.StringIO()
    Sweep(config(tmp_path), tmp_path / "r.json", None, reporter=Console(out), backend=FakeBackend(Script())).run()
    assert "busy" not in out.getvalue()
    results = load_results(tmp_path / "r.json")
    assert not busy.busy(results)
    page = render_report(results)
    assert 'id="busy-machine"' not in page and "<dt>Machine load</dt><dd>before it: other programs used 2%" in page
