"""A loaded results file is held to what a measurement can be: finite, non-negative, within physical
sense, each combination once, each key once. Refused with the JSON path of the first bad value;
the file is never modified."""

from __future__ import annotations

import json
import os

import pytest
from draftbench.cli import sweep_cli
from draftbench.common.errors import ResultsFileError, UsageError
from draftbench.results.bounds import MAX_TOKENS_PER_SECOND
from draftbench.results.file import load_results

from helpers import run_cli
from test_hostile_files import assert_clean_error, good_results, set_path

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


def test_more_accepted_than_drafted_is_refused(tmp_path):
    data = good_results()
    data["results"][1]["requests"][0].update(draft_n=10, draft_n_accepted=11)
    with pytest.raises(ResultsFileError, match=r"\$\.results\[1\]\.requests\[0\]\.draft_n_accepted is 11, more than "
                                               r"the 10 tokens drafted"):
        load_results(write(tmp_path, data))
    data = good_results()
    data["results"][1].update(draft_n=10, draft_n_accepted=20)
    with pytest.raises(ResultsFileError, match=r"\$\.results\[1\]\.draft_n_accepted is 20"):
        load_results(write(tmp_path, data))


def test_a_duplicated_row_is_refused_with_both_places(tmp_path):
    data = good_results()
    data["results"].append(dict(data["results"][1]))
    with pytest.raises(ResultsFileError) as info:
        load_results(write(tmp_path, data))
    assert "$.results[2] measures the same combination as $.results[1] (speculative target 'T', draft 'D', k=8)" \
        in info.value.message


@pytest.mark.parametrize("text, where", [
    ('{"results": [], "name": "a", "results": []}', "$.results"),
    ('{"name": "a", "results": [{"target": "T", "mean_tps": 1, "mean_tps": 2}]}', "$.results[0].mean_tps"),
    ('{"results": [{"target": "T", "server": {"odd key": 1, "odd key": 2}}]}', '$.results[0].server["odd key"]'),
], ids=["results-twice", "in-a-row", "odd-key"])
def test_a_duplicated_key_is_refused_with_its_json_path(tmp_path, text, where):
    with pytest.raises(ResultsFileError) as info:
        load_results(write(tmp_path, text))
    assert f"{where} appears twice in the same object" in info.value.message


def test_a_number_too_long_for_python_is_a_clean_error(tmp_path):
    text = json.dumps(good_results()).replace('"mean_tps": 40.0', '"mean_tps": ' + "9" * 5000)
    with pytest.raises(ResultsFileError, match="holds a value Python cannot read"):
        load_results(write(tmp_path, text))


def test_compare_notices_one_file_given_twice(tmp_path):
    path = write(tmp_path, good_results())
    (tmp_path / "link.json").symlink_to(path)
    for args in ([str(path), str(path)], [str(path), str(tmp_path / "link.json")]):
        with pytest.raises(UsageError, match="are the same file") as info:
            sweep_cli.main(["--compare", *args, "--no-chart"])
        assert "comparing a file with itself" in info.value.message
    os.link(path, tmp_path / "hard.json")
    with pytest.raises(UsageError, match="are the same file"):
        sweep_cli.main(["--compare", str(path), str(tmp_path / "hard.json"), "--no-chart"])
