"""Standard prompt sets (MT-Bench, HumanEval), the seeded per-category sample, and warm-up prompts.

* ``mt-bench``: 80 two-turn questions in 8 categories. Each question is two prompts: turn 1, and
  turn 2 sent after turn 1 with turn 1's answer as context, as MT-Bench defines it. Whose
  answer: the target's own, as its baseline (the target alone, one stream, first repetition)
  wrote it — so every configuration of a target gets the same context, byte for byte (see
  :mod:`draftbench.measure.context`). Categories are named ``mt-bench:<category>``.
* ``humaneval``: 164 Python problems, one category ``humaneval``; each prompt is the problem's
  code (signature and docstring) after one fixed instruction line.

The data come from PyPI wheels through :mod:`.prompt_data`. Prompt ids are stable
(``mt-bench-81-1``, ``mt-bench-81-2``, ``humaneval-0``): requests pair across servers by id.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Callable, Sequence

from ..common.errors import UsageError
from . import prompt_data
from .prompt import Prompt, user_turn

MT_BENCH, HUMANEVAL = "mt-bench", "humaneval"
MT_BENCH_CATEGORIES = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")
SET_SELECTORS = (MT_BENCH, *(f"{MT_BENCH}:{c}" for c in MT_BENCH_CATEGORIES), HUMANEVAL)
# The pinned files' sizes (their sha256 is checked), so requests are counted before anything is fetched.
MT_BENCH_QUESTIONS_PER_CATEGORY, HUMANEVAL_PROBLEMS = 10, 164
HUMANEVAL_INSTRUCTION = "Complete the following Python function. Answer with the whole function in one code block."
CODE_CATEGORIES = frozenset({"code", "code-edit", f"{MT_BENCH}:coding", HUMANEVAL})


def _bad(data: prompt_data.DataFile, where: str, what: str) -> UsageError:
    return UsageError(f"{data.path}{where}: {what}; it does not look like {data.requirement}'s {data.member}",
                      f"delete {data.path} so that it is fetched again")


def mt_bench_prompts(text: str, data: prompt_data.DataFile = prompt_data.DATA_FILES[MT_BENCH]) -> list[Prompt]:
    """Two prompts per MT-Bench question (``question.jsonl``): turn 1, then turn 2 awaiting turn 1's answer."""
    prompts: list[Prompt] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _bad(data, f":{lineno}", f"invalid JSON ({exc.msg})") from None
        turns = q.get("turns") if isinstance(q, dict) else None
        if not (isinstance(q, dict) and isinstance(q.get("question_id"), int)
                and q.get("category") in MT_BENCH_CATEGORIES and isinstance(turns, list) and len(turns) == 2
                and all(isinstance(t, str) and t.strip() for t in turns)):
            raise _bad(data, f":{lineno}", "not a question with an id, a known category and two turns")
        first = f"{MT_BENCH}-{q['question_id']}-1"
        conversation = f"{MT_BENCH}-{q['question_id']}"
        category = f"{MT_BENCH}:{q['category']}"
        prompts.append(Prompt(first, category, user_turn(turns[0]), conversation=conversation))
        prompts.append(Prompt(f"{MT_BENCH}-{q['question_id']}-2", category,
                              ({"role": "user", "content": turns[0]}, {"role": "assistant", "content": ""},
                               {"role": "user", "content": turns[1]}),
                              context_from=first, conversation=conversation))
    return prompts


def humaneval_prompts(raw: bytes, data: prompt_data.DataFile = prompt_data.DATA_FILES[HUMANEVAL]) -> list[Prompt]:
    """One prompt per HumanEval problem (``HumanEval.jsonl.gz``)."""
    try:
        text = gzip.decompress(raw).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise _bad(data, "", f"not gzip-compressed UTF-8 ({exc})") from None
    prompts = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            problem = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _bad(data, f":{lineno}", f"invalid JSON ({exc.msg})") from None
        task, code = (problem.get("task_id"), problem.get("prompt")) if isinstance(problem, dict) else (None, None)
        if not (isinstance(task, str) and task.startswith("HumanEval/") and isinstance(code, str) and code.strip()):
            raise _bad(data, f":{lineno}", "not a problem with a task_id and a prompt")
        prompts.append(Prompt(f"{HUMANEVAL}-{task.split('/', 1)[1]}", HUMANEVAL,
                              user_turn(f"{HUMANEVAL_INSTRUCTION}\n\n```python\n{code}```")))
    return prompts


