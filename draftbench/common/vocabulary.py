"""What llama.cpp's draft rule compares of a token list, kept as digests instead of the list.

llama.cpp's own rule for a usable draft (common/speculative.cpp, common_speculative_are_compatible): the
same tokenizer type, the same BOS/EOS handling, at most 128 tokens more or fewer, and the same token
texts from id 5 on. Anything else makes llama-server refuse to speculate with the draft. A 256k-token
list is ~20 MB of Python strings; its :class:`Vocabulary` is a few kB, built as the header is read
(:mod:`draftbench.common.gguf`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

VOCAB_MAX_SIZE_DIFFERENCE = 128
VOCAB_CHECK_START_TOKEN_ID = 5
VOCAB_BLOCK = 1024                 # a digest every this many tokens, to find the first difference


@dataclass(frozen=True)
class Vocabulary:
    """What llama.cpp's draft rule compares, without the token list: its length, and SHA-256 digests of
    the token texts from id 5 on — up to every length within 128 of the end (``tail``: the rule compares
    up to the shorter list), and cumulatively every 1,024 tokens (``blocks``: where a difference starts)."""

    count: int
    tail: dict[int, bytes] = field(repr=False)       # n -> digest of tokens[5:n]
    blocks: tuple[bytes, ...] = field(repr=False)    # i -> digest of tokens[5 : 5 + (i + 1) * 1024]


class VocabularyDigest:
    """Builds a :class:`Vocabulary` from the token texts as they are read (raw bytes, as llama.cpp compares)."""

    def __init__(self, count: int):
        self.count = count
        self.hash = hashlib.sha256()
        self.low = max(VOCAB_CHECK_START_TOKEN_ID, count - VOCAB_MAX_SIZE_DIFFERENCE)
        self.tail: dict[int, bytes] = {}
        self.blocks: list[bytes] = []
        if self.low == VOCAB_CHECK_START_TOKEN_ID <= count:
            self.tail[self.low] = self.hash.copy().digest()

    def add(self, index: int, raw: bytes) -> None:
        if index < VOCAB_CHECK_START_TOKEN_ID:
            return
        self.hash.update(raw + b"\0")
        n = index + 1
        if (n - VOCAB_CHECK_START_TOKEN_ID) % VOCAB_BLOCK == 0:
            self.blocks.append(self.hash.copy().digest())
        if n >= self.low:
            self.tail[n] = self.hash.copy().digest()

    def result(self) -> Vocabulary:
        return Vocabulary(self.count, self.tail, tuple(self.blocks))
