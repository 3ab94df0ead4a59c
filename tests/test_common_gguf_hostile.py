"""Issue 36, model headers: reading a GGUF header is bounded in time and memory by what the file really holds
(a sparse file's blocks on disk, the bytes that remain), whatever lengths and counts it claims; the token list
is digested, never kept, and a vocabulary difference is still named token by token."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from draftbench.common.errors import ModelFileError
from draftbench.common.gguf import Vocabulary, read_info, vocab_mismatch

from helpers import run_cli
from test_common_gguf import ARRAY, STRING, U32, _str, forge, vocab_kv


def sparse_gguf(path: Path, apparent: int = 8 << 30) -> Path:
    """A GGUF whose header lists 8 tokens of 1 GiB each, in a file of a few kB on disk and 8 GiB apparent."""
    with open(path, "wb") as fh:
        fh.write(b"GGUF" + struct.pack("<IQQ", 3, 1, 2))
        fh.write(_str("tokenizer.ggml.model") + struct.pack("<I", STRING) + _str("gpt2"))
        fh.write(_str("tokenizer.ggml.tokens") + struct.pack("<IIQ", ARRAY, STRING, 8) + struct.pack("<Q", 1 << 30))
        fh.truncate(apparent)
    return path


def many_tensors(path: Path, claimed: int = 10**12) -> Path:
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, claimed, 0) + b"\0" * 4096)
    return path


def test_a_sparse_file_claiming_gigabyte_tokens_is_refused_before_reading_them(tmp_path):
    path = sparse_gguf(tmp_path / "sparse.gguf")
    if os.stat(path).st_blocks * 512 >= 1 << 30:
        pytest.skip("this file system does not make sparse files")
    with pytest.raises(ModelFileError) as info:
        read_info(path)
    assert "1,073,741,824 bytes" in info.value.problem and "sparse file" in info.value.problem
    assert "on disk" in info.value.problem and info.value.fix


def test_a_header_claiming_a_trillion_tensors_is_refused_from_the_count(tmp_path):
    with pytest.raises(ModelFileError) as info:
        read_info(many_tensors(tmp_path / "t.gguf"))
    assert "1,000,000,000,000 tensors" in info.value.problem and "corrupt or hostile" in info.value.problem


def test_claimed_array_and_entry_counts_are_checked_against_the_bytes_that_remain(tmp_path):
    p = tmp_path / "a.gguf"
    p.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _str("k") + struct.pack("<IIQ", ARRAY, U32, 10**15)
                  + b"\0" * 64)
    with pytest.raises(ModelFileError, match="claims 1,000,000,000,000,000 array items"):
        read_info(p)
    p.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 10**9) + b"\0" * 64)
    with pytest.raises(ModelFileError, match="1,000,000,000 metadata entries"):
        read_info(p)


def test_the_header_cap_is_named_with_its_variable(tmp_path, monkeypatch):
    path = forge(tmp_path, kv=vocab_kv([f"t{i}" for i in range(2000)]), tensors=[("w", (4,))])
    monkeypatch.setenv("DRAFTBENCH_MAX_MODEL_HEADER_MB", "0.001")
    with pytest.raises(ModelFileError, match="DRAFTBENCH_MAX_MODEL_HEADER_MB"):
        read_info(path)
    monkeypatch.delenv("DRAFTBENCH_MAX_MODEL_HEADER_MB")
    assert read_info(path).vocab.count == 2000


def test_the_token_list_is_digested_not_kept(tmp_path):
    info = read_info(forge(tmp_path, kv=vocab_kv([f"t{i}" for i in range(3000)])))
    assert isinstance(info.vocab, Vocabulary) and info.vocab.count == 3000
    # what llama.cpp's rule needs: every length within 128 of the end, and a digest per 1,024 tokens
    assert sorted(info.vocab.tail) == list(range(3000 - 128, 3001)) and len(info.vocab.blocks) == 2
    assert not any(isinstance(v, list) and len(v) > 64 for v in info.metadata.values())


@pytest.mark.parametrize("draft_tokens,expected", [
    ([f"t{i}" for i in range(3000)], None),                                      # the same
    ([f"t{i}" for i in range(2950)], None),                                      # 50 fewer, same texts
    ([f"t{i}" for i in range(2500)] + ["x"] + [f"t{i}" for i in range(2501, 3000)], "token 2500 differs"),
    ([f"t{i}" for i in range(2949)] + ["y"], "token 2949 differs"),              # in the last, partial block
    (["a", "b", "c", "d", "e", "z"] + [f"t{i}" for i in range(6, 3000)], "token 5 differs"),
    (["z"] + [f"t{i}" for i in range(1, 3000)], None),                           # ids below 5 are not compared
    ([f"t{i}" for i in range(2800)], "differ in size by more than 128 tokens"),
])
def test_llama_cpps_vocabulary_rule_from_digests(tmp_path, draft_tokens, expected):
    target = forge(tmp_path, "t.gguf", kv=vocab_kv([f"t{i}" for i in range(3000)]))
    draft = forge(tmp_path, "d.gguf", kv=vocab_kv(draft_tokens))
    why = vocab_mismatch(target, draft)
    assert (why is None) if expected is None else (expected in why)


def test_cli_paths_answer_a_sparse_or_overcounted_header_with_a_named_error(tmp_path):
    sparse, counted = sparse_gguf(tmp_path / "sparse.gguf"), many_tensors(tmp_path / "counted.gguf")
    # bench.py --target: the model check comes before any server is needed
    proc = run_cli("bench.py", "--target", str(sparse), "--spec-type", "ngram-mod", timeout=60, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("Error: --target") and "Traceback" not in proc.stderr
    assert "This is a bug" not in proc.stderr and "impossible string length" in proc.stderr
    # --init: both named as left out, nothing to write
    proc = run_cli("sweep.py", "--init", str(tmp_path), "--config-dir", str(tmp_path / "out"), timeout=60,
                   cwd=tmp_path)
    assert proc.returncode == 2 and "This is a bug" not in proc.stderr
    assert f"{sparse}: holds an impossible string length" in proc.stdout
    assert f"{counted}: is truncated or corrupt: it claims 0 metadata entries and 1,000,000,000,000 tensors" \
        in proc.stdout


def test_dry_run_names_both_headers_at_once(tmp_path):
    import json
    sparse_gguf(tmp_path / "sparse.gguf")
    many_tensors(tmp_path / "counted.gguf")
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"name": "x", "hardware": "h", "targets": [{"label": "t", "path": "sparse.gguf"}],
                                  "drafts": [{"label": "d", "path": "counted.gguf"}]}))
    proc = run_cli("sweep.py", "--config", str(config), "--dry-run", timeout=60, cwd=tmp_path)
    assert proc.returncode == 2 and "This is a bug" not in proc.stderr, proc.stderr
    assert "$.targets[0].path: model file" in proc.stderr and "$.drafts[0].path: model file" in proc.stderr
