"""draftbench.results.output_paths: never overwrite an input, one writer per results file, nothing raw on the
terminal.

The paths checked directly, then through the real sweep.py. Cases refused before anything starts use a
tripwire llama-server (it records any start). The lock itself: test_results_lock.py.
"""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import pytest
from draftbench.common.errors import UsageError
from draftbench.results.file import ResultsFile, Row, load_results, save_results
from draftbench.results.lock import results_lock
from draftbench.results.output_paths import check_output_paths, logs_dir_for
from draftbench.sweep import Console

from helpers import run_cli, tiny_gguf
from test_cli_sweep_cli_config_errors import tripwire  # noqa: F401  (fixture)
from test_results_file_hostile import assert_clean_error, good_results

RAW_CONTROLS = [chr(c) for c in range(0x20) if chr(c) not in "\n\t"] + [chr(c) for c in range(0x7f, 0xa0)] + \
    ["\u202e", "\u2066"]


def no_raw_controls(text: str) -> bool:
    return not any(c in text for c in RAW_CONTROLS)


def write_config(folder: Path, exe: Path, name: str = "c.json", **top) -> Path:
    config = {"name": "x", "hardware": "h", "targets": [{"label": "T", "path": "t.gguf"}],
              "settings": {"llama_bin": str(exe)}, **top}
    path = folder / name
    path.write_text(json.dumps(config))
    return path


def listing(folder: Path) -> dict:
    return {p.relative_to(folder): (p.is_dir() or p.read_bytes()) for p in sorted(folder.rglob("*"))}


# ---------------------------------------------------------------------------- never overwrite an input

OVERWRITES = [
    # (arguments; {config} is the config's path), what the message says, the paths it names
    (["--results", "out.html"], "ends in .html", ["out.html", "out.json"]),
    (["--results", "X.dat", "--chart", "X.dat"], "are the same file", ["--results X.dat", "--chart X.dat"]),
    (["--chart", "{config}"], "ends in .json", ["c.json"]),
    (["--results", "{config}"], "would destroy the config", ["--results", "the config"]),
    (["--results", "r.json", "--chart", "link.html"], "would destroy the config", ["link.html", "c.json"]),
    (["--results", "r.json", "--chart", "r.logs"], "are the same file", ["--chart r.logs", "the logs folder r.logs"]),
    (["--results", "z.json"], "is a file; draftbench keeps the server logs in a folder", ["z.logs"]),
    (["--results", "r.json", "--chart", "folder.html"], "is a folder, not a file", ["folder.html"]),
    (["--results", "folder.html/r.json", "--chart", "c.cfg/r.html"], "is a file, not a folder", ["c.cfg"]),
    (["--results", "a" * 252 + ".json"], "257 bytes long", ["--results aaaa"]),
]


@pytest.mark.parametrize("args, message, names", OVERWRITES, ids=[" ".join(a)[:40] for a, _, _ in OVERWRITES])
def test_an_output_that_would_destroy_an_input_is_refused_before_anything_starts(tmp_path, tripwire, args,  # noqa: F811
                                                                                   message, names):
    exe, marker = tripwire
    config = write_config(tmp_path, exe)
    (tmp_path / "link.html").symlink_to(config)
    (tmp_path / "z.logs").write_text("not a folder")
    (tmp_path / "folder.html").mkdir()
    (tmp_path / "c.cfg").write_text("{}")
    if "{config}" in args:
        args = [a.replace("{config}", str(config)) for a in args]
    before = listing(tmp_path)
    start = time.monotonic()
    proc = run_cli("sweep.py", "--config", str(config), *args, timeout=60, cwd=tmp_path)
    assert time.monotonic() - start < 60
    assert_clean_error(proc, 2, message, *names)
    assert listing(tmp_path) == before, "something was written"
    assert not marker.exists()


def test_the_config_is_never_the_chart_even_without_a_json_name(tmp_path, tripwire):  # noqa: F811
    exe, _ = tripwire
    config = write_config(tmp_path, exe, name="sweep.conf")
    proc = run_cli("sweep.py", "--config", str(config), "--chart", str(config), timeout=60, cwd=tmp_path)
    assert_clean_error(proc, 2, "would destroy the config", str(config))


@pytest.mark.parametrize("results_name, chart_name, message", [
    ("r.json", "r.json", "ends in .json"),
    ("r.dat", "r.dat", "are the same file"),
    ("r.json", "folder.html", "is a folder"),
])
def test_chart_only_never_writes_over_its_results(tmp_path, results_name, chart_name, message):
    results = tmp_path / results_name
    results.write_text(json.dumps(good_results()))
    (tmp_path / "folder.html").mkdir()
    before = listing(tmp_path)
    proc = run_cli("sweep.py", "--chart-only", "--results", str(results), "--chart", str(tmp_path / chart_name),
                   timeout=60)
    assert_clean_error(proc, 2, message, chart_name)
    assert listing(tmp_path) == before


