"""The fragment trace: encoding, decoding, runs, placement and the row summary."""

from __future__ import annotations

import pytest
from draftbench.results import fragments


def test_plain_fragments_merge_and_drafted_ones_stay_apart():
    trace = fragments.encode([(1, False), (1, False), (3, True), (2, True), (1, False), (0, False), (1, True)])
    assert trace == "2 3d 2d 1 1d"
    assert fragments.decode(trace) == [(2, False), (3, True), (2, True), (1, False), (1, True)]
    assert fragments.encode([]) == ""
    with pytest.raises(ValueError):
        fragments.decode("2 3x")


def test_runs_merge_adjacent_drafted_fragments_and_quarters_follow_token_positions():
    p = fragments.profile("2 3d 2d 1 1d 3")        # 12 tokens: quarters of 3 tokens each
    assert (p.tokens, p.drafted_tokens, p.runs) == (12, 6, (5, 1))
    # positions 0-1 plain, 2-6 drafted, 7 plain, 8 drafted, 9-11 plain
    assert p.tokens_by_quarter == (3, 3, 3, 3)
    assert p.drafted_by_quarter == (1, 3, 2, 0)


def test_summary_over_requests_and_none_when_nothing_was_recorded():
    summary = fragments.summarize(["2 3d 2d 1 1d 3", None, "4d 4"])
    assert summary["requests"] == 2 and summary["tokens"] == 20 and summary["drafted_tokens"] == 10
    assert summary["runs"] == 3 and summary["max_run_tokens"] == 5 and summary["mean_run_tokens"] == round(10 / 3, 3)
    assert summary["run_lengths"] == {"1": 1, "4": 1, "5": 1}
    assert summary["drafted_share_by_quarter"][0] == round((1 + 2) / (3 + 2), 4)
    assert fragments.summarize([None, None]) is None
    assert fragments.summarize(["3 x"]) is None               # a damaged trace is left out, not guessed
    assert "longest 5" in fragments.describe(summary)
    assert "no accepted draft tokens" in fragments.describe(fragments.summarize(["12"]))
