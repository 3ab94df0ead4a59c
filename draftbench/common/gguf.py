"""Read a GGUF file's header without third-party packages, bounded by what the file really holds.

Used before a server is started, to turn a bad model file into a named error (not a GGUF,
truncated, a folder) instead of a crash minutes into a sweep, to derive size classes for the
report (``general.size_label`` or the parameter count) and to warn early when a draft's
vocabulary cannot match the target's.

A header says how long its strings and arrays are and how many entries follow, and a file can
say anything: a sparse file of 32 kB on disk can claim 8 GiB and eight 1 GiB tokens, a header can
claim 10¹² tensors. Every length and count is therefore checked against the bytes that remain
*before* anything is read or looped over, and those bytes are bounded three ways (see
:func:`header_budget`): the file's apparent size, the bytes it really has on disk (its allocated
blocks), and a cap on a header (``DRAFTBENCH_MAX_MODEL_HEADER_MB``). Reading takes time and memory
in proportion to the header, never to what it claims. The token list is never kept: only what
llama.cpp's draft rule compares (its length and digests, :class:`Vocabulary`).

:func:`read_metadata` (the key/value pairs) and :func:`read_info` (with the tensor counts) are the
two entry points; a new fact from the header (say, a trained context length) is one key away.
"""

from __future__ import annotations

import errno
import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from .errors import ModelFileError
from .reading import READ_FLAGS, ReadLimit, describe_size, kind_of, open_problem
from .vocabulary import (
    VOCAB_BLOCK,
    VOCAB_CHECK_START_TOKEN_ID,
    VOCAB_MAX_SIZE_DIFFERENCE,
    Vocabulary,
    VocabularyDigest,
)

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
# The fewest bytes one item of each type takes in a file: what a claimed count is checked against.
_MIN_SIZE = {**{t: struct.calcsize(f) for t, f in _SCALARS.items()}, _STRING: 8, _ARRAY: 12}
_MIN_KV = 8 + 4 + 1                 # key length, value type, the smallest value
_MIN_TENSOR = 8 + 4 + 4 + 8         # name length, dimension count, type, offset
# Arrays longer than this are summarised (count + digest) rather than kept.
_KEEP_ARRAY_ITEMS = 64
# Real files nest arrays at most once or twice; recursion on a file nested thousands deep would
# exhaust the stack.
_MAX_ARRAY_NESTING = 16
# The largest single text kept from a header; chat templates, the longest real ones, are ~100 kB.
MAX_HEADER_STRING = 16 << 20
MAX_TENSOR_DIMS = 8
# A real header is ~20 MB at most (a 256k-token vocabulary with its merges and scores).
HEADER_LIMIT = ReadLimit("model header", 128, "DRAFTBENCH_MAX_MODEL_HEADER_MB")
_SCALAR_CHUNK_ITEMS = 1 << 16

_TOKENS = "tokenizer.ggml.tokens"


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
    vocab: Vocabulary | None = None
    data_start: int = 0  # where the tensor data begins: the weights are the bytes from here to the end

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
        tokens = self.metadata.get(_TOKENS)
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


def header_budget(st: os.stat_result) -> tuple[int, str]:
    """The most bytes a header may take, and what set that bound (for the message when it is hit).

    A sparse file (a download still being filled, or one made to look large) reads as zeros past what it
    holds; its allocated blocks, not its apparent size, say how much real header it can have."""
    bounds = [(st.st_size, f"the file is {describe_size(st.st_size)} long")]
    blocks = getattr(st, "st_blocks", 0)
    if blocks:       # 0 where the file system does not say (some network and FUSE file systems)
        on_disk = blocks * 512
        if on_disk < st.st_size:
            bounds.append((on_disk, f"the file has only {describe_size(on_disk)} of data on disk although its "
                                    f"size says {describe_size(st.st_size)} (a sparse file: a download still in "
                                    "progress, or a file made to look large)"))
    cap = HEADER_LIMIT.max_bytes()
    bounds.append((cap, f"a model header is at most {describe_size(cap)} here (real ones are ~20 MB; "
                        f"{HEADER_LIMIT.env_var} raises the cap)"))
    return min(bounds, key=lambda b: b[0])


