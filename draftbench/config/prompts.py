"""Prompt sets: the built-in categorised set, the standard sets (MT-Bench, HumanEval; see
:mod:`.prompt_sets`), and the user's own prompts from a file.

Acceptance depends heavily on the kind of text (code and JSON are predictable, prose much
less), so every prompt carries a category and results are reported per category too.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..common.errors import Problem, UsageError
from ..common.files import expand_path
from ..common.reading import PROMPTS_LIMIT, UnreadableFile, read_limited
from . import prompt_sets
from .long_documents import LONG_TASKS, wrap
from .prompt import Prompt, user_turn
from .prompt_sets import SET_SELECTORS, load_set, sample, selected, set_size
from .settings import Settings
from .workloads import METHOD_WORKLOADS, RENAMED_CATEGORIES, SESSION_CATEGORY

_user = user_turn


_ARTICLE = (
    "The city council met on Tuesday to discuss the proposed expansion of the northern tram line. "
    "Supporters argued that the extension would cut commuting times for roughly forty thousand residents "
    "and reduce traffic on the ring road, which has seen congestion rise by a fifth since 2019. Opponents, "
    "including several shop owners along Market Street, warned that two years of construction would drive "
    "customers away and that the projected cost of 310 million euros was likely to grow. The transport "
    "department presented a revised plan that shortens the construction period by phasing the work in four "
    "sections and adds a compensation fund for affected businesses. After three hours of debate the council "
    "voted 27 to 14 to approve the first phase, with a review of costs scheduled before the second phase "
    "can begin."
)

# The first three are upstream draftbench's prompts, kept word for word so numbers compare.
BUILTIN_PROMPTS: tuple[Prompt, ...] = (
    Prompt("code-bst", "code", _user(
        "Write a Python class for a binary search tree with insert, delete, search, and in-order traversal "
        "methods. Include docstrings and type hints.")),
    Prompt("json-users", "json", _user(
        "Generate a JSON array of 10 fictional users. Each user should have: id, firstName, lastName, email, "
        "age, address (with street, city, zipCode), and a list of 3 hobbies.")),
    Prompt("list-countries", "list", _user(
        "List the 20 largest countries by area. For each, provide: name, capital, population, and area in "
        "square kilometers. Format as a numbered list.")),
    Prompt("prose-story", "prose", _user(
        "Write a short story of about 300 words about a lighthouse keeper who finds a message in a bottle. "
        "Use vivid descriptions and end with a surprising twist.")),
    Prompt("chat-advice", "chat", (
        {"role": "system", "content": "You are a friendly, concise assistant."},
        {"role": "user", "content": "I have a job interview for a junior data analyst position next week. "
                                    "How should I prepare, and what questions should I expect?"},
    )),
    Prompt("summary-council", "summarisation", _user(
        "Summarise the following news article in three bullet points, then give a one-sentence headline.\n\n"
        + _ARTICLE)),
)

CATEGORIES = tuple(dict.fromkeys(p.category for p in BUILTIN_PROMPTS))

# Workloads where speculative methods differ (see workloads.py): built in, but run only when a
# sweep names their categories, so "builtin" keeps meaning upstream's set (and old results resume).
METHOD_PROMPTS: tuple[Prompt, ...] = tuple(
    Prompt(pid, category, messages, conversation=category if category == SESSION_CATEGORY else None)
    for pid, category, messages in METHOD_WORKLOADS)
ALL_PROMPTS = BUILTIN_PROMPTS + METHOD_PROMPTS
ALL_CATEGORIES = tuple(dict.fromkeys(p.category for p in ALL_PROMPTS))


def check_prompt_setting(path: str, value, base_dir: str, problems: list[Problem]):
    """Validate ``settings.prompts``; returns the normalised value ("builtin", a category list, or a path).

    A prompt file is read now, so a bad one is reported with the other config problems,
    before any server starts.
    """
    if value in (None, "builtin", STANDARD):
        return value or STANDARD
    if isinstance(value, list):
        _check_selectors(path, value, problems)
        return list(value)
    if isinstance(value, str) and value.strip():
        resolved, err = expand_path(value, base_dir)
        if err:
            problems.append(Problem(path, err.message, err.fix))
            return resolved
        if not os.path.lexists(resolved) or os.path.isdir(resolved):
            fix = "give a .txt or .jsonl file (relative to the config's folder), or \"builtin\""
            if value in ALL_CATEGORIES or value in SET_SELECTORS:
                fix = f"for the {value!r} prompts write [{json.dumps(value)}] (a list)"
            what = "is a folder, not a prompt file" if os.path.isdir(resolved) else "does not exist"
            problems.append(Problem(path, f"prompt file {resolved} {what}", fix))
            return resolved
        try:
            load_prompt_file(resolved)
        except UsageError as exc:
            problems.append(Problem(path, exc.message, exc.fix))
        return resolved
    problems.append(Problem(path, f"must be \"standard\", \"builtin\", a list of categories and sets or a file path, "
                            f"not {json.dumps(value)}", "write \"standard\", a list such as [\"code\", \"mt-bench\"], "
                            "or \"prompts.jsonl\""))
    return "builtin"


def _check_selectors(path: str, value: list, problems: list[Problem]) -> None:
    """Each entry a built-in category, "builtin", or a standard set ("mt-bench", "mt-bench:coding",
    "humaneval"); an unknown one is named with the closest known ones."""
    if not value:
        problems.append(Problem(path, "is an empty list", "name at least one category or set, or write \"builtin\""))
        return
    known = ("builtin", *ALL_CATEGORIES, *SET_SELECTORS)
    for i, item in enumerate(value):
        if not isinstance(item, str):
            problems.append(Problem(f"{path}[{i}]", f"must be a category or set name, not {json.dumps(item)}",
                                    f"choose from {', '.join(known)}"))
        elif item in RENAMED_CATEGORIES:
            problems.append(Problem(f"{path}[{i}]", f"unknown prompt category {item!r}: it is now called "
                                    f"{RENAMED_CATEGORIES[item]!r}", f"write {json.dumps(RENAMED_CATEGORIES[item])}"))
        elif item not in known:
            close = difflib.get_close_matches(item, known, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(Problem(f"{path}[{i}]", f"unknown prompt category or set {item!r}{hint}",
                                    f"choose from {', '.join(known)}"))
    names = [v for v in value if isinstance(v, str)]
    if len(set(names)) != len(names):
        problems.append(Problem(path, "lists a category more than once", "list every category once"))
        return
    for whole in ("builtin", prompt_sets.MT_BENCH):
        parts = [v for v in names if v != whole and (v in CATEGORIES if whole == "builtin"
                                                     else v.startswith(whole + ":"))]
        if whole in names and parts:
            problems.append(Problem(path, f"lists {', '.join(map(repr, parts))} and {whole!r}, which already "
                                    "holds them", f"keep {whole!r} or the categories, not both"))


def _check_messages(messages, where: str) -> tuple:
    """A chat ``messages`` list from a prompt file: non-empty, each {"role": str, "content": str}."""
    fix = 'write e.g. {"messages": [{"role": "user", "content": "Explain TCP"}]}'
    if not isinstance(messages, list) or not messages:
        raise UsageError(f"{where}: \"messages\" must be a non-empty list", fix)
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise UsageError(f"{where}: messages[{i}] must be an object with string \"role\" and \"content\"", fix)
    return tuple({"role": m["role"], "content": m["content"]} for m in messages)


def load_prompt_file(path: str | os.PathLike) -> list[Prompt]:
    """Read prompts from ``.jsonl`` (one object per line) or text (blocks separated by ``---`` lines,
    or one prompt per line when there is no separator)."""
    p = Path(path)
    try:
        text = read_limited(p, PROMPTS_LIMIT).decode("utf-8-sig")     # never waits on a pipe, never reads 1 GB
    except UnreadableFile as problem:
        raise UsageError(f"prompt file {p} {problem.message}", problem.fix) from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"prompt file {p} is not UTF-8 text (byte {exc.start})", "save it as UTF-8") from None
    prompts = _jsonl_prompts(text, p) if p.suffix.lower() in (".jsonl", ".ndjson") else _text_prompts(text)
    if not prompts:
        raise UsageError(f"prompt file {p} holds no prompts", "add at least one prompt")
    return prompts


def _jsonl_prompts(text: str, p: Path) -> list[Prompt]:
    """One prompt object (or string) per line; ids unique (they pair requests across servers)."""
    prompts: list[Prompt] = []
    ids: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{p}:{lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{where}: invalid JSON ({exc.msg}, column {exc.colno})",
                             'each line must be an object like {"prompt": "...", "category": "code"}') from None
        except RecursionError:
            raise UsageError(f"{where}: nested too deeply to be a prompt",
                             'each line must be an object like {"prompt": "...", "category": "code"}') from None
        if isinstance(obj, str):
            obj = {"prompt": obj}
        if not isinstance(obj, dict) or not (isinstance(obj.get("prompt"), str) or "messages" in obj):
            raise UsageError(f"{where}: needs a \"prompt\" string or a \"messages\" list",
                             'write e.g. {"prompt": "Explain TCP", "category": "prose"}')
        if "messages" in obj:
            messages = _check_messages(obj["messages"], where)
        elif not obj["prompt"].strip():
            raise UsageError(f"{where}: \"prompt\" is empty", "write the prompt text, or delete the line")
        else:
            messages = _user(obj["prompt"])
        pid = str(obj.get("id") or f"line{lineno}")
        if pid in ids:
            # ids pair requests across servers; two prompts with one id would pair the wrong requests
            raise UsageError(f"{where}: id {pid!r} is already used on line {ids[pid]}", "give every prompt its own id")
        ids[pid] = lineno
        prompts.append(Prompt(pid, str(obj.get("category") or "custom"), messages))
    return prompts


def _text_prompts(text: str) -> list[Prompt]:
    """Blocks separated by ``---`` lines, or one prompt per line when there is no separator."""
    lines = text.splitlines()
    blocks: list[str] = lines
    if any(line.strip() == "---" for line in lines):
        blocks = []
        current: list[str] = []
        for line in lines:
            if line.strip() == "---":
                blocks.append("\n".join(current))
                current = []
            else:
                current.append(line)
        blocks.append("\n".join(current))
    return [Prompt(f"p{n}", "custom", _user(block.strip()))
            for n, block in enumerate((b for b in blocks if b.strip()), 1)]


@dataclass(frozen=True)
class PromptSelection:
    """The prompts a sweep measures, and how they were chosen (recorded in the results file)."""

    prompts: list[Prompt]
    per_category: int | None = None
    seed: int | None = None
    sets: dict = field(default_factory=dict)     # standard set -> where its data came from

    def record(self) -> dict:
        """``prompt_set`` in the results file: the sample's seed and size and the chosen ids, in order."""
        out: dict = {"per_category": self.per_category, "seed": self.seed if self.per_category else None,
                     "ids": [p.id for p in self.prompts],
                     "categories": list(dict.fromkeys(p.category for p in self.prompts))}
        if self.sets:
            out["sources"] = self.sets
        if any(p.context_from for p in self.prompts):
            out["second_turn_context"] = SECOND_TURN_CONTEXT
        return out


