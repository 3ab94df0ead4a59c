"""Loop detection at short and long max_tokens: answers cut off while repeating are loops; lists,
code, JSON and tables that merely share structure are not (see draftbench/analysis/degenerate.py)."""

from __future__ import annotations

import pytest
from draftbench.analysis.degenerate import LOOP_SHARE_LIMIT, TOKEN, loop_share, tokens

SENTENCE = "The keeper climbed the stairs again and looked out over the dark and silent sea. "


def cut(text: str, n_tokens: int) -> str:
    """``text`` cut after ``n_tokens`` of the detector's tokens, as max_tokens cuts an answer."""
    ends = [m.end() for m in TOKEN.finditer(text)]
    return text if n_tokens >= len(ends) else text[:ends[n_tokens - 1]]


def test_a_sentence_said_two_and_a_half_times_in_48_tokens_is_a_loop():
    answer = cut("Once upon a time, " + SENTENCE * 6, 48)
    assert len(tokens(answer)) == 48 and answer.count("The keeper climbed") == 3
    assert loop_share(answer) >= LOOP_SHARE_LIMIT
    assert loop_share(cut("Once upon a time, " + SENTENCE * 12, 96)) >= LOOP_SHARE_LIMIT     # as before


def test_loops_are_found_at_every_length_where_a_repeat_is_visible():
    for n in (32, 40, 48, 64, 128, 256, 512):       # the sentence is 16 tokens: twice, then part of it
        assert loop_share(cut(SENTENCE * 40, n)) >= LOOP_SHARE_LIMIT, n
    assert loop_share(cut("I am a robot. " * 20, 16)) >= LOOP_SHARE_LIMIT      # 5 tokens, three times
    assert loop_share("Sure, here it is: " + "!" * 30) > 0.5                     # one token, until max_tokens
    chat_template = "Sure! " + "<|im_start|>user\n" * 40
    assert loop_share(chat_template) > 0.9 and loop_share(cut(chat_template, 22)) > 0.5   # 8 tokens, 2.5 times
    assert loop_share("Hello.\n" + "\n" * 60) > 0.9


def test_a_sentence_said_twice_inside_an_answer_is_not_a_loop():
    said_twice = ("Take the train to the station and walk to the hotel. " * 2
                  + "From there, the museum is ten minutes away on foot, and the old harbour is just beyond it, "
                    "where the fishing boats come in every evening around six.")
    assert loop_share(said_twice) < LOOP_SHARE_LIMIT


def test_too_short_to_judge():
    assert loop_share("Yes.") is None and loop_share(None) is None
    assert loop_share("No, it is not. It is fine.") is None


LIST = "\n".join(f"{i}. {name} — capital {capital}, population about {pop} million, area {area} km²."
                 for i, (name, capital, pop, area) in enumerate([
                     ("Russia", "Moscow", 144, "17,098,242"), ("Canada", "Ottawa", 38, "9,984,670"),
                     ("China", "Beijing", 1412, "9,596,961"), ("United States", "Washington, D.C.", 333, "9,833,520"),
                     ("Brazil", "Brasília", 214, "8,515,767"), ("Australia", "Canberra", 26, "7,692,024"),
                     ("India", "New Delhi", 1408, "3,287,263"), ("Argentina", "Buenos Aires", 46, "2,780,400")], 1))

CODE = '''class Node:
    def __init__(self, key: int) -> None:
        self.key = key
        self.left: Node | None = None
        self.right: Node | None = None


class BinarySearchTree:
    """A binary search tree of integer keys."""

    def __init__(self) -> None:
        self.root: Node | None = None

    def insert(self, key: int) -> None:
        """Insert ``key``; duplicates are ignored."""
        if self.root is None:
            self.root = Node(key)
            return
        node = self.root
        while True:
            if key < node.key:
                if node.left is None:
                    node.left = Node(key)
                    return
                node = node.left
            elif key > node.key:
                if node.right is None:
                    node.right = Node(key)
                    return
                node = node.right
            else:
                return
'''

JSON_USERS = ",\n".join(
    f'  {{"id": {i}, "firstName": "{first}", "lastName": "{last}", "email": "{first.lower()}@example.com", '
    f'"age": {age}, "address": {{"street": "{i} Main St", "city": "{city}", "zipCode": "{10000 + i}"}}, '
    f'"hobbies": ["reading", "hiking", "chess"]}}'
    for i, (first, last, age, city) in enumerate([("Ann", "Lee", 31, "Austin"), ("Bo", "Kim", 45, "Boston"),
                                                  ("Cy", "Ode", 27, "Denver"), ("Di", "Ray", 52, "Miami")], 1))

TABLE = ("| Country | Capital | Population |\n| --- | --- | --- |\n| France | Paris | 68 million |\n"
         "| Spain | Madrid | 48 million |\n| Italy | Rome | 59 million |\n| Poland | Warsaw | 38 million |\n")

CLOSING = "function walk(tree) {\n  if (tree) {\n    for (const child of tree.children) {\n      if (child) {\n" \
          "        walk(child);\n      }\n    }\n  }\n}\n"


@pytest.mark.parametrize("text", [LIST, CODE, JSON_USERS, TABLE, CLOSING], ids=["list", "code", "json", "table",
                                                                               "closing-braces"])
def test_lists_code_json_and_tables_are_not_loops_at_any_cut(text):
    for n in (12, 24, 48, 96, 200, 10_000):
        share = loop_share(cut(text, n))
        assert share is None or share < LOOP_SHARE_LIMIT, (n, share)
