"""draftbench.results.lock: one sweep per results file. The lock is exclusive, names its holder,
dies with it, follows symlinks to the real file and covers a shared logs folder. (The CLI's
refusal while a file is locked: test_results_output_paths.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from draftbench.results.lock import ResultsInUseError, results_lock
from draftbench.results.output_paths import lock_paths_for

from helpers import REPO


def test_a_symlinked_results_file_is_locked_through_its_target(tmp_path):
    real = tmp_path / "store" / "real.json"
    (tmp_path / "link.json").symlink_to(real)
    assert lock_paths_for(tmp_path / "link.json") == [tmp_path / "link.lock", tmp_path / "store" / "real.lock"]
    assert lock_paths_for(real) == [tmp_path / "store" / "real.lock"]


def test_results_files_sharing_a_logs_folder_share_a_lock(tmp_path):
    with results_lock(tmp_path / "x.json"), pytest.raises(ResultsInUseError, match="its logs folder"), \
            results_lock(tmp_path / "x.dat"):
        pass
    with results_lock(tmp_path / "store" / "real.json"):
        (tmp_path / "link.json").symlink_to(tmp_path / "store" / "real.json")
        with pytest.raises(ResultsInUseError), results_lock(tmp_path / "link.json"):
            pass


def test_the_lock_is_exclusive_names_its_holder_and_dies_with_it(tmp_path):
    results = tmp_path / "r.json"
    with results_lock(results) as [lock]:
        assert lock.read_text().strip() == str(os.getpid())
        with pytest.raises(ResultsInUseError, match=f"in use by process {os.getpid()}"), results_lock(results):
            pass
    with results_lock(results):        # released on exit
        pass
    # A holder killed with SIGKILL leaves no stale lock: the OS releases it.
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; sys.path.insert(0, sys.argv[1]);"
                               "from pathlib import Path; from draftbench.results.lock import results_lock;"
                               "cm = results_lock(Path(sys.argv[2])); cm.__enter__(); print('held', flush=True);"
                               "time.sleep(60)", str(REPO), str(results)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ResultsInUseError, match=f"process {holder.pid}"), results_lock(results):
            pass
    finally:
        holder.kill()
        holder.wait(timeout=10)
    deadline = time.monotonic() + 5
    while True:
        try:
            with results_lock(results):
                break
        except ResultsInUseError:
            assert time.monotonic() < deadline, "the lock outlived its killed holder"
            time.sleep(0.05)
