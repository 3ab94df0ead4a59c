"""draftbench.results.specs: the fast walk (``valid``, no JSON paths) agrees with the walk that names the
bad value (``check``) on any change to a good file, so that checking a file once with ``valid`` and
naming a problem with ``check`` only where it says no weakens nothing."""

from __future__ import annotations

import copy
import json
import math

from draftbench.results.schema import RESULTS_FILE, first_problem
from draftbench.results.specs import NUM, Num
from hypothesis import given, settings
from hypothesis import strategies as st

from share_data import box_a
from test_results_file import full_file
from test_results_file_hostile import WRONG_TYPES, good_results, set_path

GOOD_FILES = [json.loads(json.dumps(f)) for f in (good_results(), box_a().to_dict(), full_file().to_dict())]


def positions(value, path="$"):
    """Every JSON path in ``value`` (objects' keys and lists' items), with its parent and key."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield value, key
            yield from positions(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield value, i
            yield from positions(item, f"{path}[{i}]")


NASTY = [None, True, False, 0, -1, 1, 0.5, -0.5, 1e308, -1e308, math.nan, math.inf, -math.inf, 10**400, -(10**400),
         10**12 + 1, 10**7 + 1, "", "x", "ok", "baseline", "speculative", [], [1], ["x"], [None], {}, {"n": 1},
         {"ratio": 1.0}, {"ratio": -1.0}, {"message": "m"}, [{"k": 1, "predicted_tps": 1.0}]]
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                       max_size=3), max_leaves=6)


def agree(data) -> None:
    problem = RESULTS_FILE.check(data, "$")
    assert RESULTS_FILE.valid(data) is (problem is None), problem
    assert first_problem(data) == problem


def test_good_files_are_valid_without_a_path_being_built():
    for data in GOOD_FILES:
        assert RESULTS_FILE.valid(data) and RESULTS_FILE.check(data, "$") is None


def test_every_hostile_value_is_refused_by_the_fast_walk_too():
    for path, value, _ in WRONG_TYPES:
        data = set_path(good_results(), path, value)
        assert not RESULTS_FILE.valid(data)
        agree(data)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_fast_walk_and_the_named_walk_agree_on_any_one_change(data):
    doc = copy.deepcopy(data.draw(st.sampled_from(GOOD_FILES)))
    parent, key = data.draw(st.sampled_from(list(positions(doc))))
    parent[key] = data.draw(st.sampled_from(NASTY) | JSON_VALUES)
    agree(doc)


def test_an_integer_too_large_for_a_float_is_no_finite_number():
    """JSON allows 10**400; as a number it used to end in "unexpected OverflowError … This is a bug"."""
    for spec in (NUM, Num(minimum=0, maximum=10)):
        assert not spec.valid(10**400)
        where, message = spec.check(10**400, "$.x")
        assert where == "$.x" and "must be a finite number" in message and "integer 1000" in message
    assert NUM.valid(10**300) and NUM.check(-(10**300), "$") is None
