"""Second turns (MT-Bench): the first turn's answer as context, identical for every configuration.

A second-turn prompt names the prompt whose answer it is sent after (``Prompt.context_from``).
The answer is the target's own: its baseline measures the turns in order and each second turn
takes the first answer the same server gave to its first turn (:func:`run_prompts` with no
``answers``); every other configuration of the target is handed those answers
(:func:`answers_of` the baseline's records), so baseline and candidates send the same text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..common.errors import RequestError
from ..config.prompts import Prompt
from ..results.file import RequestRecord


def needs_context(prompts: Sequence[Prompt]) -> bool:
    return any(p.context_from is not None for p in prompts)


def answers_of(records: Iterable[RequestRecord]) -> dict[str, str]:
    """prompt id -> its first recorded answer (lowest repetition; failed requests skipped)."""
    out: dict[str, str] = {}
    for r in sorted(records, key=lambda r: r.run):
        if r.error is None and r.text is not None:
            out.setdefault(r.prompt_id, r.text)
    return out


def with_context(prompt: Prompt, answers: Mapping[str, str]) -> Prompt:
    """``prompt`` ready to send: a second turn gets its first turn's answer; others are unchanged."""
    if prompt.context_from is None:
        return prompt
    answer = answers.get(prompt.context_from)
    if answer is None:
        raise RequestError(f"prompt {prompt.id} is sent after the answer to {prompt.context_from}, and no answer "
                           f"to {prompt.context_from} was measured on the target alone",
                           "measure the target's baseline at one stream first (settings.concurrency includes 1; "
                           "a resumed file keeps its baseline row), then resume")
    return prompt.with_context(answer)
