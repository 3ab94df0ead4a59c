"""Where accepted draft tokens landed in an answer, from LM Studio's streamed fragments.

LM Studio's SDK streams an answer as fragments, each with ``tokensCount`` and ``containsDrafted``
(the fragment holds at least one accepted draft token). A request keeps them as a compact trace:
space-separated items, ``"<n>d"`` for one fragment of n tokens that contains drafted tokens and
``"<n>"`` for n tokens in fragments that do not (merged: their boundaries say nothing about
drafting). ``"2 3d 1 1d 5"`` = 2 plain tokens, a 3-token drafted fragment, 1 plain, 1 drafted, 5 plain.

What the trace can show: runs of drafted tokens (consecutive drafted fragments merged) and where
in the answer they landed. What it cannot: rejected and ignored draft tokens (never streamed),
verify-step boundaries (one run may span several steps), and which tokens of a drafted fragment
were drafted (a fragment may also hold the target's own token), so drafted-fragment tokens are an
upper bound on accepted tokens there; the typed statistics give the exact accepted count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_ITEM = re.compile(r"^(\d+)(d?)$")
QUARTERS = 4


def encode(fragments: Iterable[tuple[int, bool]]) -> str:
    """(tokensCount, containsDrafted) per fragment, in order → the compact trace."""
    items: list[str] = []
    plain = 0
    for tokens, drafted in fragments:
        if tokens <= 0:
            continue
        if drafted:
            if plain:
                items.append(str(plain))
                plain = 0
            items.append(f"{tokens}d")
        else:
            plain += tokens
    if plain:
        items.append(str(plain))
    return " ".join(items)


def decode(trace: str) -> list[tuple[int, bool]]:
    """The trace back as (tokens, drafted) items. Raises ValueError for anything else."""
    out = []
    for item in trace.split():
        match = _ITEM.match(item)
        if not match:
            raise ValueError(f"not a fragment trace item: {item!r}")
        out.append((int(match.group(1)), bool(match.group(2))))
    return out


@dataclass(frozen=True)
class FragmentProfile:
    """One answer's drafting, as far as its fragments show it."""

    tokens: int
    drafted_tokens: int
    runs: tuple[int, ...]                      # tokens per run of consecutive drafted fragments
    drafted_by_quarter: tuple[int, ...]        # drafted tokens in each quarter of the answer
    tokens_by_quarter: tuple[int, ...]


def profile(trace: str) -> FragmentProfile:
    items = decode(trace)
    total = sum(n for n, _ in items)
    runs: list[int] = []
    drafted_q = [0] * QUARTERS
    tokens_q = [0] * QUARTERS
    position = 0
    previous_drafted = False
    for n, drafted in items:
        if drafted:
            if previous_drafted:
                runs[-1] += n
            else:
                runs.append(n)
        for i in range(position, position + n):
            quarter = min(QUARTERS - 1, QUARTERS * i // total)
            tokens_q[quarter] += 1
            if drafted:
                drafted_q[quarter] += 1
        position += n
        previous_drafted = drafted
    return FragmentProfile(tokens=total, drafted_tokens=sum(drafted_q), runs=tuple(runs),
                           drafted_by_quarter=tuple(drafted_q), tokens_by_quarter=tuple(tokens_q))


def summarize(traces: Iterable[str | None]) -> dict | None:
    """Row summary over the requests that have a trace; None when none has one (not measured)."""
    profiles = []
    for trace in traces:
        if trace is None:
            continue
        try:
            profiles.append(profile(trace))
        except ValueError:
            continue       # a damaged trace in an edited file: left out rather than guessed
    if not profiles:
        return None
    tokens = sum(p.tokens for p in profiles)
    drafted = sum(p.drafted_tokens for p in profiles)
    runs = [r for p in profiles for r in p.runs]
    histogram: dict[str, int] = {}
    for r in sorted(runs):
        histogram[str(r)] = histogram.get(str(r), 0) + 1
    by_quarter = []
    for q in range(QUARTERS):
        q_tokens = sum(p.tokens_by_quarter[q] for p in profiles)
        q_drafted = sum(p.drafted_by_quarter[q] for p in profiles)
        by_quarter.append(round(q_drafted / q_tokens, 4) if q_tokens else None)
    return {
        "requests": len(profiles),
        "tokens": tokens,
        "drafted_tokens": drafted,
        "drafted_share": round(drafted / tokens, 4) if tokens else None,
        "runs": len(runs),
        "mean_run_tokens": round(sum(runs) / len(runs), 3) if runs else None,
        "max_run_tokens": max(runs) if runs else None,
        "run_lengths": histogram,
        "drafted_share_by_quarter": by_quarter,
    }


def describe(summary: dict) -> str:
    """One console line for a row's fragment summary."""
    if not summary.get("runs"):
        return "LM Studio's fragments show no accepted draft tokens"
    quarters = " ".join("n/a" if s is None else f"{s:.0%}" for s in summary["drafted_share_by_quarter"])
    return (f"drafted runs (from LM Studio's fragments): mean {summary['mean_run_tokens']:.1f} tokens, longest "
            f"{summary['max_run_tokens']}; share of the answer in drafted fragments by quarter: {quarters}")