class _Reader:
    def __init__(self, fh, path: str, size: int, budget: int, why: str, token_range: tuple[int, int] | None = None):
        self.fh, self.path = fh, path
        self.size, self.budget, self.why = size, budget, why
        self.pos = 0
        self.vocab: Vocabulary | None = None
        self.token_range = token_range              # keep the token texts in [start, stop) (a second pass)
        self.kept_tokens: list[str] = []

    @property
    def remaining(self) -> int:
        return self.budget - self.pos

    def corrupt(self, what: str, n: int, *, claim: bool = False) -> ModelFileError:
        """``what`` the header says cannot be there: past the file's end, or past what it holds. ``claim``: a
        count or length the header claims (corrupt), not bytes it is still owed (truncated)."""
        if self.pos + n > self.size and not claim:
            return ModelFileError(self.path, f"ends inside its header (truncated download?): it {what} at byte "
                                  f"{self.pos:,}, but the file is {self.size:,} bytes long", "download the model again")
        if self.pos + n > self.size:
            return ModelFileError(self.path, f"is truncated or corrupt: it {what} at byte {self.pos:,} of its header, "
                                  f"but the file is {self.size:,} bytes long (a cut download, or a corrupt or hostile "
                                  "header)", "download the model again from a trusted source")
        return ModelFileError(self.path, f"{what} at byte {self.pos:,} of its header, but {self.why} (corrupt or "
                              "hostile file)", "download the model again from a trusted source")

    def need(self, n: int, what: str) -> None:
        """Refuse, before reading, ``n`` more bytes the header claims when they cannot be there."""
        if n > self.remaining:
            raise self.corrupt(f"claims {what} (at least {n:,} bytes)", n, claim=True)

    def read(self, n: int) -> bytes:
        if n > self.remaining:
            raise self.corrupt(f"needs {n:,} more bytes", n)
        data = self.fh.read(n)
        if len(data) != n:     # the file shrank while being read
            raise ModelFileError(self.path, "ends inside its header (truncated download?)",
                                 "download the model again")
        self.pos += n
        return data

    def scalar(self, vtype: int):
        fmt = _SCALARS[vtype]
        return struct.unpack(fmt, self.read(struct.calcsize(fmt)))[0]

    def raw_string(self, max_len: int | None = None) -> bytes:
        max_len = MAX_HEADER_STRING if max_len is None else max_len
        (n,) = struct.unpack("<Q", self.read(8))
        if n > self.remaining:
            raise self.corrupt(f"holds an impossible string length ({n:,} bytes)", n, claim=True)
        if n > max_len:
            raise ModelFileError(self.path, f"holds a text of {describe_size(n)} in its header, more than the "
                                 f"{describe_size(max_len)} any model needs (corrupt or hostile file)",
                                 "download the model again from a trusted source")
        return self.read(n)

    def string(self) -> str:
        return self.raw_string().decode("utf-8", errors="replace")

    def count(self, item_type: int, what: str) -> int:
        (n,) = struct.unpack("<Q", self.read(8))
        smallest = _MIN_SIZE.get(item_type)
        if smallest is None:
            raise _unknown_type(self.path, item_type)
        self.need(n * smallest, f"{n:,} {what}")
        return n

    def value(self, vtype: int, depth: int = 0, key: str = ""):
        if vtype in _SCALARS:
            return self.scalar(vtype)
        if vtype == _STRING:
            return self.string()
        if vtype != _ARRAY:
            raise _unknown_type(self.path, vtype)
        if depth >= _MAX_ARRAY_NESTING:
            raise ModelFileError(self.path, f"holds metadata arrays nested more than {_MAX_ARRAY_NESTING} deep "
                                 "(corrupt or hostile file)", "download the model again from a trusted source")
        (item_type,) = struct.unpack("<I", self.read(4))
        count = self.count(item_type, "array items")
        if key == _TOKENS and depth == 0 and item_type == _STRING:
            return self.tokens(count)
        if count <= _KEEP_ARRAY_ITEMS:
            return [self.value(item_type, depth + 1) for _ in range(count)]
        if item_type in _SCALARS:
            return self.scalar_summary(item_type, count)
        digest = hashlib.sha256()
        for _i in range(count):
            digest.update((str(self.value(item_type, depth + 1)) + "\0").encode())
        return ArraySummary(count, digest.hexdigest())

    def scalar_summary(self, item_type: int, count: int) -> ArraySummary:
        """A long numeric array (token scores, types): digested as raw bytes, a chunk at a time."""
        digest, size, left = hashlib.sha256(), _MIN_SIZE[item_type], count
        while left:
            n = min(left, _SCALAR_CHUNK_ITEMS)
            digest.update(self.read(n * size))
            left -= n
        return ArraySummary(count, digest.hexdigest())

    def tokens(self, count: int):
        """The token list: digested, never kept (a list for up to 64 tokens, as any array)."""
        vocab = VocabularyDigest(count)
        whole = hashlib.sha256()
        short: list[str] = []
        low, high = self.token_range or (0, 0)
        for i in range(count):
            raw = self.raw_string()
            text = raw.decode("utf-8", errors="replace")
            whole.update((text + "\0").encode())
            vocab.add(i, raw)
            if count <= _KEEP_ARRAY_ITEMS:
                short.append(text)
            if low <= i < high:
                self.kept_tokens.append(text)
        self.vocab = vocab.result()
        return short if count <= _KEEP_ARRAY_ITEMS else ArraySummary(count, whole.hexdigest())


