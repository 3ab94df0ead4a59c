"""draftbench.common.gguf: reading GGUF headers from tiny files forged in tmp_path, and naming what is wrong."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from draftbench.common.errors import ModelFileError
from draftbench.common.gguf import ArraySummary, format_params, read_info, read_metadata, trained_context

# --------------------------------------------------------------------------- a tiny raw GGUF writer

U8, I32, U32, F32, BOOL, STRING, ARRAY, U64 = 0, 5, 4, 6, 7, 8, 9, 10


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def _value(vtype: int, value) -> bytes:
    if vtype == STRING:
        return _str(value)
    if vtype == ARRAY:
        item_type, items = value
        return struct.pack("<IQ", item_type, len(items)) + b"".join(_value(item_type, v) for v in items)
    return struct.pack({U8: "<B", I32: "<i", U32: "<I", F32: "<f", BOOL: "<?", U64: "<Q"}[vtype], value)


def gguf_bytes(kv: list[tuple[str, int, object]] = (), tensors: list[tuple[str, tuple[int, ...]]] = (),
               version: int = 3, alignment: int = 32) -> bytes:
    """A complete little-endian GGUF file with F32 tensors of the given shapes (zeros)."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kv))
    for key, vtype, value in kv:
        out += _str(key) + struct.pack("<I", vtype) + _value(vtype, value)
    offset, infos = 0, b""
    sizes = []
    for name, dims in tensors:
        n = 1
        for d in dims:
            n *= d
        infos += _str(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        infos += struct.pack("<IQ", 0, offset)   # type 0 = F32
        sizes.append(n * 4)
        offset += (n * 4 + alignment - 1) // alignment * alignment
    out += infos
    out += b"\0" * ((-len(out)) % alignment)
    for size in sizes:
        out += b"\0" * size + b"\0" * ((-size) % alignment)
    return out


def vocab_kv(tokens: list[str], model: str = "gpt2") -> list:
    return [("tokenizer.ggml.model", STRING, model), ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens))]


def forge(tmp_path: Path, name: str = "m.gguf", **kwargs) -> Path:
    p = tmp_path / name
    p.write_bytes(gguf_bytes(**kwargs))
    return p


# --------------------------------------------------------------------------- reading

def test_reads_metadata_and_tensor_counts(tmp_path):
    kv = [("general.architecture", STRING, "llama"), ("general.name", STRING, "Tiny"),
          ("llama.block_count", U32, 2), ("llama.rope.freq_base", F32, 10000.0), ("general.flag", BOOL, True),
          ("general.tags", ARRAY, (STRING, ["a", "b"]))]
    path = forge(tmp_path, kv=kv, tensors=[("tok_embd.weight", (8, 16)), ("output_norm.weight", (8,))])
    info = read_info(path)
    assert info.version == 3 and info.n_tensors == 2
    assert info.n_params == 8 * 16 + 8
    assert info.architecture == "llama" and info.get("general.name") == "Tiny"
    assert info.get("llama.block_count") == 2 and info.get("general.flag") is True
    assert info.get("llama.rope.freq_base") == pytest.approx(10000.0)
    assert info.get("general.tags") == ["a", "b"] and info.get("missing", "x") == "x"
    assert info.file_size == path.stat().st_size and info.data_end < info.file_size
    assert read_metadata(path) == info.metadata


def test_trained_context_is_the_architectures_context_length(tmp_path):
    arch = [("general.architecture", STRING, "llama")]
    assert trained_context(read_info(forge(tmp_path, "a.gguf", kv=[*arch, ("llama.context_length", U32, 8192)]))) == 8192
    assert trained_context(read_info(forge(tmp_path, "b.gguf", kv=arch))) is None          # not said: unknown
    other = [("general.architecture", STRING, "qwen2"), ("llama.context_length", U32, 4096)]
    assert trained_context(read_info(forge(tmp_path, "c.gguf", kv=other))) is None         # another architecture's key
    assert trained_context(read_info(forge(tmp_path, "d.gguf", kv=[*arch, ("llama.context_length", BOOL, True)]))) is None


