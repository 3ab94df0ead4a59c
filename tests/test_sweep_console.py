"""What the person watching a sweep reads (issue 37): a long block says how far it got, "Elapsed" once, and a
resumed race numbers its steps on instead of from 1 again. The console with a fake clock; the race (in stages)
with the in-process fake backend."""

from __future__ import annotations

import io
import re

from draftbench.sweep import EXIT_INTERRUPTED, Console
from draftbench.sweep.console import PROGRESS_EVERY_S, Reporter

from fakes.inprocess import FakeBackend
from test_sweep_race import BAD, BEST, GOOD, SLOW, config, script, sweep


def console(times: list[float]) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    clock = iter(times)
    return Console(out, clock=lambda: next(clock)), out


def test_a_long_block_says_how_far_it_got_not_only_dots():
    # the block starts at 0; its requests end 30 s, 70 s, 100 s and 170 s in
    c, out = console([0.0, 30.0, 70.0, 100.0, 170.0])
    c.benchmarking()
    for done in range(1, 5):
        c.request_done(done, 8)
    assert out.getvalue() == "  Benchmarking ... .. 2/8 requests in 1m10s .. 4/8 requests in 2m50s "
    assert PROGRESS_EVERY_S == 60.0
    quick, out = console([0.0, 1.0, 2.0])
    quick.benchmarking()
    quick.request_done(1, 2)
    quick.request_done(2, 2)
    assert out.getvalue() == "  Benchmarking ... .."       # a short block: dots, as upstream


def test_elapsed_is_printed_once_when_reported_twice_in_a_row():
    c, out = console([])
    c.progress(60, 600, at_most=True)
    c.progress(61, 590, at_most=True)        # a race reports after its last step and after the pass
    c.line("  Race: a look")
    c.progress(62, 300, at_most=True)        # after something else: said again
    assert out.getvalue().count("Elapsed") == 2


def test_a_resumed_race_numbers_its_steps_on(tmp_path):
    titles: list[str] = []

    class StopAtSecondBlock(Reporter):
        def combination_started(self, index, total, title, at_most=False):
            titles.append(f"[{index}/{'≤' if at_most else ''}{total}] {title}")
            if "[stage 2/" in title:
                raise KeyboardInterrupt

    class Titles(Reporter):
        def combination_started(self, index, total, title, at_most=False):
            titles.append(f"[{index}/{'≤' if at_most else ''}{total}] {title}")

    cfg = config(tmp_path)
    noisy = dict(speedup={BEST: 1.5, GOOD: 1.45, BAD: 0.6, SLOW: 0.97}, noise={BEST: 0.1, GOOD: 0.1})
    code, _ = sweep(tmp_path, FakeBackend(script(**noisy)), cfg, reporter=StopAtSecondBlock())
    assert code == EXIT_INTERRUPTED
    measured = [t for t in titles if "[stage 1/" in t]
    numbers_before = [int(re.match(r"\[(\d+)/", t).group(1)) for t in measured]
    titles.clear()
    sweep(tmp_path, FakeBackend(script(**noisy)), cfg, reporter=Titles())
    first = int(re.match(r"\[(\d+)/", titles[0]).group(1))
    assert first == max(numbers_before) + 1, (numbers_before, titles[:3])