SECOND_TURN_CONTEXT = ("the target's own answer to the first turn, as its baseline (one stream, first repetition) "
                       "wrote it; the same text for every configuration of that target")


def _from_list(items: Sequence[str]) -> tuple[list[Prompt], list[str]]:
    standard = [v for v in items if v in SET_SELECTORS]
    names = list(dict.fromkeys(v.split(":", 1)[0] for v in standard))
    chosen: list[Prompt] = []
    if "builtin" in items:
        chosen += BUILTIN_PROMPTS
    chosen += [p for p in ALL_PROMPTS if p.category in items and p not in chosen]
    for name in names:
        chosen += selected(load_set(name), standard)
    return chosen, names


def prompt_count(setting, per_category: int | None = None) -> int:
    """How many prompts :func:`select_prompts` gives, without fetching a standard set's data."""
    if setting == STANDARD:
        mt_bench = len(prompt_sets.MT_BENCH_CATEGORIES) * min(per_category or prompt_sets.MT_BENCH_QUESTIONS_PER_CATEGORY,
                                                              prompt_sets.MT_BENCH_QUESTIONS_PER_CATEGORY)
        return len(sample(list(BUILTIN_PROMPTS), per_category, 0)) + mt_bench + min(per_category or STANDARD_HUMANEVAL,
                                                                                   STANDARD_HUMANEVAL)
    if isinstance(setting, list):
        built_in, _ = _from_list([v for v in setting if v not in SET_SELECTORS])
        return len(sample(built_in, per_category, 0)) + sum(set_size(v, per_category) for v in setting
                                                            if v in SET_SELECTORS)
    return len(select_prompts(setting, per_category).prompts)


