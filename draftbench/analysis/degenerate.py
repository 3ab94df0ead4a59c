"""Degenerate output: the target repeating itself, which makes every speculative method look perfect.

A model that loops (a base model answering a chat request, a tiny model, ``max_tokens`` cutting a
loop short) produces text that any n-gram method, and any draft, predicts trivially: 100%
acceptance at mean length 15.7 was seen on a model that only repeated ``<|im_start|>user``. Such
a speed-up says nothing about real text.

A *loop* here is a stretch of output where one pattern of 1–200 tokens repeats back to back at
least three times, or — when the stretch runs into the end of the answer, cut off by ``max_tokens``
while still repeating — a pattern of a sentence's length (6 tokens or more) twice and more (the text
from its first occurrence to the end of the last, partial, repetition is covered). A loop covers at
least 8 tokens ("..." is not one), and a pattern of punctuation alone within a line (a table's
"| --- | --- |" rule) is formatting unless it runs into the end of the answer. The share of a request's output covered by its longest loop is its ``loop_share``; a
request of the target alone with a share of at least :data:`LOOP_SHARE_LIMIT` is *looping*, and a
speculative row whose requests pair with looping baseline requests rests (partly) on them — said
only where the loops *raise* its speed-up (a slowdown, a row that never drafted, or one that gains no
more on the looping requests than on the others rests on nothing).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from ..results.file import Row
from ..results.findings import Code, Finding
from ..results.kinds import Role
from ..results.speedup import Speedup
from .comparison import measured_pairs
from .pairing import units
from .stats import SETTINGS_FLAGS, describe_subset, speedup_of_units

LOOP_SHARE_LIMIT = 0.3       # 30% of an answer spent in one loop inflates acceptance well beyond the real text
MAX_PERIOD_TOKENS = 200
MIN_REPEATS = 3              # back to back, anywhere in the answer
MIN_LOOP_TOKENS = 8          # "...", "---" or a few closing braces are punctuation, not a loop
# An answer that max_tokens cut off while it repeated shows two occurrences and part of a third
# (a 16-token sentence said 2.5 times in 48 tokens): a sentence-long pattern that repeats into the
# very end is still going.
MIN_CUT_OFF_PERIOD = 6
MIN_TOKENS = 12              # shorter answers are not judged
TOKEN = re.compile(r"\w+|[^\w\s]|\n")


def tokens(text: str) -> list[str]:
    """Words, single punctuation marks and line breaks (spaces dropped): loops of chat-template tokens
    (``<|im_start|>user``), of blank lines and of sentences all become repeated token patterns."""
    return TOKEN.findall(text)


@lru_cache(maxsize=8192)
def loop_share(text: str | None) -> float | None:
    """Share of ``text``'s tokens covered by its longest loop (0.0: none); None for a text too short
    to judge."""
    if text is None:
        return None
    toks = tokens(text)
    n = len(toks)
    if n < MIN_TOKENS:
        return None
    # words and line breaks seen before each position: a pattern without any is punctuation within a line
    content = [0]
    for tok in toks:
        content.append(content[-1] + (tok == "\n" or tok[0].isalnum() or tok[0] == "_"))
    best = 0
    last = n - 1
    for period in range(1, min(MAX_PERIOD_TOKENS, n // 2) + 1):
        run = 0
        full = (MIN_REPEATS - 1) * period
        cut_off = period >= MIN_CUT_OFF_PERIOD
        for i in range(period, n):
            if toks[i] == toks[i - period]:
                run += 1
                # run tokens equal the ones a period earlier: the pattern covers run + period tokens
                if run + period > best and (run >= full or (cut_off and i == last and run >= period)):
                    start = i - run - period + 1
                    # a table rule ("| --- | --- |") or a row of dashes ends with its line; a run of
                    # punctuation that only max_tokens stopped ("!!!!…") is a loop
                    if i == last or content[start + period] > content[start]:
                        best = run + period
            else:
                run = 0
    return round(best / n, 4) if best >= MIN_LOOP_TOKENS else 0.0


def looping_requests(row: Row) -> dict[tuple[str, int], float]:
    """(prompt_id, run) → loop share, for the row's measured requests that loop."""
    out = {}
    for r in row.requests:
        share = loop_share(r.text) if r.error is None else None
        if share is not None and share >= LOOP_SHARE_LIMIT:
            out[(r.prompt_id, r.run)] = share
    return out