def test_size_label_from_metadata_or_parameter_count(tmp_path):
    labelled = read_info(forge(tmp_path, "a.gguf", kv=[("general.size_label", STRING, "135M")],
                               tensors=[("w", (4, 4))]))
    assert labelled.size_label == "135M"
    counted = read_info(forge(tmp_path, "b.gguf", tensors=[("w", (100, 30)), ("v", (500,))]))
    assert counted.n_params == 3500 and counted.size_label == "4K"
    empty = read_info(forge(tmp_path, "c.gguf", kv=[("general.size_label", STRING, "")]))
    assert empty.n_params == 0 and empty.size_label is None


@pytest.mark.parametrize("n,label", [(135_000_000, "135M"), (1_500_000_000, "1.5B"), (7_000_000_000, "7B"),
                                     (72_700_000_000, "72.7B"), (999_600_000, "1B"), (999_400_000, "999M"),
                                     (56_800_000, "57M"), (4_200, "4K"), (999_700, "1M"), (12, "12")])
def test_format_params(n, label):
    assert format_params(n) == label


def test_vocab_signature_same_vocab_same_signature(tmp_path):
    tokens = [f"tok{i}" for i in range(10)]
    a = read_info(forge(tmp_path, "a.gguf", kv=vocab_kv(tokens), tensors=[("w", (4,))]))
    b = read_info(forge(tmp_path, "b.gguf", kv=[("general.name", STRING, "other")] + vocab_kv(tokens),
                        tensors=[("w", (64, 4))]))
    assert a.vocab_signature() == b.vocab_signature()
    model, count, digest = a.vocab_signature()
    assert (model, count) == ("gpt2", 10) and len(digest) == 64


def test_vocab_signature_differs_for_a_different_vocab(tmp_path):
    tokens = [f"tok{i}" for i in range(10)]
    base = read_info(forge(tmp_path, "a.gguf", kv=vocab_kv(tokens))).vocab_signature()
    renamed = read_info(forge(tmp_path, "b.gguf", kv=vocab_kv(tokens[:-1] + ["other"]))).vocab_signature()
    longer = read_info(forge(tmp_path, "c.gguf", kv=vocab_kv(tokens + ["x"]))).vocab_signature()
    other_model = read_info(forge(tmp_path, "d.gguf", kv=vocab_kv(tokens, model="llama"))).vocab_signature()
    assert len({base, renamed, longer, other_model}) == 4
    assert read_info(forge(tmp_path, "e.gguf")).vocab_signature() is None


def test_large_vocab_is_summarised_consistently(tmp_path):
    tokens = [f"t{i}" for i in range(1000)]
    a = read_info(forge(tmp_path, "a.gguf", kv=vocab_kv(tokens)))
    b = read_info(forge(tmp_path, "b.gguf", kv=vocab_kv(list(tokens))))
    c = read_info(forge(tmp_path, "c.gguf", kv=vocab_kv(tokens[:999] + ["zz"])))
    assert isinstance(a.get("tokenizer.ggml.tokens"), ArraySummary)
    assert a.get("tokenizer.ggml.tokens").count == 1000
    assert a.vocab_signature() == b.vocab_signature() != c.vocab_signature()


def test_short_and_long_arrays_use_the_same_digest(tmp_path):
    # a 64-token vocab is kept as a list, a 65-token one summarised; both digests are of the same kind
    import hashlib
    tokens = [f"t{i}" for i in range(64)]
    sig = read_info(forge(tmp_path, kv=vocab_kv(tokens))).vocab_signature()
    expected = hashlib.sha256("".join(t + "\0" for t in tokens).encode()).hexdigest()
    assert sig == ("gpt2", 64, expected)


