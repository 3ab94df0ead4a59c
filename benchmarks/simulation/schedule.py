"""The order in which a sweep measures: which server session serves which request, in time order.

A schedule is a pure function of the plan: it decides which session (and so which session offset)
and which moment (and so which drift) every request of every row gets. ``sequential`` is today's
design (``draftbench/sweep/session.py`` running ``plan()``): one server session per row, rows one
after another, each row's requests in the runner's order (runs outer, prompts inner).

To simulate another design, pass another function with the same signature to
:func:`simulation.sweeps.exhaustive` (``--schedule`` in ``benchmarks/verdicts.py`` lists them); when
the sweep gets its own shared schedule function (``draftbench/sweep/schedule.py``, issue 23), wrap
that one here so the simulator and the sweep cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One request: in server session ``session`` (one load), of plan row ``row``, (run, prompt index)."""

    session: int
    row: int
    run: int
    prompt: int


def sequential(n_rows: int, order: Sequence[tuple[int, int]]) -> tuple[Step, ...]:
    """Today's sweep: row after row, each on its own server session, every request of ``order``."""
    return tuple(Step(row, row, run, prompt) for row in range(n_rows) for run, prompt in order)


def runner_order(n_prompts: int, runs: int) -> list[tuple[int, int]]:
    """(run, prompt index) in the order ``measure.sequential.run_prompts`` measures a whole row."""
    return [(run, index) for run in range(runs) for index in range(n_prompts)]


SCHEDULES = {"sequential": sequential}
