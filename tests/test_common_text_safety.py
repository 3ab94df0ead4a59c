"""draftbench.common.text_safety: terminal escapes and invisible characters from users and servers are
neutralised before they are printed, and refused before text becomes a label. (Its neighbours:
test_common_redact_secrets, test_config_extra_args, test_config_labels, test_results_output_paths,
test_results_lock.)
"""

from __future__ import annotations

import pytest
from draftbench.common.text_safety import safe_text, text_problem

HOSTILE = [
    "\x1b[31mred\x1b[0m",                   # CSI: colours
    "\x1b]0;pwned\x07",                     # OSC: window title
    "\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\",   # OSC 8 hyperlink
    "\x9b2J",                               # CSI as one C1 byte: clear screen
    "\x9d0;title\x9c",                      # OSC as C1
    "line\rover",                           # carriage return overwrites the line
    "bell\x07", "nul\x00", "del\x7f",
    "abc\u202edcba",                        # right-to-left override
    "\u2066iso\u2069",                      # isolates
    "lone \ud800 surrogate",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_safe_text_leaves_no_control_character(text):
    out = safe_text(text)
    assert not any((ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f for c in out), repr(out)
    assert "\u202e" not in out and "\u2066" not in out
    out.encode("utf-8")                     # printable on any UTF-8 terminal (no lone surrogate)
    assert "\\x" in out or "\\u" in out     # shown, not dropped: a person can see something was there


def test_safe_text_keeps_plain_and_international_text():
    for text in ("7B Q4_K_M", "Qwen2.5 – 72B (ß, 日本語, emoji 🙂)", "two\nlines\tand tab"):
        assert safe_text(text) == text
    assert safe_text("a\nb", keep_newlines=False) == "a\\x0ab"


@pytest.mark.parametrize("label, expected", [
    ("\u200b", "invisible"),                # zero-width space
    ("\u200b\u200c\u200d\u2060", "invisible"),
    ("\u202e\u202d", "invisible"),          # only direction controls
    ("\u3164", "invisible"),                # Hangul filler
    ("\u00a0\u3000", "invisible"),          # no-break and ideographic spaces
    ("a\x85b", "control character"),        # C1 NEL
    ("x\ud800", "lone surrogate"),
])
def test_text_problem_refuses_invisible_controls_and_surrogates(label, expected):
    assert expected in (text_problem(label) or "")


def test_text_problem_accepts_ordinary_labels():
    for label in ("7B Q4_K_M", "Llama 3.1 8B (imatrix)", "模型 7B", "a\u200db"):
        assert text_problem(label) is None


