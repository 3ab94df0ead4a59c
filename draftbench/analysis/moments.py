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
