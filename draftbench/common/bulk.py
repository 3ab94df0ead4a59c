"""Building many small objects at once without the cyclic garbage collector in the way.

Loading a 50k-row results file builds millions of dicts, lists and dataclasses, none of them in a
reference cycle; Python's collector, triggered by the allocations, walked them again and again
and took about 40% of loading and of analysing such a file. :func:`collector_paused` holds it off
for one bulk step (plain reference counting still frees everything as usual) and restores it.
Loading and analysing use it; so do the one-shot commands that read files and exit (``--export``,
``--compare``, ``--redact-paths``, ``--chart-only``), for their whole run: otherwise the collector's
first pass after a bulk step walks every object built in it once more.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
