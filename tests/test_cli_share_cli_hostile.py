"""draftbench.cli.share_cli's outputs are written, never read, and a write error is one line.

``--output /dev/stdout | wc -l`` and ``--output >(gzip …)`` used to hang (the output was read to see
whether it was a results file); a FIFO with no reader is refused at once; a closed or full standard
output, or ``--output /dev/full``, is one ``Error:`` line and exit 1, never "unexpected … This is a bug";
``--compare A A`` notices it is one file.
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
from draftbench.cli import sweep_cli
from draftbench.common.errors import UsageError

from helpers import REPO, run_cli
from test_results_file_hostile import assert_clean_error, good_results


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


def test_compare_notices_one_file_given_twice(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(good_results()))
    (tmp_path / "link.json").symlink_to(path)
    for args in ([str(path), str(path)], [str(path), str(tmp_path / "link.json")]):
        with pytest.raises(UsageError, match="are the same file") as info:
            sweep_cli.main(["--compare", *args, "--no-chart"])
        assert "comparing a file with itself" in info.value.message
    os.link(path, tmp_path / "hard.json")
    with pytest.raises(UsageError, match="are the same file"):
        sweep_cli.main(["--compare", str(path), str(tmp_path / "hard.json"), "--no-chart"])