def test_a_config_dir_never_writes_over_one_of_its_configs(tmp_path, tripwire):  # noqa: F811
    # Run from tmp_path, the default results path of config "x" on "h" is results/h_llamacpp_x.json:
    # exactly where this config lies.
    exe, marker = tripwire
    folder = tmp_path / "results"
    folder.mkdir()
    config = write_config(folder, exe, name="h_llamacpp_x.json")
    before = config.read_bytes()
    proc = run_cli("sweep.py", "--config-dir", str(folder), timeout=60, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "would destroy the config" in proc.stderr and "h_llamacpp_x.json: INVALID CONFIG" in proc.stdout
    assert config.read_bytes() == before and not marker.exists()


def test_two_configs_of_a_batch_never_share_a_results_file(tmp_path, tripwire):  # noqa: F811
    exe, marker = tripwire
    folder = tmp_path / "configs"
    folder.mkdir()
    write_config(folder, exe, name="a.json")
    write_config(folder, exe, name="b.json", model_family="same name and hardware as a.json")
    tiny_gguf(folder / "t.gguf")          # the dry run checks the model file
    proc = run_cli("sweep.py", "--config-dir", str(folder), "--dry-run", timeout=60, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "a.json: valid." in proc.stdout and "b.json: INVALID CONFIG" in proc.stdout
    assert "b.json would write results/h_llamacpp_x.json, the results file of" in proc.stderr
    assert not marker.exists()


def test_results_and_charts_are_written_through_symlinks(tmp_path):
    target = tmp_path / "store" / "real.json"
    target.parent.mkdir()
    rf = ResultsFile.from_dict(good_results())
    save_results(rf, target)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    save_results(rf.with_row(Row(target="T2")), link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert [r.target for r in load_results(target).results] == ["T", "T", "T2"]
    # --chart-only: a linked report is updated where it lies, the link stays a link
    chart_target = tmp_path / "store" / "report.html"
    chart_target.write_text("old")
    (tmp_path / "chart.html").symlink_to(chart_target)
    proc = run_cli("sweep.py", "--chart-only", "--results", str(link), "--chart", str(tmp_path / "chart.html"),
                   timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "chart.html").is_symlink() and "<html" in chart_target.read_text()[:200].lower()


# ---------------------------------------------------------------------------- one writer per results file

def test_a_second_sweep_on_a_locked_file_writes_nothing(tmp_path, tripwire):  # noqa: F811
    exe, marker = tripwire
    config = write_config(tmp_path, exe)
    results = tmp_path / "out" / "r.json"
    with results_lock(results):
        before = listing(tmp_path)
        start = time.monotonic()
        proc = run_cli("sweep.py", "--config", str(config), "--results", str(results), timeout=60)
        assert time.monotonic() - start < 60
        assert_clean_error(proc, 1, f"{results} is in use by process {os.getpid()}", "--results")
        assert listing(tmp_path) == before              # no results, no logs folder, no chart
    assert not marker.exists()


# ---------------------------------------------------------------------------- nothing raw on the terminal

HOSTILE_LABEL = "T\x1b]0;pwned\x07\x1b[31m\x9b2J\u202eevil"


def test_console_output_neutralises_terminal_escapes():
    stream = io.StringIO()
    console = Console(stream)
    console.line(HOSTILE_LABEL)
    console.part("\x1b[2K")
    assert no_raw_controls(stream.getvalue()) and "\\x1b]0;pwned\\x07" in stream.getvalue()


def test_chart_only_prints_hostile_labels_from_a_results_file_safely(tmp_path):
    data = good_results()
    for row in data["results"]:
        row["target"] = HOSTILE_LABEL
    results = tmp_path / "r.json"
    results.write_text(json.dumps(data))
    proc = run_cli("sweep.py", "--chart-only", "--results", str(results), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert no_raw_controls(proc.stdout + proc.stderr) and "\\x1b]0;pwned" in proc.stdout


def test_error_messages_neutralise_terminal_escapes(tmp_path):
    proc = run_cli("sweep.py", "--config", str(tmp_path / "\x1b]0;pwned\x07\x1b[2J.json"), timeout=60)
    assert_clean_error(proc, 2, "file not found")
    assert no_raw_controls(proc.stderr) and "\\x1b]0;pwned\\x07" in proc.stderr


@pytest.mark.llama
def test_a_sweep_prints_hostile_reasons_safely(tmp_path, llama_bin):
    config = {"name": "x", "hardware": "h", "targets": [{"label": "T", "path": "\x1b[2J\x1b]0;pwned\x07.gguf"}],
              "settings": {"llama_bin": llama_bin}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    proc = run_cli("sweep.py", "--config", str(path), "--results", str(tmp_path / "r.json"), "--no-chart",
                   timeout=120)
    assert proc.returncode == 3, proc.stdout + proc.stderr      # the model is missing: skipped
    assert "Skipped:" in proc.stdout and "\\x1b]0;pwned\\x07" in proc.stdout
    assert no_raw_controls(proc.stdout + proc.stderr)


def test_output_paths_resolve_symlinks_and_hard_links(tmp_path):
    results = tmp_path / "r.json"
    results.write_text("{}")
    (tmp_path / "link.html").symlink_to(results)
    with pytest.raises(UsageError, match=r"same file \(.*r\.json\)"):
        check_output_paths(results, tmp_path / "link.html")
    os.link(results, tmp_path / "hard.htm")
    with pytest.raises(UsageError, match="same file"):
        check_output_paths(results, tmp_path / "hard.htm")
    config = tmp_path / "c.cfg"
    config.write_text("{}")
    with pytest.raises(UsageError, match="would destroy the config"):
        check_output_paths(results, config, [config])
    check_output_paths(results, tmp_path / "r.html", [config])         # distinct: fine
    assert logs_dir_for(results).name == "r.logs"


def test_output_paths_that_cannot_work(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="is a file, not a folder"):
        check_output_paths(tmp_path / "file" / "r.json", None)
    with pytest.raises(UsageError, match="bytes long"):
        check_output_paths(tmp_path / ("r" * 251 + ".json"), None)
