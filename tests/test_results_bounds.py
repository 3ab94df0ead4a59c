"""draftbench.results.bounds: a loaded results file is held to what a measurement can be.

Rates, counts and times finite, not negative, and within physical sense (10⁷ tok/s, 10⁸ tokens a
request, 10⁷ s): refused with the JSON path of the value, the file never modified. A per-request
rate of 1e308 used to reach the verdict as "expect +10051829815…%".
"""

from __future__ import annotations

import json

import pytest
from draftbench.common.errors import ResultsFileError
from draftbench.results.bounds import MAX_TOKENS_PER_SECOND
from draftbench.results.file import load_results

from helpers import run_cli
from test_results_file_hostile import assert_clean_error, good_results, set_path

IMPOSSIBLE = [
    # (JSON path, value, what the message says)
    ("$.results[1].requests[0].decode_tps", 1e308, "is 1e+308 tok/s, more than 10,000,000 tok/s"),
    ("$.results[1].mean_tps", MAX_TOKENS_PER_SECOND + 1, "more than 10,000,000 tok/s"),
    ("$.results[1].mean_tps", -40.0, "must be a finite number of at least 0 or null, not number -40.0"),
    ("$.results[0].requests[0].completion_tokens", 10**400, "is a 401-digit number, more than 100,000,000 tokens"),
    ("$.results[0].requests[0].ttft_s", -0.5, "must be a finite number of at least 0 or null, not number -0.5"),
    ("$.results[0].requests[0].total_s", 1e9, "more than 10,000,000 s"),
    ("$.results[1].acceptance_rate", 1.5, "is 1.5, more than 1, which no measurement reaches"),
    ("$.results[1].tps.mean", 1e308, "more than 10,000,000 tok/s"),
    ("$.results[1].draft_n", -3, "must be an integer of at least 0 or null, not integer -3"),
    ("$.results[1].concurrency", 0, "must be an integer of at least 1, not integer 0"),
    ("$.results[1].speedup", {"ratio": 1e308}, ".ratio is 1e+308, more than 1,000,000"),
]


def write(tmp_path, data, name="r.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


@pytest.mark.parametrize("where, value, message", IMPOSSIBLE, ids=[f"{w}={v!r}"[:60] for w, v, _ in IMPOSSIBLE])
def test_an_impossible_measurement_is_refused_with_its_json_path(tmp_path, where, value, message):
    path = write(tmp_path, set_path(good_results(), where, value))
    before = path.read_bytes()
    with pytest.raises(ResultsFileError) as info:
        load_results(path)
    assert f"{path}: {where}" in info.value.message and message in info.value.message
    assert info.value.fix and path.read_bytes() == before


def test_the_1e308_rate_never_reaches_a_verdict(tmp_path):
    data = good_results()
    data["results"][1]["requests"][0]["decode_tps"] = 1e308
    path = write(tmp_path, data)
    proc = run_cli("sweep.py", "--chart-only", "--results", str(path), "--chart", str(tmp_path / "r.html"), timeout=60)
    assert_clean_error(proc, 1, "$.results[1].requests[0].decode_tps is 1e+308 tok/s")
    assert "expect" not in proc.stdout and not (tmp_path / "r.html").exists()
