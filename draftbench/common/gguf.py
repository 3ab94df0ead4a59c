"""Read a GGUF file's header without third-party packages.

Used before a server is started, to turn a bad model file into a named error (not a GGUF,
truncated, a folder) instead of a crash minutes into a sweep, to derive size classes for the
report (``general.size_label`` or the parameter count) and to warn early when a draft's
vocabulary cannot match the target's.
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from .errors import ModelFileError
from .reading import kind_of

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
# Arrays longer than this are summarised (count + digest) rather than kept.
_KEEP_ARRAY_ITEMS = 64
# Real files nest arrays at most once or twice; recursion on a file nested thousands deep would
# exhaust the stack.
_MAX_ARRAY_NESTING = 16


@dataclass(frozen=True)
class ArraySummary:
    count: int
    sha256: str


@dataclass(frozen=True)
class GGUFInfo:
    path: str
    version: int
    metadata: dict
    n_tensors: int
    n_params: int
    data_end: int        # bytes the tensor data needs, counted from the file start (lower bound)
    file_size: int

    def get(self, key, default=None):
        return self.metadata.get(key, default)

    @property
    def architecture(self) -> str | None:
        return self.metadata.get("general.architecture")

    @property
    def size_label(self) -> str | None:
        """``general.size_label`` when present, else the parameter count as e.g. ``135M``."""
        label = self.metadata.get("general.size_label")
        if isinstance(label, str) and label:
            return label
        return format_params(self.n_params) if self.n_params else None

    def vocab_signature(self) -> tuple | None:
        tokens = self.metadata.get("tokenizer.ggml.tokens")
        if tokens is None:
            return None
        digest = tokens.sha256 if isinstance(tokens, ArraySummary) else _digest(tokens)
        count = tokens.count if isinstance(tokens, ArraySummary) else len(tokens)
        return (self.metadata.get("tokenizer.ggml.model"), count, digest)


def format_params(n: int) -> str:
    """A parameter count as people write it: ``1.5B``, ``7B``, ``135M``, ``250K``."""
    if n >= 999_500_000:
        return f"{n / 1e9:.1f}B".replace(".0B", "B")
    if n >= 999_500:
        return f"{round(n / 1e6)}M"
    if n >= 1000:
        return f"{round(n / 1e3)}K"
    return str(n)


def _digest(items) -> str:
    """The digest :class:`ArraySummary` keeps, so short and long arrays compare the same way."""
    h = hashlib.sha256()
    for item in items:
        h.update((str(item) + "\0").encode())
    return h.hexdigest()


class _Reader:
    def __init__(self, fh, path, keep_whole: bool = False):
        self.fh, self.path = fh, path
        self.keep_whole = keep_whole      # keep long arrays item by item (not only their digest)

    def read(self, n: int) -> bytes:
        data = self.fh.read(n)
        if len(data) != n:
            raise ModelFileError(self.path, "ends inside its header (truncated download?)",
                                 "download the model again")
        return data

    def scalar(self, vtype: int):
        fmt = _SCALARS[vtype]
        return struct.unpack(fmt, self.read(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        (n,) = struct.unpack("<Q", self.read(8))
        if n > 1 << 30:
            raise ModelFileError(self.path, "holds an impossible string length in its header (corrupt file)",
                                 "download the model again")
        return self.read(n).decode("utf-8", errors="replace")

    def value(self, vtype: int, depth: int = 0):
        if vtype in _SCALARS:
            return self.scalar(vtype)
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            if depth >= _MAX_ARRAY_NESTING:
                raise ModelFileError(self.path, f"holds metadata arrays nested more than {_MAX_ARRAY_NESTING} deep "
                                     "(corrupt or hostile file)", "download the model again from a trusted source")
            (item_type,) = struct.unpack("<I", self.read(4))
            (count,) = struct.unpack("<Q", self.read(8))
            if count <= _KEEP_ARRAY_ITEMS or self.keep_whole:
                return [self.value(item_type, depth + 1) for _ in range(count)]
            digest = hashlib.sha256()
            for _i in range(count):
                item = self.value(item_type, depth + 1)
                digest.update((str(item) + "\0").encode())
            return ArraySummary(count, digest.hexdigest())
        raise ModelFileError(self.path, f"uses unknown metadata value type {vtype} (corrupt file, or a GGUF "
                             "version newer than this tool understands)", "check the file")


def read_info(path: str | os.PathLike, *, keep_whole: tuple[str, ...] = ()) -> GGUFInfo:
    """Parse the header; raise :class:`ModelFileError` naming what is wrong. Arrays longer than
    64 items are kept as a digest, except those named in ``keep_whole``."""
    p = Path(path)
    if not p.exists():
        raise ModelFileError(str(p), "does not exist", "check the path (relative paths are resolved "
                             "against the config file's folder)")
    if p.is_dir():
        raise ModelFileError(str(p), "is a folder, not a model file", "point at the .gguf file inside it")
    if not os.access(p, os.R_OK):
        raise ModelFileError(str(p), "is not readable by this user", f"fix its permissions (chmod a+r {p})")
    st = p.stat()
    kind = kind_of(st.st_mode)
    if kind is not None:     # a FIFO would make the open below wait for ever; /dev/zero would read for ever
        raise ModelFileError(str(p), f"is {kind}, not a model file", "point at the .gguf file saved on disk")
    size = st.st_size
    if size == 0:
        raise ModelFileError(str(p), "is empty (0 bytes)", "download the model again")
    try:
        fh = open(p, "rb")
    except OSError as exc:   # e.g. a network share gone away, or permissions os.access cannot see
        raise ModelFileError(str(p), f"cannot be opened ({exc.strerror or exc})", "check the file and its "
                             "permissions") from None
    with fh:
        r = _Reader(fh, str(p))
        magic = fh.read(4)
        if magic != b"GGUF":
            raise ModelFileError(str(p), f"is not a GGUF file (starts with {magic!r})",
                                 "use a .gguf model (convert others with llama.cpp's convert_hf_to_gguf.py)")
        (version,) = struct.unpack("<I", r.read(4))
        if version >= 1 << 16 and struct.unpack(">I", struct.pack("<I", version))[0] < 1 << 16:
            raise ModelFileError(str(p), "is a big-endian GGUF file, which this machine's llama.cpp cannot load",
                                 "use the little-endian file (or convert it with gguf-convert-endian)")
        if version < 2:
            raise ModelFileError(str(p), f"uses GGUF version {version}, which llama.cpp no longer reads",
                                 "download a current conversion of the model")
        n_tensors, n_kv = struct.unpack("<QQ", r.read(16))
        metadata = {}
        for _ in range(n_kv):
            key = r.string()
            (vtype,) = struct.unpack("<I", r.read(4))
            r.keep_whole = key in keep_whole
            metadata[key] = r.value(vtype)
            r.keep_whole = False
        n_params = 0
        max_offset = 0
        for _ in range(n_tensors):
            r.string()
            (n_dims,) = struct.unpack("<I", r.read(4))
            if n_dims > 8:
                raise ModelFileError(str(p), f"describes a tensor with {n_dims} dimensions (corrupt file)",
                                     "download the model again")
            dims = struct.unpack(f"<{n_dims}Q", r.read(8 * n_dims))
            r.read(4)  # ggml type
            (offset,) = struct.unpack("<Q", r.read(8))
            count = 1
            for d in dims:
                count *= d
            n_params += count
            max_offset = max(max_offset, offset)
        alignment = metadata.get("general.alignment", 32)
        if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment <= 0:
            alignment = 32
        data_start = (fh.tell() + alignment - 1) // alignment * alignment
    data_end = data_start + max_offset
    if n_tensors and data_end >= size:
        raise ModelFileError(str(p), f"is truncated: its tensors need more than {data_end:,} bytes but the "
                             f"file has {size:,}", "download the model again")
    return GGUFInfo(str(p), version, metadata, n_tensors, n_params, data_end, size)


def read_metadata(path) -> dict:
    return read_info(path).metadata


def trained_context(info: GGUFInfo) -> int | None:
    """The context length the model was trained for (``<arch>.context_length``); None where the header
    does not say. A longer ``-c`` needs RoPE scaling and measures another model."""
    value = info.get(f"{info.architecture}.context_length") if info.architecture else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


# llama.cpp's own rule for a usable draft (common/speculative.cpp, common_speculative_are_compatible):
# the same tokenizer type, the same BOS/EOS handling, at most 128 tokens more or fewer, and the same
# token texts from id 5 on. Anything else makes llama-server refuse to speculate with the draft.
VOCAB_MAX_SIZE_DIFFERENCE = 128
VOCAB_CHECK_START_TOKEN_ID = 5
_TOKENS = "tokenizer.ggml.tokens"


def vocab_mismatch(target_path: str | os.PathLike, draft_path: str | os.PathLike) -> str | None:
    """Why llama.cpp would refuse this draft for this target, or None when it would accept it *or
    when we cannot tell* (a field missing from either file): only certain mismatches count."""
    return vocab_mismatch_of(read_with_vocab(target_path), read_with_vocab(draft_path))


def read_with_vocab(path: str | os.PathLike) -> GGUFInfo:
    """:func:`read_info` keeping the whole token list (what :func:`vocab_mismatch_of` compares)."""
    return read_info(path, keep_whole=(_TOKENS,))


def vocab_mismatch_of(target: GGUFInfo, draft: GGUFInfo) -> str | None:
    """:func:`vocab_mismatch` for two headers read with :func:`read_with_vocab`."""
    t_type, d_type = target.get("tokenizer.ggml.model"), draft.get("tokenizer.ggml.model")
    if isinstance(t_type, str) and isinstance(d_type, str) and t_type != d_type:
        return f"the draft's tokenizer is {d_type!r}, the target's {t_type!r}"
    for what in ("bos", "eos"):
        t_add, d_add = target.get(f"tokenizer.ggml.add_{what}_token"), draft.get(f"tokenizer.ggml.add_{what}_token")
        t_id, d_id = target.get(f"tokenizer.ggml.{what}_token_id"), draft.get(f"tokenizer.ggml.{what}_token_id")
        if isinstance(t_add, bool) and isinstance(d_add, bool) and t_add != d_add:
            return f"one model adds a {what.upper()} token and the other does not"
        if t_add is True and d_add is True and isinstance(t_id, int) and isinstance(d_id, int) and t_id != d_id:
            return f"the {what.upper()} tokens differ (id {d_id} in the draft, {t_id} in the target)"
    t_tokens, d_tokens = target.get(_TOKENS), draft.get(_TOKENS)
    if not isinstance(t_tokens, list) or not isinstance(d_tokens, list):
        return None
    if abs(len(t_tokens) - len(d_tokens)) > VOCAB_MAX_SIZE_DIFFERENCE:
        return (f"the vocabularies differ in size by more than {VOCAB_MAX_SIZE_DIFFERENCE} tokens "
                f"({len(d_tokens)} in the draft, {len(t_tokens)} in the target)")
    for i in range(VOCAB_CHECK_START_TOKEN_ID, min(len(t_tokens), len(d_tokens))):
        if t_tokens[i] != d_tokens[i]:
            return f"token {i} differs ({d_tokens[i]!r:.30} in the draft, {t_tokens[i]!r:.30} in the target)"
    return None