def _unknown_type(path: str, vtype: int) -> ModelFileError:
    return ModelFileError(path, f"uses unknown metadata value type {vtype} (corrupt file, or a GGUF version newer "
                          "than this tool understands)", "check the file")


def _open(p: Path) -> tuple[int, os.stat_result]:
    """An open descriptor on the regular file ``p``, and its ``fstat``: never waits on a FIFO, never reads a
    device, and checks the file that is open (no window between a check and the read)."""
    if not p.exists() and not p.is_symlink():
        raise ModelFileError(str(p), "does not exist", "check the path (in a config, relative paths "
                             "are resolved against the config file's folder)")
    if p.is_dir():
        raise ModelFileError(str(p), "is a folder, not a model file", "point at the .gguf file inside it")
    if p.exists() and not os.access(p, os.R_OK):
        raise ModelFileError(str(p), "is not readable by this user", f"fix its permissions (chmod a+r {p})")
    try:
        fd = os.open(p, READ_FLAGS)
    except OSError as exc:   # a dangling or looping link, a network share gone away, permissions os.access cannot see
        if exc.errno == errno.ENOENT:
            raise ModelFileError(str(p), "is a symbolic link to a file that does not exist",
                                 "point the link at the model (ls -l shows where it points)") from None
        problem = open_problem(exc, "model file")
        raise ModelFileError(str(p), problem.message if exc.errno == errno.ELOOP else
                             f"cannot be opened ({exc.strerror or exc})", problem.fix) from None
    st = os.fstat(fd)
    kind = kind_of(st.st_mode)
    if kind is not None:     # a FIFO would make a read wait for ever; /dev/zero would read for ever
        os.close(fd)
        raise ModelFileError(str(p), f"is {kind}, not a model file", "point at the .gguf file saved on disk")
    if hasattr(os, "O_NONBLOCK"):
        os.set_blocking(fd, True)
    return fd, st


def _parse(path: str | os.PathLike, token_range: tuple[int, int] | None = None) -> tuple[GGUFInfo, list[str]]:
    p = Path(path)
    fd, st = _open(p)
    size = st.st_size
    if size == 0:
        os.close(fd)
        raise ModelFileError(str(p), "is empty (0 bytes)", "download the model again")
    budget, why = header_budget(st)
    with os.fdopen(fd, "rb") as fh:
        r = _Reader(fh, str(p), size, budget, why, token_range)
        magic = fh.read(4)
        r.pos = len(magic)
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
        r.need(n_kv * _MIN_KV + n_tensors * _MIN_TENSOR, f"{n_kv:,} metadata entries and {n_tensors:,} tensors")
        metadata = {}
        for _ in range(n_kv):
            key = r.string()
            (vtype,) = struct.unpack("<I", r.read(4))
            metadata[key] = r.value(vtype, key=key)
        n_params = 0
        max_offset = 0
        for _ in range(n_tensors):
            r.raw_string()
            (n_dims,) = struct.unpack("<I", r.read(4))
            if n_dims > MAX_TENSOR_DIMS:
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
        data_start = (r.pos + alignment - 1) // alignment * alignment
    data_end = data_start + max_offset
    if n_tensors and data_end >= size:
        raise ModelFileError(str(p), f"is truncated: its tensors need more than {data_end:,} bytes but the "
                             f"file has {size:,}", "download the model again")
    return GGUFInfo(str(p), version, metadata, n_tensors, n_params, data_end, size, r.vocab, data_start), r.kept_tokens


