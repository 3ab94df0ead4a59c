"""Broken and hostile input files: a named error, never a traceback, and the batch goes on.

Results files with a wrong type anywhere, configs nested 100k deep, GGUF metadata nested
thousands deep, unparseable files in a --config-dir batch. The CLI cases run the real
sweep.py; those that must not start a server use a tripwire binary that records any start.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import pytest
from draftbench.common.errors import ModelFileError, ResultsFileError
from draftbench.common.gguf import read_info
from draftbench.results.file import RequestRecord, ResultsFile, Row, load_results, save_results
from draftbench.results.schema import MAX_FREE_DEPTH, first_problem

from helpers import REFERENCE, run_cli, tiny_gguf
from test_cli_sweep_cli_config_errors import tripwire  # noqa: F401  (fixture)


def assert_clean_error(proc, code: int, *needles: str, limit_s: float | None = None) -> None:
    """One ``Error:`` message, the documented exit code, no traceback."""
    out = proc.stdout + proc.stderr
    assert proc.returncode == code, out
    assert "Traceback" not in out, out
    assert proc.stderr.startswith("Error: ") or "\nError: " in proc.stderr, out
    for needle in needles:
        assert needle in proc.stderr, f"{needle!r} not in:\n{proc.stderr}"


# ---------------------------------------------------------------------------- results files

def good_results() -> dict:
    request = RequestRecord(prompt_id="code-1", category="code", run=0, ttft_s=0.1, total_s=1.0, decode_tps=30.0,
                            completion_tokens=32, text="def f(): pass")
    rows = (Row(target="T", mean_tps=30.0, requests=(request,), server={"backend": "llamacpp", "command": ["x"],
                                                                        "version": "1", "port": 8080}),
            Row(target="T", draft="D", role="speculative", draft_max=8, mean_tps=40.0, acceptance_rate=0.7,
                speculation_active=True, requests=(request,), tps={"n": 1, "mean": 40.0, "cv": None},
                warnings=("w",)))
    rf = ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="f", settings={"runs": 1},
                     results=rows, timestamp="2026-01-01T00:00:00+00:00", host={"os": "linux", "memory_gb": 16},
                     config={"targets": [{"label": "T", "path": "/t"}], "drafts": [], "measurement": {}})
    return json.loads(json.dumps(rf.to_dict()))


def set_path(data: dict, path: str, value) -> dict:
    """Set ``$.a.b[0].c`` in ``data``."""
    import re
    parts = re.findall(r"\.([A-Za-z_0-9]+)|\[(\d+)\]", path[1:])
    node = data
    for key, index in parts[:-1]:
        node = node[key] if key else node[int(index)]
    key, index = parts[-1]
    node[key if key else int(index)] = value
    return data


def nested(depth: int):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


WRONG_TYPES = [
    ("$.results[1].draft_max", "eight", "must be an integer of at least 0 or null, not string \"eight\""),
    ("$.results[0].server", "llama", "must be an object or null, not string \"llama\""),
    ("$.timestamp", 12345, "must be a string or null, not integer 12345"),
    ("$.results[0].requests[0].text", 12345, "must be a string or null, not integer 12345"),
    ("$.results[0].requests[0].run", None, "must be an integer, not null"),
    ("$.results[1].tps.mean", "fast", "must be a finite number of at least -10,000,000 or null"),
    ("$.results[1].speedup", [], "must be an object or null, not a list"),
    ("$.results[1].status", "great", "must be one of 'ok', 'error', 'skipped'"),
    ("$.results[1].role", "hero", "must be one of 'baseline'"),
    ("$.results[1].warnings[0]", 5, "must be a string or an object, not integer 5"),
    ("$.results[1].mean_tps", True, "must be a finite number of at least 0 or null, not true"),
    ("$.results[1].speculation_active", "yes", "must be true or false or null"),
    ("$.results[0].server.command[0]", 1, "must be a string, not integer 1"),
    ("$.settings.temperature", "hot", "must be a finite number or a list or null"),
    ("$.host.memory_gb", "16", "must be a finite number or null"),
    ("$.config.targets[0]", {"label": "T"}, None),     # $.config.targets[0].path is missing
    ("$.results[1].custom_key", nested(MAX_FREE_DEPTH + 5), f"is nested more than {MAX_FREE_DEPTH} levels deep"),
]


@pytest.mark.parametrize("path, value, message", WRONG_TYPES, ids=[w[0] for w in WRONG_TYPES])
def test_a_wrong_type_anywhere_is_refused_with_its_json_path(tmp_path, path, value, message):
    data = set_path(good_results(), path, value)
    file = tmp_path / "r.json"
    file.write_text(json.dumps(data))
    before = file.read_bytes()
    with pytest.raises(ResultsFileError) as info:
        load_results(file)
    if message is None:
        path, message = path + ".path", "is missing"
    assert f"{file}: {path} {message}" in info.value.message
    assert info.value.fix and file.read_bytes() == before


def test_good_upstream_and_reference_files_pass_the_declared_types():
    assert first_problem(good_results()) is None
    upstream = sorted(REFERENCE.glob("*.json"))      # upstream's own files, kept in the repository
    assert upstream
    for path in upstream:
        assert first_problem(json.loads(path.read_text())) is None, path
        load_results(path)


def test_non_finite_numbers_are_refused_where_a_number_is_declared(tmp_path):
    file = tmp_path / "r.json"
    file.write_text(json.dumps(good_results()).replace('"mean_tps": 40.0', '"mean_tps": NaN'))
    with pytest.raises(ResultsFileError, match=r"\$\.results\[1\]\.mean_tps must be a finite number of at least 0 or null, not nan"):
        load_results(file)


def test_a_file_nested_100k_deep_is_refused(tmp_path):
    file = tmp_path / "deep.json"
    file.write_text('{"results": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    with pytest.raises(ResultsFileError, match="nested too deeply"):
        load_results(file)


def test_unknown_keys_are_kept_and_the_file_saves_again(tmp_path):
    data = good_results()
    data["results"][0]["custom"] = nested(MAX_FREE_DEPTH - 1)
    file = tmp_path / "r.json"
    file.write_text(json.dumps(data))
    save_results(load_results(file), file)
    assert json.loads(file.read_text())["results"][0]["custom"] == nested(MAX_FREE_DEPTH - 1)


@pytest.mark.parametrize("path, value, message", [WRONG_TYPES[0], WRONG_TYPES[1], WRONG_TYPES[2], WRONG_TYPES[3]],
                         ids=["draft_max", "server", "timestamp", "text"])
def test_chart_only_refuses_a_file_with_a_wrong_type(tmp_path, path, value, message):
    file = tmp_path / "r.json"
    file.write_text(json.dumps(set_path(good_results(), path, value)))
    before = file.read_bytes()
    start = time.monotonic()
    proc = run_cli("sweep.py", "--chart-only", "--results", str(file), timeout=60)
    assert time.monotonic() - start < 60
    assert_clean_error(proc, 1, path, message)
    assert file.read_bytes() == before and not file.with_suffix(".html").exists()


# ---------------------------------------------------------------------------- configs

def test_a_config_nested_100k_deep_is_a_config_error(tmp_path, tripwire):  # noqa: F811
    config = tmp_path / "deep.json"
    config.write_text('{"name": "x", "targets": ' + "[" * 100_000 + "]" * 100_000 + "}")
    proc = run_cli("sweep.py", "--config", str(config), timeout=60)
    assert_clean_error(proc, 2, "nested too deeply")
    assert not tripwire[1].exists()


def test_a_prompt_file_nested_deep_is_a_config_error(tmp_path, tripwire):  # noqa: F811
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "ok"}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    config = {"name": "x", "hardware": "h", "targets": [{"label": "T", "path": "t.gguf"}],
              "settings": {"llama_bin": str(tripwire[0]), "prompts": str(prompts)}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    proc = run_cli("sweep.py", "--config", str(path), "--dry-run", timeout=60)
    assert_clean_error(proc, 2, "$.settings.prompts", "p.jsonl:2: nested too deeply")


def test_a_config_dir_batch_names_every_broken_file_and_runs_the_rest(tmp_path, tripwire):  # noqa: F811
    exe, marker = tripwire
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "a-deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (folder / "b-binary.json").write_bytes(b"\xff\xfe\x00\x01garbage")
    (folder / "c-syntax.json").write_text('{"name": "c", ')
    (folder / "d-label.json").write_text(json.dumps({"name": "d", "targets": [{"label": "\u200b", "path": "t"}]}))
    (folder / "e-surrogate.json").write_text('{"name": "e", "targets": [{"label": "x\\ud800", "path": "t"}]}')
    (folder / "f-name.json").write_text(json.dumps({"name": "n" * 300, "targets": [{"label": "T", "path": "t"}]}))
    valid = {"name": "z", "hardware": "h", "targets": [{"label": "T", "path": "t.gguf"}],
             "settings": {"llama_bin": str(exe)}}
    (folder / "z-valid.json").write_text(json.dumps(valid))
    tiny_gguf(folder / "t.gguf")          # the dry run checks the model file
    proc = run_cli("sweep.py", "--config-dir", str(folder), "--dry-run", timeout=120, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out
    assert proc.returncode == 2, out
    assert "z-valid.json: valid." in proc.stdout                     # the batch went on to the last one
    assert "nested too deeply" in proc.stderr and "not UTF-8" in proc.stderr and "invalid JSON" in proc.stderr
    assert "invisible" in proc.stderr and "lone surrogate" in proc.stderr and "300 characters" in proc.stderr
    summary = proc.stdout.split("=== Config summary ===")[1]
    for name in ("a-deep", "b-binary", "c-syntax", "d-label", "e-surrogate", "f-name"):
        assert f"{name}.json: INVALID CONFIG" in summary
    assert "z-valid.json: ok" in summary
    assert not marker.exists() and not (tmp_path / "results").exists()


# ---------------------------------------------------------------------------- GGUF files

def nested_gguf(path: Path, depth: int) -> Path:
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 4) + b"deep" + struct.pack("<I", 9)
    body = struct.pack("<IQ", 9, 1) * depth + struct.pack("<IQ", 0, 0)
    path.write_bytes(head + body)
    return path


def test_gguf_metadata_nested_thousands_deep_is_a_named_error(tmp_path):
    with pytest.raises(ModelFileError, match="nested more than 16 deep"):
        read_info(nested_gguf(tmp_path / "deep.gguf", 5000))
    assert read_info(nested_gguf(tmp_path / "ok.gguf", 3)).metadata["deep"] == [[[[]]]]


@pytest.mark.llama
def test_a_nested_gguf_is_an_error_row_and_the_next_combination_runs(tmp_path, models):
    from draftbench.lifetime.process import free_port
    config = {"name": "x", "hardware": "h",
              "targets": [{"label": "deep", "path": str(nested_gguf(tmp_path / "deep.gguf", 5000))},
                          {"label": "real", "path": models["target-2x"]}],
              "settings": {"runs": 1, "stages": 1, "max_tokens": 8, "gpu_layers": 0, "ctx_size": 512, "prompts": ["code"],
                           "warmup": 0, "port": free_port()}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    results = tmp_path / "r.json"
    proc = run_cli("sweep.py", "--config", str(path), "--results", str(results), "--no-chart")
    assert proc.returncode == 3, proc.stdout + proc.stderr                # finished, with an error row
    assert "Traceback" not in proc.stdout + proc.stderr
    deep, real = json.loads(results.read_text(), parse_constant=pytest.fail)["results"]
    assert deep["status"] == "error" and "nested more than 16 deep" in deep["reason"]
    assert real["status"] == "ok" and real["mean_tps"] > 0
    assert "nested more than 16 deep" in proc.stdout.split("did not produce a measurement")[1]   # the summary
