"""Issue 45, vLLM's --dry-run finds what the run's start would: a target (or draft) that is a plain file, a
folder without config.json, a FIFO, /dev/zero or a name that vLLM would read as an option, and a vllm_bin
that is a FIFO, a folder without `vllm`, a program of another kind or a Python without vLLM. Each is named
with its JSON path (exit 2); a checkpoint folder, a GGUF file and a Hugging Face id pass."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from fakes import make_exe
from helpers import run_cli


def dry_run(tmp_path, target: str, **settings):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"name": "v", "hardware": "h", "backend": "vllm",
                                "targets": [{"label": "T", "path": target}], "settings": settings}))
    return run_cli("sweep.py", "--config", str(path), "--dry-run", cwd=tmp_path, timeout=60)


def test_a_checkpoint_folder_a_gguf_file_and_an_id_pass(tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    for target in (str(folder), str(gguf), "org/model"):
        proc = dry_run(tmp_path, target)
        assert proc.returncode == 0 and "valid." in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("make, says", [
    (lambda d: (d / "weights.bin").write_bytes(b"x") and d / "weights.bin", "is a file, not a model folder"),
    (lambda d: (d / "empty").mkdir() or d / "empty", "holds no config.json"),
    (lambda d: os.mkfifo(d / "fifo") or d / "fifo", "is a named pipe (FIFO), not a model folder"),
    (lambda d: "/dev/zero", "is a character device, not a model folder"),
    (lambda d: "--model=/tmp/draft", "starts with '-', so vLLM would read it as an option"),
])
def test_a_target_vllm_cannot_load_is_refused_by_the_dry_run(tmp_path, make, says):
    proc = dry_run(tmp_path, str(make(tmp_path)))
    assert proc.returncode == 2 and "$.targets[0].path" in proc.stderr and says in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("make, says", [
    (lambda d: os.mkfifo(d / "vllm") or d / "vllm", "vllm not found at"),
    (lambda d: (d / "bin").mkdir() or d / "bin", "vllm not found at"),
    (lambda d: shutil.copy("/bin/true", d / "vllm") and d / "vllm", "is not vLLM's `vllm` command"),
    (lambda d: sys.executable, "a Python without vLLM installed"),
])
def test_a_vllm_bin_that_cannot_start_vllm_is_refused_by_the_dry_run(tmp_path, make, says):
    proc = dry_run(tmp_path, "org/model", vllm_bin=str(make(tmp_path)))
    assert proc.returncode == 2 and "$.settings.vllm_bin" in proc.stderr and says in proc.stderr, proc.stderr


def test_a_wrapper_script_is_taken_at_its_word(tmp_path):
    wrapper = make_exe(tmp_path / "bin", "vllm", "fake_vllm.py")       # the fake vLLM the tests run
    proc = dry_run(tmp_path, "org/model", vllm_bin=str(wrapper))
    assert proc.returncode == 0, proc.stderr
