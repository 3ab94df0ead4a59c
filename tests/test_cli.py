"""draftbench.cli (run_main): a standard output that fails after the work is done is one ``Error:``
line, and a crash dump is a new file of our own that never follows a link."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from draftbench.cli import save_traceback

from helpers import REPO
from test_results_file_hostile import good_results


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("DRAFTBENCH_CACHE", str(folder))
    return folder


def test_a_traceback_dump_is_a_new_file_and_never_follows_a_link(tmp_path, cache, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    monkeypatch.setattr(time, "strftime", lambda fmt: "20260101-000000")
    planted = cache / "logs" / f"crash-20260101-000000-{os.getpid()}.txt"
    planted.parent.mkdir(parents=True)
    planted.symlink_to(victim)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        assert save_traceback() is None
    assert victim.read_text() == "precious"
    planted.unlink()
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        assert "RuntimeError: boom" in Path(save_traceback() or "").read_text()


def test_a_full_standard_output_after_a_report_is_one_line(tmp_path):
    results = tmp_path / "r.json"
    results.write_text(json.dumps(good_results()))
    sweep = f"{sys.executable} {REPO / 'sweep.py'}"
    proc = subprocess.run(["bash", "-c", f"{sweep} --chart-only --results {results} --chart r.html > /dev/full"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert proc.returncode == 1 and proc.stderr.count("Error:") == 1, proc.stderr
    assert "cannot write to standard output: no space left on the device" in proc.stderr
    assert "Exception ignored" not in proc.stderr and (tmp_path / "r.html").exists()
