"""draftbench.sweep.config_file on configs that are not files: a FIFO or a device is a config error at
once (it used to hang), and a ``--config-dir`` batch names a FIFO ``b.json`` and runs the others."""

from __future__ import annotations

import json
import os

import pytest
from draftbench.common.errors import ConfigError
from draftbench.sweep.config_file import load_config

from helpers import WATCHDOG_S, run_cli, tiny_gguf, within_watchdog
from test_cli_sweep_cli_config_errors import tripwire  # noqa: F401  (fixture)


def test_a_config_that_is_a_fifo_or_a_device_is_a_config_error(tmp_path):
    fifo = tmp_path / "c.json"
    os.mkfifo(fifo)
    for path, what in ((fifo, "named pipe"), ("/dev/zero", "character device")):
        with pytest.raises(ConfigError, match=what):
            within_watchdog(load_config, path)


def test_a_config_dir_with_a_fifo_names_it_and_runs_the_rest(tmp_path, tripwire):  # noqa: F811
    exe, marker = tripwire
    folder = tmp_path / "configs"
    folder.mkdir()
    valid = {"name": "a", "hardware": "h", "targets": [{"label": "T", "path": "t.gguf"}],
             "settings": {"llama_bin": str(exe)}}
    (folder / "a.json").write_text(json.dumps(valid))
    os.mkfifo(folder / "b.json")
    (folder / "c.json").write_text(json.dumps({**valid, "name": "c"}))
    tiny_gguf(folder / "t.gguf")          # the dry run checks the model file
    proc = run_cli("sweep.py", "--config-dir", str(folder), "--dry-run", timeout=WATCHDOG_S * 3, cwd=tmp_path)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 2
    assert "b.json: 1 problem" in proc.stderr and "named pipe (FIFO)" in proc.stderr
    assert "a.json: valid." in proc.stdout and "c.json: valid." in proc.stdout
    assert not marker.exists()