def load_set(name: str, read: Callable[[prompt_data.DataFile], bytes] = prompt_data.read) -> list[Prompt]:
    """Every prompt of a standard set, from the cache (fetched on first use)."""
    data = prompt_data.DATA_FILES[name]
    raw = read(data)
    if name == MT_BENCH:
        try:
            return mt_bench_prompts(raw.decode("utf-8"), data)
        except UnicodeDecodeError as exc:
            raise _bad(data, "", f"not UTF-8 text (byte {exc.start})") from None
    return humaneval_prompts(raw, data)


def selected(prompts: Sequence[Prompt], selectors: Sequence[str]) -> list[Prompt]:
    """The prompts of a standard set that ``selectors`` name (``"mt-bench"`` or ``"mt-bench:coding"``)."""
    wanted = set(selectors)
    return [p for p in prompts if p.category in wanted or p.category.split(":", 1)[0] in wanted]


def conversation_of(prompt: Prompt) -> str:
    """Prompts of one conversation are sampled, and run, together."""
    return prompt.conversation or prompt.id


def sample(prompts: Sequence[Prompt], per_category: int | None, seed: int) -> list[Prompt]:
    """Up to ``per_category`` conversations (an MT-Bench question is one, with both its turns) of each
    category, drawn with ``seed``; the prompts keep their order. None: all of them.

    Each category draws from its own generator (seeded with the seed and the category), so naming
    another category does not change the sample of this one.
    """
    if per_category is None:
        return list(prompts)
    by_category: dict[str, list[str]] = {}
    for p in prompts:
        groups = by_category.setdefault(p.category, [])
        if conversation_of(p) not in groups:
            groups.append(conversation_of(p))
    keep: set[str] = set()
    for category, groups in by_category.items():
        if len(groups) <= per_category:
            keep.update(groups)
        else:
            keep.update(random.Random(f"{seed}:{category}").sample(groups, per_category))
    return [p for p in prompts if conversation_of(p) in keep]


def set_size(selector: str, per_category: int | None) -> int:
    """Prompts a standard-set selector gives with ``per_category`` (no data read)."""
    if selector == HUMANEVAL:
        return min(per_category or HUMANEVAL_PROBLEMS, HUMANEVAL_PROBLEMS)
    categories = len(MT_BENCH_CATEGORIES) if selector == MT_BENCH else 1
    return categories * 2 * min(per_category or MT_BENCH_QUESTIONS_PER_CATEGORY, MT_BENCH_QUESTIONS_PER_CATEGORY)


# --------------------------------------------------------------------------- warm-up

# Requests that warm a server up (load weights into caches, compile kernels) and are never measured:
# texts of their own, outside every measured set, so no measured prompt or answer is seen before it is
# measured. One per kind of workload, so the warm-up exercises the same kind of text.
WARMUP_PROMPTS: tuple[Prompt, ...] = (
    Prompt("warmup-prose", "warmup", user_turn(
        "Describe in a few sentences how a bicycle's gears help a rider climb a steep hill.")),
    Prompt("warmup-code", "warmup", user_turn(
        "Write a Python function that returns the median of a list of numbers, with a short docstring.")),
    Prompt("warmup-chat", "warmup", (
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What should I pack for a weekend of hiking in autumn?"})),
)


def warmup_prompts(measured: Sequence[Prompt], n: int) -> list[Prompt]:
    """``n`` warm-up prompts for a server about to measure ``measured``: dedicated texts that no measured
    prompt uses, code first when most measured prompts are code, repeated when ``n`` is larger than
    their number."""
    if n <= 0:
        return []
    texts = {p.text for p in measured} | {p.id for p in measured}
    pool = [w for w in WARMUP_PROMPTS if w.text not in texts and w.id not in texts]
    code = sum(p.category in CODE_CATEGORIES for p in measured) * 2 > len(measured)
    pool.sort(key=lambda w: (w.id != "warmup-code") if code else (w.id == "warmup-code"))
    if not pool:      # a prompt file holding every warm-up text word for word
        raise UsageError("every warm-up prompt is also a measured prompt", "remove the warm-up texts from the "
                         "prompt file (see docs/prompts.md)")
    return [pool[i % len(pool)] for i in range(n)]
