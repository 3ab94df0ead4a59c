"""draftbench.common.reading: every file a user names or we scan is read bounded in time and bytes.

A FIFO, a device or a folder is refused at once (``O_NONBLOCK`` + ``fstat``), a file over its cap
from its size, a file that grows (or a /proc file that says it is empty) at the cap, a symlink loop
with its own message, a gzip bomb at the cap. Each case takes a fraction of a second.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
from draftbench.common.reading import (
    CONFIG_LIMIT,
    RESULTS_LIMIT,
    SMALL_LIMIT,
    UnreadableFile,
    gunzip_limited,
    read_limited,
)

from helpers import sparse_file, within_watchdog


def test_a_fifo_a_device_and_a_folder_are_refused_at_once(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "is a named pipe (FIFO), not a regular file"),
                       (Path("/dev/zero"), "is a character device, not a regular file"),
                       (tmp_path, "is a folder, not a regular file")):
        with pytest.raises(UnreadableFile) as info:
            within_watchdog(read_limited, path, RESULTS_LIMIT)
        assert info.value.message == kind and info.value.fix


def test_a_file_over_its_cap_is_refused_from_its_size_and_the_cap_can_be_raised(tmp_path, monkeypatch):
    big = sparse_file(tmp_path / "big.json", CONFIG_LIMIT.max_bytes() + 1)     # no disk used, nothing read
    with pytest.raises(UnreadableFile) as info:
        read_limited(big, CONFIG_LIMIT)
    assert "over the 16 MB cap on a config" in info.value.message
    assert "DRAFTBENCH_MAX_CONFIG_MB=" in info.value.fix
    monkeypatch.setenv("DRAFTBENCH_MAX_CONFIG_MB", "0.001")
    small = tmp_path / "small.json"
    small.write_bytes(b"x" * 2000)
    with pytest.raises(UnreadableFile, match="is 2,000 bytes, over the 1,000 bytes cap"):
        read_limited(small, CONFIG_LIMIT)
    monkeypatch.setenv("DRAFTBENCH_MAX_CONFIG_MB", "1")
    assert read_limited(small, CONFIG_LIMIT) == b"x" * 2000


def test_a_file_that_says_it_is_empty_is_still_read_only_up_to_the_cap(monkeypatch):
    # /proc files report size 0 and may be longer: the read itself stops at the cap
    monkeypatch.setenv("DRAFTBENCH_MAX_SMALL_FILE_MB", "0.0001")
    with pytest.raises(UnreadableFile, match="grew past the 100 bytes cap"):
        read_limited("/proc/self/maps", SMALL_LIMIT)


def test_a_symlink_loop_has_its_own_message(tmp_path):
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    with pytest.raises(UnreadableFile) as info:
        read_limited(loop, RESULTS_LIMIT)
    assert "symbolic link that loops" in info.value.message and "permission" not in info.value.message


def test_a_gzip_bomb_stops_at_the_cap(monkeypatch):
    monkeypatch.setenv("DRAFTBENCH_MAX_RESULTS_MB", "1")
    bomb = gzip.compress(b"\0" * 50_000_000)       # 50 MB of zeros in ~50 kB
    with pytest.raises(UnreadableFile, match=r"decompresses to more than the 1\.0 MB cap"):
        gunzip_limited(bomb, RESULTS_LIMIT)
    with pytest.raises(UnreadableFile, match=r"damaged|cut short"):
        gunzip_limited(gzip.compress(b"{}")[:-6], RESULTS_LIMIT)
    assert gunzip_limited(gzip.compress(b"{}") + gzip.compress(b"[]"), RESULTS_LIMIT) == b"{}[]"   # two members
