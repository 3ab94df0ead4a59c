"""Per-position counters from /metrics, read as every server number is: never backwards, never a
huge vector from a broken server, and a series that appears only once something was counted."""

from __future__ import annotations

import pytest
from draftbench.backends import prometheus
from draftbench.backends.vllm.command import ACCEPTED_PER_POS as VLLM_PER_POS
from draftbench.backends.vllm.command import COUNTERS, parse_counters, per_position_delta
from draftbench.common.errors import RequestError

NAME = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"
DRAFTS = "llamacpp:spec_decode_num_drafts_total"


def reading(drafts: float | None, per_pos: dict[str, float]) -> list[prometheus.Sample]:
    lines = [f"{DRAFTS} {drafts}"] if drafts is not None else []
    lines += [f'{NAME}{{position="{p}"}} {v}' for p, v in per_pos.items()]
    return prometheus.parse("\n".join(lines), prefix="llamacpp:")


def test_the_change_of_each_position_is_this_requests():
    before = reading(10, {"0": 5, "1": 3, "2": 1})
    after = reading(14, {"0": 8, "1": 5, "2": 1, "3": 1})     # a position first counted now starts at 0
    assert prometheus.position_delta(before, after, NAME, present_before=DRAFTS) == (3, 2, 0, 1)


def test_positions_exported_only_after_the_first_count_read_as_zero_before():
    before = reading(0, {})                 # llama-server exports the positions once something was counted
    after = reading(4, {"0": 3, "1": 1})
    assert prometheus.position_delta(before, after, NAME, present_before=DRAFTS) == (3, 1)
    # no usable reading before (no /metrics family at all): unknown, never a guess
    assert prometheus.position_delta(reading(None, {}), after, NAME, present_before=DRAFTS) is None
    assert prometheus.position_delta(before, reading(4, {}), NAME, present_before=DRAFTS) is None


def test_a_position_counter_that_goes_backwards_fails_the_request():
    with pytest.raises(RequestError, match=r'position="1"\} went backwards'):
        prometheus.position_delta(reading(5, {"0": 5, "1": 4}), reading(6, {"0": 6, "1": 2}), NAME,
                                  present_before=DRAFTS)


def test_a_position_past_any_draft_length_is_ignored_not_allocated():
    after = reading(4, {"0": 3, "1": 1, str(10**12): 7})
    assert prometheus.position_delta(reading(0, {}), after, NAME, present_before=DRAFTS) == (3, 1)
    assert prometheus.by_position(reading(1, {str(prometheus.MAX_POSITIONS): 1}), NAME) is None


def test_vllm_positions_are_summed_over_engines_and_need_a_reading_before():
    text = "\n".join([f'{COUNTERS["drafts"]}{{engine="0"}} 3', f'{COUNTERS["drafts"]}{{engine="1"}} 1',
                      f'{VLLM_PER_POS}{{engine="0",position="0"}} 2', f'{VLLM_PER_POS}{{engine="1",position="0"}} 1',
                      f'{VLLM_PER_POS}{{engine="0",position="1"}} 1'])
    before = parse_counters(f'{COUNTERS["drafts"]}{{engine="0"}} 0')
    after = parse_counters(text)
    assert per_position_delta(before, after) == (3, 1)
    assert per_position_delta(None, after) is None and per_position_delta(before, None) is None
    with pytest.raises(RequestError, match="went backwards"):
        per_position_delta(after, parse_counters(text.replace("position=\"0\"} 2", "position=\"0\"} 0")))
