"""Physical bounds on what a results file may hold as a measurement.

A live server's figures are held to these while measuring (``backends/http/server_values.py``); a
loaded file is held to the same on load, each value with its JSON path: a per-request rate of
1e308 tok/s, a negative time or a count of ``10**400`` is a broken counter or an edited file, and
would otherwise reach the verdict ("expect +10051829815…%"). The row's fields declare these specs
(:mod:`draftbench.results.row`, :mod:`draftbench.results.value_shapes`).
"""

from __future__ import annotations

from ..common.percent import MAX_RATIO  # noqa: F401  (re-exported: a speed-up's bound, declared once in common)
from .specs import Int, MapOf, Num

MAX_TOKENS = 10**8                   # tokens in one request
MAX_TOKENS_PER_SECOND = 10**7        # no hardware decodes faster, even a batch of tiny models on a GPU
MAX_SECONDS = 10**7                  # 116 days: longer than any request, model load or combination
MAX_TOKEN_SUM = 10**12               # tokens summed over a combination's requests
MAX_STAGES = 10**5                   # a request's stage: settings.stages and --more are at most 1,000 a run

RATE = Num(minimum=0, maximum=MAX_TOKENS_PER_SECOND, unit="tok/s")
SECONDS = Num(minimum=0, maximum=MAX_SECONDS, unit="s")
TOKENS = Int(minimum=0, maximum=MAX_TOKENS, unit="tokens")
STEPS = Int(minimum=0, maximum=MAX_TOKENS, unit="steps")
TOKEN_SUM = Int(minimum=0, maximum=MAX_TOKEN_SUM, unit="tokens")
STEP_SUM = Int(minimum=0, maximum=MAX_TOKEN_SUM, unit="steps")
COUNT = Int(minimum=0, maximum=MAX_TOKEN_SUM)
FRACTION = Num(minimum=0, maximum=1)
NON_NEGATIVE = Num(minimum=0)
# summaries of per-request figures (n, mean, median, stdev, cv, min, max, p95, ci95_low, ci95_high): a CI's
# low end may fall below 0, so only their size is bounded
RATE_SUMMARY = MapOf(Num(minimum=-MAX_TOKENS_PER_SECOND, maximum=MAX_TOKENS_PER_SECOND, unit="tok/s"))
TIME_SUMMARY = MapOf(Num(minimum=-MAX_SECONDS, maximum=MAX_SECONDS, unit="s"))
