"""Every read bounded in bytes and time: FIFOs, devices, folders, huge files, gzip, link loops,
endless child output. Each case is refused (or read) at once with one clear line; nothing waits.

Most cases call the package (or ``sweep_cli.main``) in this process, so each takes a fraction of a
second; the few that must see the real exit code and streams run ``sweep.py``. A FIFO that is
never opened for writing would hang any read of it for ever: the tests run with a watchdog
(:func:`bounded`) so that a regression fails in seconds instead of hanging the suite.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from draftbench.cli import sweep_cli
from draftbench.common.errors import ConfigError, DraftbenchError, ResultsFileError, UsageError
from draftbench.common.reading import CONFIG_LIMIT, RESULTS_LIMIT, UnreadableFile, gunzip_limited, read_limited
from draftbench.config.prompts import load_prompt_file
from draftbench.lifetime.capture import run_capped
from draftbench.results.file import ResultsFile, Row, load_results, save_results
from draftbench.results.peek import peek_header
from draftbench.sweep.config_file import load_config, validate_config
from draftbench.sweep.estimate import Estimator

from helpers import run_cli
from test_cli_config_errors import tripwire  # noqa: F401  (fixture)
from test_hostile_files import assert_clean_error, good_results

WATCHDOG_S = 20      # a guard against a hang, not a speed expectation


def bounded(action, *args, **kwargs):
    """Run ``action`` in a thread; fail (instead of hanging the suite) if it has not returned in WATCHDOG_S."""
    box: dict = {}

    def run():
        try:
            box["value"] = action(*args, **kwargs)
        except BaseException as exc:     # handed to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(WATCHDOG_S)
    assert not thread.is_alive(), f"{action.__name__} did not return within {WATCHDOG_S} s: it waits on the file"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def sweep(*args: str) -> tuple[int, str]:
    """``sweep.py ARGS`` in this process: (exit code, the Error line or '')."""
    try:
        return bounded(sweep_cli.main, list(args)), ""
    except DraftbenchError as exc:
        return exc.exit_code, f"Error: {exc}"


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    return path


# ---------------------------------------------------------------------------- the reader itself

def test_a_fifo_a_device_and_a_folder_are_refused_at_once(tmp_path, fifo):
    for path, kind in ((fifo, "is a named pipe (FIFO), not a regular file"),
                       (Path("/dev/zero"), "is a character device, not a regular file"),
                       (tmp_path, "is a folder, not a regular file")):
        with pytest.raises(UnreadableFile) as info:
            bounded(read_limited, path, RESULTS_LIMIT)
        assert info.value.message == kind and info.value.fix


def test_a_file_over_its_cap_is_refused_from_its_size_and_the_cap_can_be_raised(tmp_path, monkeypatch):
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(CONFIG_LIMIT.max_bytes() + 1)       # sparse: no disk used, nothing read
    with pytest.raises(UnreadableFile) as info:
        read_limited(big, CONFIG_LIMIT)
    assert "over the 16 MB cap on a config" in info.value.message
    assert "DRAFTBENCH_MAX_CONFIG_MB=" in info.value.fix
    monkeypatch.setenv("DRAFTBENCH_MAX_CONFIG_MB", "0.001")
    small = tmp_path / "small.json"
    small.write_bytes(b"x" * 2000)
    with pytest.raises(UnreadableFile, match="is 2,000 bytes, over the 1,000 bytes cap"):
        read_limited(small, CONFIG_LIMIT)
    monkeypatch.setenv("DRAFTBENCH_MAX_CONFIG_MB", "1")
    assert read_limited(small, CONFIG_LIMIT) == b"x" * 2000


def test_a_file_that_says_it_is_empty_is_still_read_only_up_to_the_cap(monkeypatch):
    # /proc files report size 0 and may be longer: the read itself stops at the cap
    monkeypatch.setenv("DRAFTBENCH_MAX_SMALL_FILE_MB", "0.0001")
    from draftbench.common.reading import SMALL_LIMIT
    with pytest.raises(UnreadableFile, match="grew past the 100 bytes cap"):
        read_limited("/proc/self/maps", SMALL_LIMIT)


def test_a_symlink_loop_has_its_own_message(tmp_path):
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    with pytest.raises(UnreadableFile, match="symbolic link that loops"):
        read_limited(loop, RESULTS_LIMIT)
    with pytest.raises(ResultsFileError) as info:
        load_results(loop)
    assert "loops" in info.value.message and "disk space" not in str(info.value)


def test_a_gzip_bomb_stops_at_the_cap(monkeypatch):
    monkeypatch.setenv("DRAFTBENCH_MAX_RESULTS_MB", "1")
    bomb = gzip.compress(b"\0" * 50_000_000)       # 50 MB of zeros in ~50 kB
    with pytest.raises(UnreadableFile, match=r"decompresses to more than the 1\.0 MB cap"):
        gunzip_limited(bomb, RESULTS_LIMIT)
    with pytest.raises(UnreadableFile, match=r"damaged|cut short"):
        gunzip_limited(gzip.compress(b"{}")[:-6], RESULTS_LIMIT)


# ---------------------------------------------------------------------------- results files

def test_results_files_that_are_fifos_or_devices_are_refused_by_every_command(tmp_path, fifo):
    for args in (["--chart-only", "--results", str(fifo)],
                 ["--results", str(fifo), "--export", "csv"],
                 ["--compare", str(fifo), str(fifo.with_name("other.json"))],
                 ["--results", "/dev/zero", "--export", "md"],
                 ["--results", str(fifo), "--redact-paths"]):
        start = time.monotonic()
        code, error = sweep(*args)
        assert code in (1, 2) and ("named pipe (FIFO)" in error or "character device" in error), (args, error)
        assert time.monotonic() - start < WATCHDOG_S


def test_a_gzipped_results_file_is_read_and_never_resumed_into(tmp_path):
    plain = tmp_path / "r.json"
    plain.write_text(json.dumps(good_results()))
    packed = tmp_path / "r.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert load_results(packed).results == load_results(plain).results
    with pytest.raises(ResultsFileError) as info:
        load_results(packed, allow_gzip=False)
    assert "is gzip-compressed" in info.value.message and "gunzip -k" in info.value.fix
    assert "permissions" not in str(info.value)


def test_chart_only_on_dev_zero_is_refused_before_anything_is_written(tmp_path):
    proc = run_cli("sweep.py", "--chart-only", "--results", "/dev/zero", "--chart", str(tmp_path / "r.html"),
                   timeout=WATCHDOG_S * 3)
    assert_clean_error(proc, 2, "--results /dev/zero is a character device, not a regular file")
    assert not (tmp_path / "r.html").exists()


# ---------------------------------------------------------------------------- configs and prompt files

def test_a_config_that_is_a_fifo_or_a_device_is_a_config_error(fifo):
    for path, what in ((fifo, "named pipe"), ("/dev/zero", "character device")):
        with pytest.raises(ConfigError, match=what):
            bounded(load_config, path)


def test_a_config_dir_with_a_fifo_names_it_and_runs_the_rest(tmp_path, tripwire):  # noqa: F811
    exe, marker = tripwire
    folder = tmp_path / "configs"
    folder.mkdir()
    valid = {"name": "a", "hardware": "h", "targets": [{"label": "T", "path": "t.gguf"}],
             "settings": {"llama_bin": str(exe)}}
    (folder / "a.json").write_text(json.dumps(valid))
    os.mkfifo(folder / "b.json")
    (folder / "c.json").write_text(json.dumps({**valid, "name": "c"}))
    proc = run_cli("sweep.py", "--config-dir", str(folder), "--dry-run", timeout=WATCHDOG_S * 3, cwd=tmp_path)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 2
    assert "b.json: 1 problem" in proc.stderr and "named pipe (FIFO)" in proc.stderr
    assert "a.json: valid." in proc.stdout and "c.json: valid." in proc.stdout
    assert not marker.exists()


@pytest.mark.parametrize("make, message", [
    (lambda tmp: os.mkfifo(tmp / "p.jsonl") or tmp / "p.jsonl", "is a named pipe (FIFO)"),
    (lambda tmp: Path("/dev/zero"), "is a character device"),
    (lambda tmp: _sparse(tmp / "p.txt", 1_000_000_000), "is 1.0 GB, over the 64 MB cap on a prompt file"),
], ids=["fifo", "dev-zero", "1GB"])
def test_a_prompt_file_that_cannot_be_prompts_is_refused_at_once(tmp_path, make, message):
    path = make(tmp_path)
    with pytest.raises(UsageError, match=re.escape(message)):
        bounded(load_prompt_file, path)
    problems: list = []
    data = {"name": "x", "hardware": "h", "targets": [{"label": "T", "path": "t.gguf"}],
            "settings": {"prompts": str(path)}}
    with pytest.raises(ConfigError) as info:
        bounded(validate_config, data, source="c.json", base_dir=str(tmp_path))
    problems = info.value.problems
    assert [p.path for p in problems] == ["$.settings.prompts"] and message in problems[0].message
    assert "does not exist" not in problems[0].message


def _sparse(path: Path, size: int) -> Path:
    with open(path, "ab") as fh:
        fh.truncate(size)
    return path


# ---------------------------------------------------------------------------- the results folder, scanned

def test_estimates_read_only_our_own_results_files_and_never_wait(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    os.mkfifo(folder / "a-fifo.json")
    (folder / "b-huge-unrelated.json").write_bytes(b'{"data": [' + b"1," * 1000 + b"1]}")
    _sparse(folder / "b-huge-unrelated.json", 442_000_000)     # another tool's 442 MB JSON (sparse: no disk used)
    (folder / "c-upstream.json").write_text(json.dumps({"hardware": "box", "results": []}))
    ours = ResultsFile(name="old", hardware="box", backend="llamacpp", model_family="", settings={},
                       results=(Row(target="7B", role="baseline", mean_total_time=30.0, load_time_s=10.0),))
    save_results(ours, folder / "d-ours.json")
    save_results(replace(ours, hardware="other"), folder / "e-other-hardware.json")
    config = validate_config({"name": "est", "hardware": "box", "targets": [{"label": "7B", "path": "/m/t.gguf"}],
                              "settings": {"runs": 1, "prompts": ["code"]}}, source="c.json", base_dir=str(tmp_path))
    estimator = bounded(Estimator.for_results_path, config, 1, folder / "new.json")
    assert [r.name for r in estimator.history] == ["old"] and estimator.history[0].hardware == "box"
    assert not peek_header(folder / "b-huge-unrelated.json").is_results      # judged from its first 256 kB
    assert peek_header(folder / "d-ours.json").ours and not peek_header(folder / "c-upstream.json").ours


# ---------------------------------------------------------------------------- child processes

def test_a_child_that_never_stops_printing_is_cut_at_the_cap():
    start = time.monotonic()
    run = run_capped([sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"],
                     timeout_s=WATCHDOG_S, max_bytes=1_000_000)
    assert run.over_cap and not run.timed_out and len(run.output) == 1_000_000
    assert time.monotonic() - start < WATCHDOG_S


def test_a_child_that_never_ends_is_stopped_at_its_time_limit():
    run = run_capped([sys.executable, "-c", "import time; print('hello', flush=True); time.sleep(600)"],
                     timeout_s=0.5, max_bytes=1_000_000)
    assert run.timed_out and run.returncode is None and run.output == "hello\n"


def test_a_llama_bin_whose_help_never_ends_is_one_clear_error(tmp_path, monkeypatch):
    from draftbench.backends.llamacpp.command import capabilities
    monkeypatch.setenv("DRAFTBENCH_CACHE", str(tmp_path / "cache"))
    endless = tmp_path / "llama-server"
    endless.write_text(f"#!{sys.executable}\nimport sys\nwhile True: sys.stdout.write('  --flag  help text\\n' * 4096)\n")
    endless.chmod(0o755)
    with pytest.raises(DraftbenchError) as info:
        bounded(capabilities, str(endless))
    assert "--help printed more than 4 MB and was stopped" in info.value.message
    assert "settings.llama_bin" in (info.value.fix or "")
