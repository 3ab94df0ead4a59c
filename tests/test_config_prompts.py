"""draftbench.config.prompts: the built-in set, prompt files (.txt, .jsonl) and their errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from draftbench.common.errors import Problem, UsageError
from draftbench.config.prompts import (
    BUILTIN_PROMPTS,
    CATEGORIES,
    Prompt,
    check_prompt_setting,
    custom_prompts,
    load_prompt_file,
    resolve_prompts,
)


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    p = tmp_path / name
    (p.write_bytes if isinstance(text, bytes) else p.write_text)(text)
    return p


# --------------------------------------------------------------------------- built-ins

def test_builtin_set():
    ids = [p.id for p in BUILTIN_PROMPTS]
    assert len(ids) == len(set(ids)) == 6
    assert CATEGORIES == ("code", "json", "list", "prose", "chat", "summarisation")
    for p in BUILTIN_PROMPTS:
        assert p.category in CATEGORIES and p.text.strip()
        assert all(set(m) == {"role", "content"} for m in p.messages)
        assert p.messages[-1]["role"] == "user"


def test_upstream_prompts_are_kept_word_for_word():
    # numbers only compare with upstream draftbench if the first three prompts are its own
    assert BUILTIN_PROMPTS[0].text.startswith("Write a Python class for a binary search tree with insert, delete")
    assert BUILTIN_PROMPTS[1].text.startswith("Generate a JSON array of 10 fictional users.")
    assert BUILTIN_PROMPTS[2].text.startswith("List the 20 largest countries by area.")


def test_chat_prompt_has_a_system_message():
    chat = next(p for p in BUILTIN_PROMPTS if p.category == "chat")
    assert [m["role"] for m in chat.messages] == ["system", "user"]
    assert chat.to_dict()["messages"][0]["role"] == "system"


def test_resolve_builtin_and_categories():
    assert resolve_prompts("builtin") == list(BUILTIN_PROMPTS)
    assert resolve_prompts(None) == list(BUILTIN_PROMPTS)
    assert [p.category for p in resolve_prompts(["prose", "code"])] == ["code", "prose"]


def test_custom_prompts():
    ps = custom_prompts(["hello", "world"])
    assert [(p.id, p.category, p.text) for p in ps] == [("p1", "custom", "hello"), ("p2", "custom", "world")]


def test_prompt_to_dict_is_json():
    d = BUILTIN_PROMPTS[0].to_dict()
    assert json.loads(json.dumps(d)) == d and d["id"] == "code-bst"


# --------------------------------------------------------------------------- .txt files

def test_txt_one_prompt_per_line(tmp_path):
    ps = load_prompt_file(write(tmp_path, "p.txt", "first prompt\n\n  second prompt  \n"))
    assert [(p.id, p.text, p.category) for p in ps] == [("p1", "first prompt", "custom"),
                                                         ("p2", "second prompt", "custom")]


def test_txt_blocks_separated_by_dashes(tmp_path):
    text = "Write a poem\nabout the sea.\n---\n\n---\nExplain TCP.\r\n ---  \nLast one"
    ps = load_prompt_file(write(tmp_path, "p.txt", text))
    assert [p.text for p in ps] == ["Write a poem\nabout the sea.", "Explain TCP.", "Last one"]
    assert [p.id for p in ps] == ["p1", "p2", "p3"]


def test_txt_with_a_byte_order_mark(tmp_path):
    ps = load_prompt_file(write(tmp_path, "p.txt", "\ufeffhello\n".encode("utf-8")))
    assert ps[0].text == "hello"


def test_resolve_a_prompt_file(tmp_path):
    path = write(tmp_path, "p.md", "a\nb\n")   # any suffix other than .jsonl is text
    assert [p.text for p in resolve_prompts(str(path))] == ["a", "b"]


# --------------------------------------------------------------------------- .jsonl files

def test_jsonl_prompts(tmp_path):
    lines = [
        json.dumps({"prompt": "Explain TCP", "category": "prose", "id": "tcp"}),
        "",
        json.dumps({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
                    "category": "chat"}),
        json.dumps("just a string"),
        json.dumps({"prompt": "no category"}),
    ]
    ps = load_prompt_file(write(tmp_path, "p.jsonl", "\n".join(lines) + "\n"))
    assert [(p.id, p.category) for p in ps] == [("tcp", "prose"), ("line3", "chat"), ("line4", "custom"),
                                               ("line5", "custom")]
    assert ps[0].messages == ({"role": "user", "content": "Explain TCP"},)
    assert ps[1].text == "Hi" and len(ps[1].messages) == 2
    assert ps[2].text == "just a string"


def test_ndjson_suffix_and_bom(tmp_path):
    ps = load_prompt_file(write(tmp_path, "p.NDJSON", "\ufeff" + json.dumps({"prompt": "x"}) + "\n"))
    assert ps[0].text == "x"


@pytest.mark.parametrize("line,cause", [
    ('{"prompt": "x"', "p.jsonl:2: invalid JSON"),
    ("[1, 2]", 'p.jsonl:2: needs a "prompt" string or a "messages" list'),
    ('{"text": "x"}', 'needs a "prompt" string'),
    ('{"prompt": 5}', 'needs a "prompt" string'),
    ('{"prompt": "   "}', 'p.jsonl:2: "prompt" is empty'),
    ('{"messages": []}', '"messages" must be a non-empty list'),
    ('{"messages": "hi"}', '"messages" must be a non-empty list'),
    ('{"messages": null, "prompt": "x"}', '"messages" must be a non-empty list'),
    ('{"messages": [{"role": "user"}]}', 'messages[0] must be an object with string "role" and "content"'),
    ('{"messages": ["hi"]}', "messages[0] must be an object"),
    ('{"prompt": "again", "id": "first"}', "p.jsonl:2: id 'first' is already used on line 1"),
])
def test_bad_jsonl_lines(tmp_path, line, cause):
    path = write(tmp_path, "p.jsonl", json.dumps({"prompt": "ok", "id": "first"}) + "\n" + line + "\n")
    with pytest.raises(UsageError) as info:
        load_prompt_file(path)
    assert cause in info.value.message
    assert info.value.fix


def test_duplicate_default_ids_cannot_happen(tmp_path):
    # ids pair requests between servers; generated ids are unique by construction
    ps = load_prompt_file(write(tmp_path, "p.jsonl", '"a"\n"b"\n"c"\n'))
    assert len({p.id for p in ps}) == 3


# --------------------------------------------------------------------------- unusable files

@pytest.mark.parametrize("name,content", [("empty.txt", ""), ("blank.txt", "\n  \n---\n\n"), ("empty.jsonl", "\n\n")])
def test_files_without_prompts(tmp_path, name, content):
    with pytest.raises(UsageError) as info:
        load_prompt_file(write(tmp_path, name, content))
    assert "holds no prompts" in info.value.message and info.value.fix


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(UsageError) as info:
        load_prompt_file(tmp_path / "nope.txt")
    assert info.value.message == f"prompt file {tmp_path / 'nope.txt'} does not exist" and info.value.fix
    with pytest.raises(UsageError, match="is a folder"):
        load_prompt_file(tmp_path)


def test_binary_file(tmp_path):
    with pytest.raises(UsageError) as info:
        load_prompt_file(write(tmp_path, "p.txt", b"\xff\xfe\x00\x01"))
    assert "is not UTF-8" in info.value.message


# --------------------------------------------------------------------------- settings.prompts

def check(value, base_dir="."):
    problems: list[Problem] = []
    out = check_prompt_setting("$.settings.prompts", value, str(base_dir), problems)
    return out, problems


def test_check_prompt_setting_values(tmp_path):
    assert check(None) == ("standard", [])            # the default: a pool large enough for fresh stages
    assert check("standard") == ("standard", [])
    assert check("builtin") == ("builtin", [])
    assert check(["code", "json"]) == (["code", "json"], [])
    write(tmp_path, "mine.jsonl", '{"prompt": "x"}\n')
    assert check("mine.jsonl", tmp_path) == (str(tmp_path / "mine.jsonl"), [])


@pytest.mark.parametrize("value,cause", [
    (["code", "nope"], "unknown prompt category or set 'nope'"),
    (["code", "code"], "lists a category more than once"),
    ([], "is an empty list"),
    ({"file": "x"}, 'must be "standard", "builtin", a list of categories and sets or a file path'),
    ("", 'must be "standard", "builtin"'),
    ("missing.txt", "does not exist"),
    (".", "is a folder, not a prompt file"),
    ("bad.jsonl", "bad.jsonl:1: invalid JSON"),
    ("$DB_PROMPTS_UNSET/p.txt", "environment variable $DB_PROMPTS_UNSET is not set"),
])
def test_check_prompt_setting_problems(tmp_path, monkeypatch, value, cause):
    monkeypatch.delenv("DB_PROMPTS_UNSET", raising=False)
    write(tmp_path, "bad.jsonl", "{nope\n")
    _, problems = check(value, tmp_path)
    assert len(problems) == 1, problems
    (p,) = problems
    assert p.path.startswith("$.settings.prompts") and cause in p.message and p.fix


def test_check_prompt_setting_expands_variables(tmp_path, monkeypatch):
    write(tmp_path, "p.txt", "x\n")
    monkeypatch.setenv("DB_PROMPTS", str(tmp_path))
    assert check("$DB_PROMPTS/p.txt") == (str(tmp_path / "p.txt"), [])
    monkeypatch.delenv("DB_PROMPTS")
    assert check("${DB_PROMPTS:-" + str(tmp_path) + "}/p.txt") == (str(tmp_path / "p.txt"), [])


def test_prompt_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        BUILTIN_PROMPTS[0].id = "x"  # type: ignore[misc]
    assert isinstance(BUILTIN_PROMPTS[0], Prompt)
