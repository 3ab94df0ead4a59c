"""Sample variance and standard deviation in floats.

``statistics.variance`` sums exact fractions: on a results file's thousands of requests, summarised after
every row, that was most of a sweep's analysis time. Two passes in floats agree with it far beyond the
four digits anything here is rounded to.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def variance(values: Sequence[float]) -> float:
    """The sample variance (n − 1); 0 for fewer than two values."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = math.fsum(values) / n
    return math.fsum((v - mean) ** 2 for v in values) / (n - 1)


def stdev(values: Sequence[float]) -> float:
    return math.sqrt(variance(values))


def ratio_of(log_value: float) -> float:
    """A log-scale value back on the ratio scale. An interval's end from a handful of noisy pairs can lie
    beyond a float's range (a t multiplier of thousands at one degree of freedom): it is then infinite
    (or 0), as an unbounded end is, instead of an OverflowError mid-sweep."""
    if math.isnan(log_value):
        return log_value
    if log_value > LOG_FLOAT_MAX:
        return math.inf
    return math.exp(log_value)        # underflows to 0.0 by itself


LOG_FLOAT_MAX = math.log(1.7976931348623157e308)
