"""Long prompts cut to an exact token count with the target server's own tokenizer.

Each task of :mod:`.long_documents` becomes one prompt per length: its document cut so that the whole
chat prompt — the template, the task's words and the document — is ``length`` tokens as the target's
server counts them (``Tokenizer.prompt_tokens``). The cut is made in tokens, then checked on the
detokenised text (tokens can merge across the cut), and corrected until the count is exact or as close
as the tokenizer allows (:data:`TOLERANCE`).

``filler="random-tokens"`` is the explicit, labelled alternative: the same documents' tokens shuffled
with the seed (no structure, the same vocabulary). SPEED-Bench reports that random-token prompts
overstate speculative throughput; the results say which filler was used.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..common.errors import UsageError
from .long_documents import LONG_TASKS, LongTask, Source, document, sources_of, wrap
from .prompt import Prompt, user_turn

DOCUMENTS, RANDOM_TOKENS = "documents", "random-tokens"       # settings.context_filler
# Tokens can merge across the cut; a count within this many tokens of the length is accepted.
TOLERANCE = 8
_TRIES = 8
MIN_DOCUMENT_TOKENS = 16


class Tokenizer(Protocol):
    """A server's own tokenizer (llama-server: ``/tokenize``, ``/detokenize``, ``/apply-template``)."""

    def tokenize(self, text: str) -> list[int]: ...
    def detokenize(self, tokens: Sequence[int]) -> str: ...
    def prompt_tokens(self, messages: Sequence[dict]) -> int: ...   # the chat prompt as the server counts it


@dataclass(frozen=True)
class LongPrompt:
    prompt: Prompt
    tokens: int              # the whole chat prompt, as the server counts it
    document_tokens: int     # of which the document


def prompt_id(category: str, length: int) -> str:
    return f"{category}-{length}"


def _messages(task: LongTask, text: str) -> tuple:
    return user_turn(wrap(task, text))


def cut(task: LongTask, doc_tokens: Sequence[int], length: int, tokenizer: Tokenizer) -> LongPrompt:
    """The task's prompt of ``length`` tokens, its document a prefix of ``doc_tokens``."""
    overhead = tokenizer.prompt_tokens(_messages(task, ""))
    budget = length - overhead
    if budget < MIN_DOCUMENT_TOKENS:
        raise UsageError(f"a {length}-token prompt leaves no room for a document: the chat template and the "
                         f"{task.category} task's own words take {overhead} tokens",
                         f"use context lengths of at least {overhead + MIN_DOCUMENT_TOKENS} tokens")
    if budget > len(doc_tokens):
        raise UsageError(f"the {task.category} documents hold {len(doc_tokens):,} tokens, fewer than the "
                         f"{budget:,} a {length:,}-token prompt needs", "use shorter context lengths "
                         f"(at most {len(doc_tokens) + overhead:,} tokens)")
    n, best = budget, None
    for _ in range(_TRIES):
        text = tokenizer.detokenize(doc_tokens[:n])
        count = tokenizer.prompt_tokens(_messages(task, text))
        if best is None or abs(count - length) < abs(best[1] - length):
            best = (text, count, n)
        if count == length:
            break
        n = max(1, min(len(doc_tokens), n + length - count))
    assert best is not None
    text, count, n = best
    if abs(count - length) > TOLERANCE:
        raise UsageError(f"could not cut the {task.category} document to {length} tokens (closest: {count})",
                         "report this with the model's name: its tokenizer merges across the cut unusually")
    return LongPrompt(Prompt(prompt_id(task.category, length), task.category, _messages(task, text), tokens=count),
                      count, n)


@dataclass
class LongPromptBuilder:
    """Long prompts for one target at several lengths, its documents tokenised once."""

    tokenizer: Tokenizer
    filler: str                  # settings.context_filler
    seed: int                    # settings.seed: the random-token filler's shuffle
    load: Callable[[LongTask], list[Source]] = sources_of

    def __post_init__(self) -> None:
        self._tokens: dict[str, list[int]] = {}
        self.sources: dict[str, dict] = {}

    def _doc_tokens(self, task: LongTask) -> list[int]:
        if task.category not in self._tokens:
            sources = self.load(task)
            self.sources.update({s.name: s.origin for s in sources})
            tokens = self.tokenizer.tokenize(document(task, sources))
            if self.filler == RANDOM_TOKENS:
                random.Random(f"{self.seed}:{task.category}").shuffle(tokens)
            self._tokens[task.category] = tokens
        return self._tokens[task.category]

    def prompts(self, length: int) -> list[LongPrompt]:
        return [cut(task, self._doc_tokens(task), length, self.tokenizer) for task in LONG_TASKS]

    def record(self, built: dict[int, list[LongPrompt]]) -> dict:
        """What the results file records: the filler, the sources, and every prompt's token count."""
        return {"filler": self.filler, "sources": dict(sorted(self.sources.items())),
                "prompts": {str(length): {p.prompt.id: p.tokens for p in items} for length, items in built.items()}}


DRAFT_HEADROOM = 64       # tokens past the answer: the template's closing tokens and a draft's unverified tokens
DEFAULT_DRAFT_ROOM = 16   # a draft length to leave room for where the candidate does not set one


def server_context(length: int, max_tokens: int, draft_max: int | None = None) -> int:
    """The ``-c`` (per slot) that ``length``-token prompts need: the prompt, the answer, and a draft's room."""
    return length + max_tokens + (draft_max or DEFAULT_DRAFT_ROOM) + DRAFT_HEADROOM
