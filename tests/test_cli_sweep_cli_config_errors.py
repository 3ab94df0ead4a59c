"""Malformed configs through the real CLI: exit 2, every problem with its JSON path, nothing started.

No llama-server is needed: `settings.llama_bin` points to a stand-in that records any start, so
the tests prove that validation happens before anything is launched.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_cli, tiny_gguf


@pytest.fixture
def tripwire(tmp_path):
    """A fake llama-server that leaves a file behind if anything ever runs it."""
    marker = tmp_path / "started"
    exe = tmp_path / "llama-server"
    exe.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    exe.chmod(0o755)
    return exe, marker


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(text)
    return path


def test_every_problem_is_listed_with_its_path_and_nothing_starts(tmp_path, tripwire):
    exe, marker = tripwire
    (tmp_path / "t.gguf").write_bytes(b"GGUF")
    config = {
        "name": "x", "hardware": "h", "backend": "llama.cpp-typo", "model_family": "f",
        "targets": [{"label": "T", "path": "t.gguf"}, {"label": "T", "path": "t.gguf"}],
        "drafts": [{"label": "a/b", "path": "t.gguf"}, {"path": "t.gguf"}],
        "settings": {"llama_bin": str(exe), "runs": "3", "max_tokens": 0, "port": 70000, "temperature": -1},
    }
    proc = run_cli("sweep.py", "--config", str(write(tmp_path, json.dumps(config))), "--results",
                   str(tmp_path / "r.json"), timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr
    for path in ("backend", "targets[1].label", "drafts[0].label", "drafts[1].label", "settings.runs",
                 "settings.max_tokens", "settings.port", "settings.temperature"):
        assert path in err, f"{path} missing from:\n{err}"
    assert "without quotes" in err            # runs: "3" says how to fix it
    assert "llamacpp" in err                  # an unknown backend lists the valid ones
    assert err.startswith("Error:")
    assert not marker.exists(), "a server was started despite an invalid config"
    assert not (tmp_path / "r.json").exists(), "an invalid config must not create a results file"


@pytest.mark.parametrize("text, expected", [
    ('{"name": "x",\n  "targets": [1,]\n}', "line 2, column"),
    ("", "invalid JSON"),
    ('{"name": "x", "hardware": "h", "backend": "llamacpp", "model_family": "f", "drafts": []}', "targets"),
    ('{"name": "x", "hardware": "h", "backend": "llamacpp", "model_family": "f", "targets": [], "drafts": []}',
     "targets"),
])
def test_broken_files_exit_2_with_the_place_named(tmp_path, tripwire, text, expected):
    proc = run_cli("sweep.py", "--config", str(write(tmp_path, text)), timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert expected in proc.stderr
    assert not tripwire[1].exists()


def test_relative_paths_are_resolved_against_the_config_folder(tmp_path, tripwire):
    exe, marker = tripwire
    sub = tmp_path / "configs"
    sub.mkdir()
    (tmp_path / "models").mkdir()
    tiny_gguf(tmp_path / "models" / "t.gguf")         # the dry run checks the file it resolved
    config = {"name": "x", "hardware": "h", "backend": "llamacpp", "model_family": "f",
              "targets": [{"label": "T", "path": "../models/t.gguf"}], "drafts": [],
              "settings": {"llama_bin": str(exe)}}
    path = sub / "c.json"
    path.write_text(json.dumps(config))
    proc = run_cli("sweep.py", "--config", str(path), "--dry-run", timeout=60, cwd=Path("/"))
    assert proc.returncode == 0, proc.stderr
    assert str(tmp_path / "models" / "t.gguf") in proc.stdout
    assert not marker.exists()