def resolve_prompts(setting, per_category: int | None = None, seed: int = 42) -> list[Prompt]:
    """Turn a validated ``settings.prompts`` value into prompts (a standard set is read from the
    cache, fetched on first use), sampled to ``per_category`` conversations per category."""
    return select_prompts(setting, per_category, seed).prompts


# The default workload (issue 32): enough prompts for every stage to draw fresh ones — the built-in six,
# the first turn of every MT-Bench question (80, eight categories) and a seeded sample of HumanEval.
STANDARD = "standard"
STANDARD_HUMANEVAL = 16


def standard_pool(seed: int = 42) -> tuple[list[Prompt], list[str]]:
    """The built-in prompts, MT-Bench's first turns and ``STANDARD_HUMANEVAL`` HumanEval problems, and the sets
    used (their data are fetched into the cache on first use, as for ``"mt-bench"``)."""
    first_turns = [p for p in load_set(prompt_sets.MT_BENCH) if not p.context_from]
    first_turns = [Prompt(p.id, p.category, p.messages) for p in first_turns]      # a question of its own
    humaneval = sample(load_set(prompt_sets.HUMANEVAL), STANDARD_HUMANEVAL, seed)
    return list(BUILTIN_PROMPTS) + first_turns + humaneval, [prompt_sets.MT_BENCH, prompt_sets.HUMANEVAL]


