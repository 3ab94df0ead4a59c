"""Every measured request records how much of the machine other programs took while it ran, read from
/proc around the request (the real llama-server; a burner process we start stands in for another program).
The assertion is the mechanism — the burner's share shows up on the request it overlapped — not a speed."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from draftbench.config.prompts import BUILTIN_PROMPTS
from draftbench.measure.sequential import MeasureOptions, measure_one

BURN = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end: pass\n"


@pytest.mark.llama
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="other programs' CPU share is read from /proc")
def test_a_request_records_other_programs_cpu_share_while_it_ran(start_llama, models):
    server = start_llama(models["base"])
    options = MeasureOptions(runs=1, warmup=0, max_tokens=48)
    quiet = measure_one(server, BUILTIN_PROMPTS[0], options, seed=1, max_tokens=48)
    assert quiet.other_cpu_share is not None and 0.0 <= quiet.other_cpu_share <= 1.0
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(2)]
    try:
        time.sleep(0.3)                      # both burners running before the request starts
        busy = measure_one(server, BUILTIN_PROMPTS[0], options, seed=1, max_tokens=48)
    finally:
        for p in burners:
            p.kill()
            p.wait(timeout=10)
    # two busy-looping processes on the machine take a good part of it whatever else runs there
    assert busy.other_cpu_share is not None and busy.other_cpu_share >= 0.2, busy.other_cpu_share
