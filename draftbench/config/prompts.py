"""Prompt sets: the built-in categorised set, and the user's own prompts from a file.

Acceptance depends heavily on the kind of text (code and JSON are predictable, prose much
less), so every prompt carries a category and results are reported per category too.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..common.errors import Problem, UsageError
from ..common.files import expand_path
from ..common.reading import PROMPTS_LIMIT, UnreadableFile, read_limited
from .workloads import METHOD_WORKLOADS


@dataclass(frozen=True)
class Prompt:
    id: str
    category: str
    messages: tuple  # tuple of {"role", "content"} dicts

    @property
    def text(self) -> str:
        return self.messages[-1]["content"] if self.messages else ""

    def to_dict(self) -> dict:
        return {"id": self.id, "category": self.category, "messages": [dict(m) for m in self.messages]}


def _user(text: str) -> tuple:
    return ({"role": "user", "content": text},)


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
METHOD_PROMPTS: tuple[Prompt, ...] = tuple(Prompt(pid, category, messages) for pid, category, messages
                                           in METHOD_WORKLOADS)
ALL_PROMPTS = BUILTIN_PROMPTS + METHOD_PROMPTS
ALL_CATEGORIES = tuple(dict.fromkeys(p.category for p in ALL_PROMPTS))


def check_prompt_setting(path: str, value, base_dir: str, problems: list[Problem]):
    """Validate ``settings.prompts``; returns the normalised value ("builtin", a category list, or a path).

    A prompt file is read now, so a bad one is reported with the other config problems,
    before any server starts.
    """
    if value in (None, "builtin"):
        return "builtin"
    if isinstance(value, list):
        bad = [v for v in value if v not in ALL_CATEGORIES]
        if not value or bad:
            problems.append(Problem(path, f"unknown prompt categor{'y' if len(bad) == 1 else 'ies'} "
                                    f"{', '.join(map(repr, bad)) or '(empty list)'}",
                                    f"choose from {', '.join(ALL_CATEGORIES)}"))
        elif len(set(value)) != len(value):
            problems.append(Problem(path, "lists a category more than once", "list every category once"))
        return list(value)
    if isinstance(value, str) and value.strip():
        resolved, err = expand_path(value, base_dir)
        if err:
            problems.append(Problem(path, err.message, err.fix))
            return resolved
        if not os.path.lexists(resolved) or os.path.isdir(resolved):
            fix = "give a .txt or .jsonl file (relative to the config's folder), or \"builtin\""
            if value in ALL_CATEGORIES:
                fix = f"for the built-in {value!r} prompts write [{json.dumps(value)}] (a list)"
            what = "is a folder, not a prompt file" if os.path.isdir(resolved) else "does not exist"
            problems.append(Problem(path, f"prompt file {resolved} {what}", fix))
            return resolved
        try:
            load_prompt_file(resolved)
        except UsageError as exc:
            problems.append(Problem(path, exc.message, exc.fix))
        return resolved
    problems.append(Problem(path, f"must be \"builtin\", a list of categories or a file path, not {json.dumps(value)}",
                            "write \"builtin\", a list such as [\"code\", \"prose\"], or \"prompts.jsonl\""))
    return "builtin"


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
    prompts: list[Prompt] = []
    if p.suffix.lower() in (".jsonl", ".ndjson"):
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
                raise UsageError(f"{where}: id {pid!r} is already used on line {ids[pid]}",
                                 "give every prompt its own id")
            ids[pid] = lineno
            prompts.append(Prompt(pid, str(obj.get("category") or "custom"), messages))
    else:
        lines = text.splitlines()
        if any(line.strip() == "---" for line in lines):
            blocks: list[str] = []
            current: list[str] = []
            for line in lines:
                if line.strip() == "---":
                    blocks.append("\n".join(current))
                    current = []
                else:
                    current.append(line)
            blocks.append("\n".join(current))
        else:
            blocks = lines
        for block in blocks:
            if block.strip():
                prompts.append(Prompt(f"p{len(prompts) + 1}", "custom", _user(block.strip())))
    if not prompts:
        raise UsageError(f"prompt file {p} holds no prompts", "add at least one prompt")
    return prompts


def resolve_prompts(setting) -> list[Prompt]:
    """Turn a validated ``settings.prompts`` value into prompts."""
    if setting in (None, "builtin"):
        return list(BUILTIN_PROMPTS)
    if isinstance(setting, list):
        return [p for p in ALL_PROMPTS if p.category in setting]
    return load_prompt_file(setting)


def custom_prompts(texts: list[str]) -> list[Prompt]:
    return [Prompt(f"p{i + 1}", "custom", _user(t)) for i, t in enumerate(texts)]
