"""draftbench.config.prompts on prompt files that cannot be prompts: /dev/zero, a FIFO (both used to be
"does not exist", or to hang) and 1 GB (used to be "valid" after 50 s and 4.4 GB) are refused at once,
alone and as a config's ``settings.prompts``."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from draftbench.common.errors import ConfigError, UsageError
from draftbench.config.prompts import load_prompt_file
from draftbench.sweep.config_file import validate_config

from helpers import sparse_file, within_watchdog


@pytest.mark.parametrize("make, message", [
    (lambda tmp: os.mkfifo(tmp / "p.jsonl") or tmp / "p.jsonl", "is a named pipe (FIFO)"),
    (lambda tmp: Path("/dev/zero"), "is a character device"),
    (lambda tmp: sparse_file(tmp / "p.txt", 1_000_000_000), "is 1.0 GB, over the 64 MB cap on a prompt file"),
], ids=["fifo", "dev-zero", "1GB"])
def test_a_prompt_file_that_cannot_be_prompts_is_refused_at_once(tmp_path, make, message):
    path = make(tmp_path)
    with pytest.raises(UsageError, match=re.escape(message)):
        within_watchdog(load_prompt_file, path)
    data = {"name": "x", "hardware": "h", "targets": [{"label": "T", "path": "t.gguf"}],
            "settings": {"prompts": str(path)}}
    with pytest.raises(ConfigError) as info:
        within_watchdog(validate_config, data, source="c.json", base_dir=str(tmp_path))
    problems = info.value.problems
    assert [p.path for p in problems] == ["$.settings.prompts"] and message in problems[0].message
    assert "does not exist" not in problems[0].message
