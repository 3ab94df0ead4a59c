"""draftbench.results.specs: the JSON types a results file is checked against."""

from __future__ import annotations

from draftbench.results.specs import NUM, Num


def test_an_integer_too_large_for_a_float_is_no_finite_number():
    """JSON allows 10**400; as a number it used to end in "unexpected OverflowError … This is a bug"."""
    for spec in (NUM, Num(minimum=0, maximum=10)):
        assert not spec.quick(10**400)
        where, message = spec.check(10**400, "$.x")
        assert where == "$.x" and "must be a finite number" in message and "integer 1000" in message
    assert NUM.quick(10**300) and NUM.check(-(10**300), "$") is None
