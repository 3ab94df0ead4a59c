"""A prompt: chat messages with an id (pairs requests across servers) and a category (results are
reported per category). A leaf module, so prompt sets and workloads can build prompts."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Prompt:
    id: str
    category: str
    messages: tuple  # tuple of {"role", "content"} dicts
    # The id of an earlier prompt whose answer is this prompt's last assistant message (MT-Bench's
    # second turn); until it is filled in (see with_context) this prompt cannot be sent.
    context_from: str | None = None
    conversation: str | None = None   # prompts of one conversation are sampled together
    # A long prompt's length as the target's own tokenizer counted it (the context axis): the server must
    # report the same count for it, or the row would be judged at a length it was not (measure.sequential).
    tokens: int | None = None

    @property
    def text(self) -> str:
        return self.messages[-1]["content"] if self.messages else ""

    def to_dict(self) -> dict:
        out = {"id": self.id, "category": self.category, "messages": [dict(m) for m in self.messages]}
        if self.context_from is not None:
            out["context_from"] = self.context_from
        return out

    def with_context(self, answer: str) -> Prompt:
        """This prompt with ``answer`` (the answer to ``context_from``) as its last assistant message."""
        last = max(i for i, m in enumerate(self.messages) if m["role"] == "assistant")
        messages = tuple({**m, "content": answer} if i == last else dict(m) for i, m in enumerate(self.messages))
        return replace(self, messages=messages, context_from=None)


def user_turn(text: str) -> tuple:
    return ({"role": "user", "content": text},)