def read_info(path: str | os.PathLike) -> GGUFInfo:
    """Parse the header; raise :class:`ModelFileError` naming what is wrong. Arrays longer than 64 items
    are kept as a digest; the token list always is (its facts are in ``vocab``)."""
    return _parse(path)[0]


def read_metadata(path: str | os.PathLike) -> dict:
    """The header's key/value pairs (long arrays as :class:`ArraySummary`)."""
    return read_info(path).metadata


def trained_context(info: GGUFInfo) -> int | None:
    """The context length the model was trained for (``<arch>.context_length``); None where the header
    does not say. A longer ``-c`` needs RoPE scaling and measures another model."""
    value = info.get(f"{info.architecture}.context_length") if info.architecture else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def read_with_vocab(path: str | os.PathLike) -> GGUFInfo:
    """:func:`read_info`; kept for callers that compare vocabularies (every read has ``vocab`` now)."""
    return read_info(path)


def vocab_mismatch(target_path: str | os.PathLike, draft_path: str | os.PathLike) -> str | None:
    """Why llama.cpp would refuse this draft for this target, or None when it would accept it *or
    when we cannot tell* (a field missing from either file): only certain mismatches count."""
    return vocab_mismatch_of(read_info(target_path), read_info(draft_path))


def vocab_mismatch_of(target: GGUFInfo, draft: GGUFInfo, *, name_token: bool = True) -> str | None:
    """:func:`vocab_mismatch` for two headers already read. ``name_token``: find which token differs
    (reads the two token lists again, a block of 1,024 tokens kept); without it, only that they do."""
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
    t_vocab, d_vocab = target.vocab, draft.vocab
    if t_vocab is None or d_vocab is None:
        return None
    if abs(t_vocab.count - d_vocab.count) > VOCAB_MAX_SIZE_DIFFERENCE:
        return (f"the vocabularies differ in size by more than {VOCAB_MAX_SIZE_DIFFERENCE} tokens "
                f"({d_vocab.count} in the draft, {t_vocab.count} in the target)")
    shared = min(t_vocab.count, d_vocab.count)
    if shared <= VOCAB_CHECK_START_TOKEN_ID or t_vocab.tail.get(shared) == d_vocab.tail.get(shared):
        return None
    return (_first_difference(target, draft, shared) if name_token else None) or \
        f"the token texts differ (llama.cpp compares them from id {VOCAB_CHECK_START_TOKEN_ID} on)"


def _first_difference(target: GGUFInfo, draft: GGUFInfo, shared: int) -> str | None:
    """Which token differs first: the first 1,024-token block whose digests differ, read again from both."""
    assert target.vocab is not None and draft.vocab is not None
    full_blocks = (shared - VOCAB_CHECK_START_TOKEN_ID) // VOCAB_BLOCK
    block = next((i for i in range(full_blocks) if target.vocab.blocks[i] != draft.vocab.blocks[i]), full_blocks)
    start = VOCAB_CHECK_START_TOKEN_ID + block * VOCAB_BLOCK
    stop = min(start + VOCAB_BLOCK, shared)
    try:
        t_tokens, d_tokens = _parse(target.path, (start, stop))[1], _parse(draft.path, (start, stop))[1]
    except ModelFileError:       # changed since: the difference stands, unnamed
        return None
    for i, (t, d) in enumerate(zip(t_tokens, d_tokens), start):
        if t != d:
            return f"token {i} differs ({d!r:.30} in the draft, {t!r:.30} in the target)"
    return None
