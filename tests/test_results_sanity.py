"""draftbench.results.sanity: checks across a loaded file's values — a combination listed twice (shown
twice in the report, kept twice on resume) and more draft tokens accepted than drafted."""

from __future__ import annotations

import json

import pytest
from draftbench.common.errors import ResultsFileError
from draftbench.results.file import load_results

from test_results_file_hostile import good_results


def write(tmp_path, data, name="r.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


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