def _prompt_list(loops: dict[tuple[str, int], float]) -> str:
    worst: dict[str, float] = {}
    for (pid, _run), share in loops.items():
        worst[pid] = max(worst.get(pid, 0.0), share)
    return ", ".join(f"{pid} ({share:.0%} of it)" for pid, share in worst.items())


def raised_by_loops(every: Speedup | None, without: Speedup | None) -> bool:
    """Whether the looping requests raise a speed-up: it is one (above 1) on every request, and higher
    than on the requests without loops (or there are none without)."""
    if every is None or every.ratio <= 1:
        return False
    return without is None or every.ratio > without.ratio


def fix(flags: Mapping[str, str]) -> str:
    return ("use an instruct model with its chat template (a base model answering chat requests loops), raise "
            f"{flags['max_tokens']} past the loop, or use prompts the target answers without looping")


def assess(row: Row, baseline: Row, *, noise_floor: float,
           flags: Mapping[str, str] = SETTINGS_FLAGS) -> tuple[dict | None, Finding | None]:
    """For the baseline itself or a row compared with it: which of its requests rest on looping output
    of the target alone, and the speed-up without them. (None, None) when nothing loops. ``flags``: how
    the settings are named (:data:`stats.SETTINGS_FLAGS`, or bench.py's flags for its A/B)."""
    loops = looping_requests(baseline)
    if not loops:
        return None, None
    own = row is baseline or row.role in (Role.BASELINE, Role.CONTROL)
    if not own and (row.speculation_active is False or row.draft_n == 0):
        return None, None       # it never drafted: there is no speed-up for loops to flatter
    # a compared row: the pairs its own speed-up is built on (no session turn, no confirmation) — a staged design
    # measures each prompt beside every stage's baseline server, and matching by (prompt, run) alone kept one of
    # them at random (make demo, 2026-11-29: −10.8% where the row's pairs say +4.1%, resting on loops, no finding)
    fresh = [] if own else measured_pairs(row, baseline)[0]
    counted = {(r.prompt_id, r.run) for r in row.requests if r.error is None} if own else \
        {(p.prompt_id, p.run) for p in fresh}
    affected = {k: v for k, v in loops.items() if k in counted}
    if not affected:
        return None, None
    info: dict = {"looping_requests": len(affected), "requests": len(counted),
                  "prompts": sorted({pid for pid, _ in affected}), "max_loop_share": max(affected.values()),
                  "limit": LOOP_SHARE_LIMIT}
    what = f"on {len(affected)} of {len(counted)} requests ({_prompt_list(affected)})"
    if own:
        return info, Finding(Code.DEGENERATE_OUTPUT, f"the target's own output loops {what}: speculative rows "
                             "measured on these requests look faster than they would on real text", flags["prompts"])
    every = speedup_of_units(units(fresh), noise_floor=noise_floor)
    without = speedup_of_units(units(p for p in fresh if (p.prompt_id, p.run) not in loops), noise_floor=noise_floor)
    if not raised_by_loops(every, without):
        return None, None       # a slowdown, or one the looping requests do not make look better
    info["speedup_without_loops"] = without.to_dict() if without else None     # Row.degenerate_output is JSON
    rest = (f"; on the other requests: {describe_subset(without)}" if without
            else "; no other request to compare")
    return info, Finding(Code.DEGENERATE_OUTPUT, f"this speed-up rests on looping output: the target alone "
                         f"repeats itself {what}, which any draft or n-gram method predicts trivially{rest}. "
                         f"Fix: {fix(flags)}", flags["prompts"])
