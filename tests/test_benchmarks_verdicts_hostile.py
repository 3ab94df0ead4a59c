"""Issue 45, benchmarks/verdicts.py fails with one line: a --world that names a missing module or attribute, a
value that is no factory, a factory that raises or returns None (it printed a table of 0 requests with "(1)
false 0.0%"), and --markdown on a file it did not write (KeyError), a FIFO (it hung) or /dev/zero (out of
memory)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers import REPO, within_watchdog

SCRIPT = REPO / "benchmarks" / "verdicts.py"


def verdicts(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          cwd=str(tmp_path), env=env)


@pytest.mark.parametrize("world, says", [
    ("nosuchmodule:world", "--world nosuchmodule:world: cannot import nosuchmodule"),
    ("worlds:missing", "--world worlds:missing: module worlds has no missing"),
    ("worlds:NOT_A_FACTORY", "--world worlds:NOT_A_FACTORY: NOT_A_FACTORY is a int, not a factory"),
    ("worlds:returns_none", "returned NoneType, not a draftbench Backend"),
    ("worlds:raises", "raised RuntimeError: broken noise model"),
])
def test_a_bad_world_is_one_line(tmp_path, world, says):
    (tmp_path / "worlds.py").write_text("NOT_A_FACTORY = 3\n\ndef returns_none(*args):\n    return None\n\n"
                                        "def raises(*args):\n    raise RuntimeError('broken noise model')\n")
    proc = verdicts(tmp_path, "--quick", "--scenario", "best10/harsh", "--world", world)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and says in proc.stderr, proc.stderr
    assert "best10/harsh" not in proc.stdout          # no table row of a sweep that never ran


def test_markdown_on_anything_but_its_own_json_is_one_line(tmp_path):
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"results": []}))
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    for path, says in ((wrong, "has no 'scenarios'"), (fifo, "named pipe"), ("/dev/zero", "character device"),
                       (tmp_path / "missing.json", "missing.json")):
        proc = within_watchdog(verdicts, tmp_path, "--markdown", str(path))
        assert proc.returncode == 1 and "Traceback" not in proc.stderr and says in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ""
