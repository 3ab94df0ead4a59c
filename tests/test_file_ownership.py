"""Only the files the user named, and our own: locks never beside the results, outputs never read,
write errors one line.

A sweep's lock lives in draftbench's cache, so ``--results Cargo.json`` leaves ``Cargo.lock`` alone
and a symlinked ``s.lock`` is never followed. An output path is written, never read: ``/dev/stdout``
in a pipe, a process substitution, a FIFO with no reader, ``/dev/full``, a closed standard output.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from draftbench.cli import save_traceback
from draftbench.common.errors import DraftbenchError
from draftbench.results.lock import lock_paths_for, locks_dir, results_lock

from helpers import REPO, run_cli
from test_hostile_files import assert_clean_error, good_results

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


# ---------------------------------------------------------------------------- the lock

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


# ---------------------------------------------------------------------------- our own scratch files

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


# ---------------------------------------------------------------------------- outputs are written, never read

@pytest.fixture
def results(tmp_path) -> Path:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(good_results()))
    return path


def shell(command: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``command`` in bash (pipes, process substitution), with ``sweep`` standing for sweep.py."""
    sweep = f"{sys.executable} {REPO / 'sweep.py'}"
    return subprocess.run(["bash", "-c", command.replace("sweep ", sweep + " ")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, PYTHONUNBUFFERED="1"))


def test_export_to_dev_stdout_in_a_pipe(tmp_path, results):
    proc = shell(f"sweep --results {results} --export csv --output /dev/stdout | wc -l", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "3"                  # a header and two rows, nothing else
    assert "Exported 2 combinations to /dev/stdout" in proc.stderr


def test_export_to_dev_stdout_appends_to_a_redirected_file(tmp_path, results):
    (tmp_path / "all.csv").write_text("earlier line\n")
    proc = shell(f"sweep --results {results} --export csv --output /dev/stdout >> all.csv", tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = (tmp_path / "all.csv").read_text().splitlines()
    assert lines[0] == "earlier line" and len(lines) == 4


def test_export_to_a_process_substitution(tmp_path, results):
    proc = shell(f"sweep --results {results} --export csv --output >(gzip > out.csv.gz); wait", tmp_path)
    assert proc.returncode == 0, proc.stderr
    for _ in range(100):               # the gzip process may still be writing when bash returns
        try:
            text = gzip.decompress((tmp_path / "out.csv.gz").read_bytes()).decode()
            break
        except (OSError, EOFError):
            time.sleep(0.05)
    assert text.count("\n") == 3 and text.startswith("combination,")


def test_export_to_a_fifo_that_no_one_reads_is_refused_at_once(tmp_path, results):
    os.mkfifo(tmp_path / "out.csv")
    proc = run_cli("sweep.py", "--results", str(results), "--export", "csv", "--output", str(tmp_path / "out.csv"),
                   timeout=60)
    assert_clean_error(proc, 1, "cannot write the export", "named pipe that no program is reading")


@pytest.mark.parametrize("redirect", [">&-", "> /dev/full", "--output /dev/full"],
                         ids=["stdout-closed", "stdout-full", "output-full"])
def test_export_write_errors_are_one_line(tmp_path, results, redirect):
    proc = shell(f"sweep --results {results} --export csv {redirect}", tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "This is a bug" not in proc.stderr
    assert proc.stderr.startswith("Error: cannot write") and proc.stderr.count("Error:") == 1, proc.stderr
    assert ("closed" in proc.stderr) == (redirect == ">&-")
    assert ("no space left on the device" in proc.stderr) == ("full" in redirect)


def test_a_full_standard_output_after_a_report_is_one_line(tmp_path, results):
    proc = shell(f"sweep --chart-only --results {results} --chart r.html > /dev/full", tmp_path)
    assert proc.returncode == 1 and proc.stderr.count("Error:") == 1, proc.stderr
    assert "cannot write to standard output: no space left on the device" in proc.stderr
    assert "Exception ignored" not in proc.stderr and (tmp_path / "r.html").exists()
