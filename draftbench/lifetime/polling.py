"""Waiting for something to become true: short, growing intervals and a deadline — never a fixed sleep.

A leaf module: every wait in draftbench (a server becoming ready, a port being released, LM
Studio answering) goes through :func:`poll`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(check: Callable[[], T | None], timeout_s: float, *, first_delay_s: float = 0.05,
         max_delay_s: float = 0.5, growth: float = 1.5) -> T | None:
    """Call ``check`` until it returns something other than None (returned) or ``timeout_s`` passes
    (None). ``check`` may raise to stop waiting early (e.g. the process it waits for exited); it is
    called at least once, and once more at the deadline."""
    deadline = time.monotonic() + timeout_s
    delay = first_delay_s
    while True:
        value = check()
        if value is not None:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        time.sleep(min(delay, remaining))
        delay = min(delay * growth, max_delay_s)
