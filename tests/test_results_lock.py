"""draftbench.results.lock: one sweep per results file. The lock is exclusive, names its holder,
dies with it, follows symlinks to the real file and covers a shared logs folder. It lives in
draftbench's cache, never beside the results: ``--results Cargo.json`` leaves ``Cargo.lock`` alone,
a symlinked ``s.lock`` is never followed, a link planted where our lock goes is refused. (The CLI's
refusal while a file is locked: test_results_output_paths.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from draftbench.common.errors import DraftbenchError
from draftbench.results.lock import ResultsInUseError, lock_paths_for, locks_dir, results_lock

from helpers import REPO, run_cli

FAKE_LLAMA_SERVER = '''#!{python}
import sys
if "--help" in sys.argv:
    print("  -m, --model FNAME\\n  --port PORT\\n  --host HOST\\n  -c, --ctx-size N\\n  -ngl N\\n  -np, --parallel N")
elif "--version" in sys.argv:
    print("version: fake")
else:
    sys.exit("this test never starts a server")
'''


def listing(folder: Path) -> dict:
    return {p.relative_to(folder): (p.readlink() if p.is_symlink() else p.is_dir() or p.read_bytes())
            for p in sorted(folder.rglob("*"))}


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("DRAFTBENCH_CACHE", str(folder))
    return folder


def test_a_symlinked_results_file_is_locked_through_its_target(tmp_path):
    real = tmp_path / "store" / "real.json"
    (tmp_path / "link.json").symlink_to(real)
    assert lock_paths_for(tmp_path / "link.json")[0] == lock_paths_for(real)[0]
    assert lock_paths_for(tmp_path / "store" / ".." / "store" / "real.json")[0] == lock_paths_for(real)[0]
    assert lock_paths_for(tmp_path / "other.json")[0] != lock_paths_for(real)[0]


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
    with results_lock(results) as [lock, _logs]:
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


def test_the_lock_never_touches_a_file_beside_the_results(tmp_path, cache):
    work = tmp_path / "project"
    work.mkdir()
    (work / "Cargo.lock").write_text("# the project's own lock file\n")
    (work / "target.txt").write_text("precious")
    (work / "s.lock").symlink_to(work / "target.txt")
    before = listing(work)
    with results_lock(work / "Cargo.json") as locks, results_lock(work / "s.json"):
        assert listing(work) == before
        assert all(lock.parent == locks_dir() for lock in locks)
    assert listing(work) == before


def test_a_symlink_planted_where_our_lock_goes_is_never_followed(tmp_path, cache):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    results = tmp_path / "r.json"
    lock = lock_paths_for(results)[0]
    lock.parent.mkdir(parents=True)
    lock.symlink_to(victim)
    with pytest.raises(DraftbenchError, match="cannot create the lock file"), results_lock(results):
        pass
    assert victim.read_text() == "precious" and lock.is_symlink()


def test_the_lock_file_is_written_over_never_truncated(tmp_path, cache):
    results = tmp_path / "r.json"
    with results_lock(results) as [lock, _logs]:
        size = lock.stat().st_size
        assert lock.read_text().strip() == str(os.getpid())
    with results_lock(results):
        assert lock.stat().st_size == size        # the same fixed-width record, rewritten in place


def test_a_sweep_on_cargo_json_leaves_cargo_lock_alone(tmp_path):
    fake = tmp_path / "llama-server"
    fake.write_text(FAKE_LLAMA_SERVER.format(python=sys.executable))
    fake.chmod(0o755)
    (tmp_path / "Cargo.lock").write_text("# cargo's\n")
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"name": "x", "hardware": "h", "targets": [{"label": "T", "path": "missing.gguf"}],
                                  "settings": {"llama_bin": str(fake), "runs": 1}}))
    proc = run_cli("sweep.py", "--config", str(config), "--results", str(tmp_path / "Cargo.json"), "--no-chart",
                   timeout=120, env={"DRAFTBENCH_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 3, proc.stdout + proc.stderr          # finished; the model was missing (skipped)
    assert (tmp_path / "Cargo.lock").read_text() == "# cargo's\n"
    assert json.loads((tmp_path / "Cargo.json").read_text())["results"][0]["status"] == "skipped"
