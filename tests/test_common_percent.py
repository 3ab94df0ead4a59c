"""draftbench.common.percent: the one way percentages are written (fractions, and ratios as changes)."""

from __future__ import annotations

import pytest
from draftbench.common.percent import percent, percent_change, signed_change


def test_a_fraction_as_a_percentage():
    assert percent(0.753) == "75%" and percent(0.753, 1) == "75.3%" and percent(None) == "n/a"
    assert percent(0.0) == "0%" and percent(1.0) == "100%"


@pytest.mark.parametrize("ratio, text", [(1.12, "+12%"), (0.88, "\u221212%"), (0.996, "\u22120.4%"),
                                         (1.004, "+0.4%"), (1.0, "+0.0%"), (2.5, "+150%")])
def test_a_ratio_as_a_signed_change(ratio, text):
    # one decimal near zero, so a small slowdown never reads as "−0%"; a typographic minus
    assert signed_change(ratio) == text


def test_a_ratio_as_a_change_with_fixed_decimals_and_as_a_number():
    assert signed_change(1.02, digits=1) == "+2.0%" and signed_change(0.95, digits=1) == "\u22125.0%"
    assert percent_change(1.12345) == 12.35 and percent_change(0.9) == -10.0 and percent_change(1.0) == 0.0