def select_prompts(setting, per_category: int | None = None, seed: int = 42) -> PromptSelection:
    names: list[str] = []
    if setting == STANDARD:
        prompts, names = standard_pool(seed)
    elif setting in (None, "builtin"):
        prompts = list(BUILTIN_PROMPTS)
    elif isinstance(setting, list):
        prompts, names = _from_list(setting)
    else:
        prompts = load_prompt_file(setting)
    sets = {name: {"package": prompt_sets.prompt_data.DATA_FILES[name].requirement,
                   "file": prompt_sets.prompt_data.DATA_FILES[name].member,
                   "sha256": prompt_sets.prompt_data.DATA_FILES[name].sha256,
                   "licence": prompt_sets.prompt_data.DATA_FILES[name].licence} for name in names}
    return PromptSelection(sample(prompts, per_category, seed), per_category, seed, sets)


def prompts_for(settings: Settings) -> PromptSelection:
    """The prompts a sweep with these (validated) settings measures. With ``context_tokens`` the long tasks,
    one each and without their documents: what counting needs before their servers cut them (long_prompts)."""
    if settings.context_tokens is not None:
        return PromptSelection([Prompt(t.category, t.category, _user(wrap(t, ""))) for t in LONG_TASKS], None,
                               settings.seed, {})
    return select_prompts(settings.prompts, settings.prompts_per_category, settings.seed)


def custom_prompts(texts: list[str]) -> list[Prompt]:
    return [Prompt(f"p{i + 1}", "custom", _user(t)) for i, t in enumerate(texts)]
