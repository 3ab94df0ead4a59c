"""Issue 36, the prompt-set cache: read bounded through common/reading.py, as docs/safety.md says of draftbench's own
cache files: a FIFO there no longer hangs a dry run, /dev/zero is no MemoryError, a symlink is never followed (nor a
fetch written through it); each is one named error, exit 2."""

from __future__ import annotations

import json
import os
import re

import pytest
from draftbench.common.errors import UsageError
from draftbench.config import prompt_data

from helpers import run_cli
from test_common_gguf import forge, vocab_kv
from test_config_prompt_sets import base


@pytest.mark.parametrize("plant, cause", [
    (lambda p: os.mkfifo(p), "is a named pipe (FIFO), not a regular file"),
    (lambda p: os.symlink("/dev/zero", p), "is a symbolic link"),
    (lambda p: p.write_bytes(b"x" * 2_000_001), "over the 1.0 MB cap"),
])
def test_a_planted_cache_file_is_named_not_read(tmp_path, monkeypatch, plant, cause):
    monkeypatch.setenv("DRAFTBENCH_CACHE", str(tmp_path))
    data = prompt_data.DATA_FILES["mt-bench"]
    data.path.parent.mkdir(parents=True)
    plant(data.path)
    with pytest.raises(UsageError, match=re.escape(cause)) as info:
        prompt_data.read(data)
    assert "remove it" in (info.value.fix or "")
    assert os.path.lexists(data.path)        # nothing was written over it or through it


def test_a_dry_run_with_a_fifo_in_the_cache_answers_at_once(tmp_path):
    cache = tmp_path / "cache"
    data = prompt_data.DATA_FILES["mt-bench"]
    (cache / "prompt-sets").mkdir(parents=True)
    os.mkfifo(cache / "prompt-sets" / data.path.name)
    config = tmp_path / "c.json"
    target = forge(tmp_path, "t.gguf", kv=vocab_kv(["a", "b"]), tensors=[("w", (4,))])
    config.write_text(json.dumps(dict(base(prompts=["mt-bench"]), targets=[{"label": "T", "path": str(target)}])))
    proc = run_cli("sweep.py", "--config", str(config), "--dry-run", env={"DRAFTBENCH_CACHE": str(cache)},
                   timeout=60)
    assert proc.returncode == 2 and "is a named pipe (FIFO)" in proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr and "This is a bug" not in proc.stderr
