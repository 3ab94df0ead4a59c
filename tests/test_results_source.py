"""draftbench.results.source: a results file's text, read without trusting the file.

Every command that reads results files (``--chart-only``, ``--export``, ``--compare``,
``--redact-paths``) refuses a FIFO or a device at once; gzip is read (a sweep refuses to resume into
one); a symlink loop is named; two equal keys in one object are refused with their JSON path.
"""

from __future__ import annotations

import gzip
import json
import os
import time

import pytest
from draftbench.cli import sweep_cli
from draftbench.common.errors import DraftbenchError, ResultsFileError
from draftbench.results.file import load_results

from helpers import WATCHDOG_S, run_cli, within_watchdog
from test_cli_sweep_cli_config_errors import tripwire  # noqa: F401  (fixture)
from test_results_file_hostile import assert_clean_error, good_results


def sweep(*args: str) -> tuple[int, str]:
    """``sweep.py ARGS`` in this process: (exit code, the Error line or '')."""
    try:
        return within_watchdog(sweep_cli.main, list(args)), ""
    except DraftbenchError as exc:
        return exc.exit_code, f"Error: {exc}"


def test_results_files_that_are_fifos_or_devices_are_refused_by_every_command(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for args in (["--chart-only", "--results", str(fifo)],
                 ["--results", str(fifo), "--export", "csv"],
                 ["--compare", str(fifo), str(fifo.with_name("other.json"))],
                 ["--results", "/dev/zero", "--export", "md"],
                 ["--results", str(fifo), "--redact-paths"]):
        start = time.monotonic()
        code, error = sweep(*args)
        assert code in (1, 2) and ("named pipe (FIFO)" in error or "character device" in error), (args, error)
        assert time.monotonic() - start < WATCHDOG_S


def test_chart_only_on_dev_zero_is_refused_before_anything_is_written(tmp_path):
    proc = run_cli("sweep.py", "--chart-only", "--results", "/dev/zero", "--chart", str(tmp_path / "r.html"),
                   timeout=WATCHDOG_S * 3)
    assert_clean_error(proc, 2, "--results /dev/zero is a character device, not a regular file")
    assert not (tmp_path / "r.html").exists()


def test_a_gzipped_results_file_is_read_and_never_resumed_into(tmp_path):
    plain = tmp_path / "r.json"
    plain.write_text(json.dumps(good_results()))
    packed = tmp_path / "r.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert load_results(packed).results == load_results(plain).results
    with pytest.raises(ResultsFileError) as info:
        load_results(packed, allow_gzip=False)
    assert "is gzip-compressed" in info.value.message and "gunzip -k" in (info.value.fix or "")
    assert "permissions" not in str(info.value)


def test_a_symlink_loop_is_named_when_read_and_before_a_sweep_writes(tmp_path, tripwire):  # noqa: F811
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    with pytest.raises(ResultsFileError) as info:
        load_results(loop)
    assert "symbolic link that loops" in info.value.message and "disk space" not in str(info.value)
    exe, marker = tripwire
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"name": "x", "hardware": "h", "targets": [{"label": "T", "path": "t.gguf"}],
                                  "settings": {"llama_bin": str(exe)}}))
    code, error = sweep("--config", str(config), "--results", str(loop))
    assert code == 2 and "is a symbolic link that loops" in error and "disk space" not in error
    assert not marker.exists()


@pytest.mark.parametrize("text, where", [
    ('{"results": [], "name": "a", "results": []}', "$.results"),
    ('{"name": "a", "results": [{"target": "T", "mean_tps": 1, "mean_tps": 2}]}', "$.results[0].mean_tps"),
    ('{"results": [{"target": "T", "server": {"odd key": 1, "odd key": 2}}]}', '$.results[0].server["odd key"]'),
], ids=["results-twice", "in-a-row", "odd-key"])
def test_a_duplicated_key_is_refused_with_its_json_path(tmp_path, text, where):
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(ResultsFileError) as info:
        load_results(path)
    assert f"{where} appears twice in the same object" in info.value.message and path.read_text() == text


def test_a_number_too_long_for_python_is_a_clean_error(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(good_results()).replace('"mean_tps": 40.0', '"mean_tps": ' + "9" * 5000))
    with pytest.raises(ResultsFileError, match="holds a value Python cannot read"):
        load_results(path)
