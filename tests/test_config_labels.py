"""draftbench.config.labels through config validation: names and labels that cannot be
shown or used in file names are config errors with their JSON path.
"""

from __future__ import annotations

import json

import pytest

from test_config_extra_args import config, problems


def test_a_300_character_name_is_a_config_error():
    [p] = problems(config(name="n" * 300))
    assert p.path == "$.name" and "300 characters" in p.message and "at most 100" in p.fix


@pytest.mark.parametrize("label", ["\u200b\u200b", "\u202e", "\x9b31m"])
def test_invisible_or_control_labels_are_config_errors(label):
    [p] = problems(config(targets=[{"label": label, "path": "/t.gguf"}]))
    assert p.path == "$.targets[0].label"
    assert "\u202e" not in str(p) and "\x9b" not in str(p)


def test_lone_surrogates_anywhere_are_config_errors_with_their_path():
    data = json.loads('{"name": "x", "targets": [{"label": "T\\ud800", "path": "/t.gguf"}], '
                      '"settings": {"extra_args": ["--x", "\\udfff"]}}')
    found = problems(data)
    assert [p.path for p in found] == ["$.targets[0].label", "$.settings.extra_args[1]"]
    str(found[0]).encode("utf-8")
