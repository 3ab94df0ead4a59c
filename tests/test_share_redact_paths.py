"""--redact-paths: results that can be posted publicly, without the home directory; inputs untouched."""

from __future__ import annotations

import json

import pytest
from draftbench.results.file import load_results, save_results
from draftbench.share.redact_paths import redact_path_text, redact_paths

from helpers import run_cli
from share_data import box_a, box_b


@pytest.mark.parametrize("text, expected", [
    ("/Users/alex/Code/ml/llama.cpp/build/bin/llama-server", "llama-server"),
    ("model file /home/alex/models/q.gguf does not exist — fix: download it", "model file q.gguf does not exist — fix: download it"),
    ("--lora=/home/alex/l.bin", "--lora=l.bin"),
    ("~/.cache/draftbench/models/a.gguf", "a.gguf"),
    ("C:\\Users\\bob\\models\\q.gguf", "q.gguf"),
    ("/home/alex", "~"),
    ('"/opt/models/y.gguf"', '"y.gguf"'),
    # left alone: addresses, endpoints, relative paths, model ids
    ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
    ("GET /health", "GET /health"),
    ("results/box.logs/001-7B.log", "results/box.logs/001-7B.log"),
    ("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"),
])
def test_paths_become_file_names_and_homes_tilde(text, expected):
    assert redact_path_text(text) == expected


def test_generated_text_and_keys_are_kept():
    data = {"/home/alex/key": "/home/alex/x.gguf", "requests": [{"text": "#!/usr/bin/env python"}],
            "equivalence": {"mismatches": [{"baseline_excerpt": "/usr/bin", "candidate_excerpt": "/usr/lib"}]}}
    out = redact_paths(data)
    assert out == {"/home/alex/key": "x.gguf", "requests": [{"text": "#!/usr/bin/env python"}],
                   "equivalence": {"mismatches": [{"baseline_excerpt": "/usr/bin", "candidate_excerpt": "/usr/lib"}]}}


def test_redacted_copy_has_no_home_and_the_original_is_untouched(tmp_path):
    source = tmp_path / "a.json"
    save_results(box_a(), source)
    before = source.read_bytes()
    assert b"/home/alex" in before
    proc = run_cli("sweep.py", "--results", str(source), "--redact-paths")
    assert proc.returncode == 0, proc.stderr
    copy = tmp_path / "a.shared.json"
    assert f"to {copy} (the original is unchanged)" in proc.stdout
    assert source.read_bytes() == before
    text = copy.read_text()
    assert "/home/alex" not in text and "alex" not in text
    data = json.loads(text)
    assert data["redacted_paths"] is True
    row = data["results"][1]
    assert row["draft_path"] == "qwen2.5-0.5b-q8_0.gguf" and row["server"]["command"][0] == "llama-server"
    assert data["settings"]["llama_bin"] == "llama-server"
    # it loads, and every measurement is as it was
    original, shared = load_results(source), load_results(copy)
    assert [r.mean_tps for r in shared.results] == [r.mean_tps for r in original.results]
    assert [r.requests for r in shared.results] == [r.requests for r in original.results]
    # writing it again replaces the previous redacted copy, never a real results file
    assert run_cli("sweep.py", "--results", str(source), "--redact-paths").returncode == 0
    save_results(box_b(), tmp_path / "b.json")
    proc = run_cli("sweep.py", "--results", str(source), "--redact-paths", "--output", str(tmp_path / "b.json"))
    assert proc.returncode == 2 and "is an existing results file; it is never overwritten" in proc.stderr


def test_exports_and_comparisons_can_be_redacted(tmp_path):
    save_results(box_a(), tmp_path / "a.json")
    save_results(box_b(), tmp_path / "b.json")
    a, b = str(tmp_path / "a.json"), str(tmp_path / "b.json")
    proc = run_cli("sweep.py", "--results", a, "--export", "json", "--redact-paths")
    assert proc.returncode == 0 and json.loads(proc.stdout)["meta"]["source"] == "a.json"
    assert str(tmp_path) not in proc.stdout
    chart = tmp_path / "cmp.html"
    proc = run_cli("sweep.py", "--compare", a, b, "--redact-paths", "--export", "csv", "--output",
                   str(tmp_path / "cmp.csv"), "--chart", str(chart))
    assert proc.returncode == 0, proc.stderr
    assert "/home/alex" not in chart.read_text() and str(tmp_path) not in chart.read_text()
    assert "A  a.json — box-a" in proc.stdout


def test_a_shared_copy_carries_no_secret(tmp_path):
    """An older or upstream file may hold a server command with its API key: the copy masks it."""
    source = tmp_path / "old.json"
    data = box_a().to_dict()
    data["results"][1]["server"]["command"] += ["--api-key", "sk-live-1234567", "--hf-token=hf_abcdefgh"]
    source.write_text(json.dumps(data))
    proc = run_cli("sweep.py", "--results", str(source), "--redact-paths")
    assert proc.returncode == 0, proc.stderr
    command = json.loads((tmp_path / "old.shared.json").read_text())["results"][1]["server"]["command"]
    assert command[-3:] == ["--api-key", "***", "--hf-token=***"]
    assert "sk-live" not in (tmp_path / "old.shared.json").read_text()
    assert list(redact_paths(["see", "/home/alex/notes.txt"])) == ["see", "notes.txt"]   # plain lists: paths only