def test_files_written_by_the_gguf_package(tmp_path):
    gguf = pytest.importorskip("gguf")
    np = pytest.importorskip("numpy")

    def write(name, tokens):
        path = tmp_path / name
        w = gguf.GGUFWriter(str(path), "llama")
        w.add_size_label("1K") if hasattr(w, "add_size_label") else w.add_string("general.size_label", "1K")
        w.add_tokenizer_model("gpt2")
        w.add_token_list(tokens)
        w.add_tensor("tok_embd.weight", np.zeros((len(tokens), 8), dtype=np.float32))
        w.add_tensor("output_norm.weight", np.ones(8, dtype=np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return path

    a = read_info(write("a.gguf", ["a", "b", "c"]))
    b = read_info(write("b.gguf", ["a", "b", "c"]))
    c = read_info(write("c.gguf", ["a", "b", "d"]))
    assert a.architecture == "llama" and a.size_label == "1K"
    assert a.n_tensors == 2 and a.n_params == 3 * 8 + 8
    assert a.vocab_signature() == b.vocab_signature() != c.vocab_signature()


# --------------------------------------------------------------------------- errors

def error_for(path) -> ModelFileError:
    with pytest.raises(ModelFileError) as info:
        read_info(path)
    err = info.value
    assert str(path) in err.message and err.fix
    return err


def test_missing_file(tmp_path):
    err = error_for(tmp_path / "nope.gguf")
    assert err.problem == "does not exist" and "relative paths" in err.fix


def test_folder(tmp_path):
    err = error_for(tmp_path)
    assert err.problem == "is a folder, not a model file" and ".gguf" in err.fix


def test_not_a_gguf_file(tmp_path):
    p = tmp_path / "model.safetensors"
    p.write_bytes(b'{"__metadata__": {}}' + b"\0" * 64)
    err = error_for(p)
    assert err.problem.startswith("is not a GGUF file (starts with b'{\"__')") and "convert" in err.fix


def test_empty_file(tmp_path):
    p = tmp_path / "empty.gguf"
    p.write_bytes(b"")
    assert error_for(p).problem == "is empty (0 bytes)"


@pytest.mark.parametrize("cut", [6, 20, 40, 70])
def test_truncated_header(tmp_path, cut):
    data = gguf_bytes(kv=vocab_kv(["a", "b"]), tensors=[("w", (4, 4))])
    p = tmp_path / "cut.gguf"
    p.write_bytes(data[:cut])
    assert "truncated" in error_for(p).problem


def test_truncated_tensor_data(tmp_path):
    data = gguf_bytes(tensors=[("a", (64,)), ("b", (64,))])
    p = tmp_path / "cut.gguf"
    p.write_bytes(data[:len(data) - 256 - 10])   # the second tensor's data is missing
    err = error_for(p)
    assert err.problem.startswith("is truncated: its tensors need more than") and "download" in err.fix


def test_corrupt_headers(tmp_path):
    p = tmp_path / "bad.gguf"
    p.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _str("k") + struct.pack("<I", 99))
    assert "unknown metadata value type 99" in error_for(p).problem
    p.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _str("k") + struct.pack("<IQ", STRING, 1 << 40))
    assert "impossible string length" in error_for(p).problem
    p.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + _str("w") + struct.pack("<I", 1 << 30) + b"\0" * 32)
    assert "dimensions (corrupt file)" in error_for(p).problem


def test_old_and_big_endian_versions(tmp_path):
    p = tmp_path / "old.gguf"
    p.write_bytes(b"GGUF" + struct.pack("<I", 1) + b"\0" * 32)
    assert "GGUF version 1" in error_for(p).problem
    p.write_bytes(b"GGUF" + struct.pack(">IQQ", 3, 0, 0))
    assert "big-endian" in error_for(p).problem


def test_bad_alignment_metadata_does_not_crash(tmp_path):
    p = forge(tmp_path, kv=[("general.alignment", STRING, "32")], tensors=[("w", (4,))])
    assert read_info(p).n_params == 4


def test_unreadable_file_is_named(tmp_path, monkeypatch):
    # Tests run as root, where chmod 000 does not stop reading: simulate what a normal user sees.
    from draftbench.common.errors import ModelFileError
    from draftbench.common.gguf import read_info
    model = tmp_path / "locked.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 64)
    monkeypatch.setattr("draftbench.common.gguf.os.access", lambda path, mode: False)
    with pytest.raises(ModelFileError, match="is not readable by this user"):
        read_info(model)


def test_file_that_cannot_be_opened_is_named(tmp_path, monkeypatch):
    from draftbench.common.errors import ModelFileError
    from draftbench.common.gguf import read_info
    model = tmp_path / "gone.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 64)

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr("draftbench.common.gguf.os.open", refuse)
    with pytest.raises(ModelFileError, match="cannot be opened"):
        read_info(model)
