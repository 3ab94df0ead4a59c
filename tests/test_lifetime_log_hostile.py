"""Issue 36, server logs: `<results>.logs/<row>.log` is opened without following a symlink planted there (as the lock
files and crash dumps are), never a FIFO or another user's file; the link's target is never written."""

from __future__ import annotations

import os
import sys

import pytest
from draftbench.common.errors import ServerError
from draftbench.lifetime.process import ManagedProcess


@pytest.mark.parametrize("plant", ["symlink", "dangling", "fifo"])
def test_a_planted_log_is_refused_and_its_target_untouched(tmp_path, plant):
    logs = tmp_path / "r.logs"
    logs.mkdir()
    victim = tmp_path / "victim.txt"
    log = logs / "001-T.log"
    if plant == "symlink":
        victim.write_text("keep me\n")
        os.symlink(victim, log)
    elif plant == "dangling":
        os.symlink(victim, log)
    else:
        os.mkfifo(log)
    with pytest.raises(ServerError) as info:
        ManagedProcess([sys.executable, "-c", "print('hello')"], log)
    assert str(log) in info.value.message and "remove it" in (info.value.fix or "")
    assert ("symbolic link" if plant != "fifo" else "pipe") in info.value.message
    if plant == "symlink":
        assert victim.read_text() == "keep me\n"
    else:
        assert not victim.exists()


def test_an_ordinary_log_is_appended_to(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("earlier\n")
    proc = ManagedProcess([sys.executable, "-c", "print('hello')"], log)
    try:
        proc.popen.wait(timeout=60)
    finally:
        proc.stop()
    lines = log.read_text().splitlines()
    assert lines[0] == "earlier" and lines[1].startswith("$ ") and "hello" in lines
