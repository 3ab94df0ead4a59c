"""Resuming a results file written before settings.design existed (issue 23): its rows were measured in
upstream's sequential order, so another design must not be appended to them silently."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from draftbench.backends import get_backend
from draftbench.common.errors import ResultsFileError
from draftbench.results.file import ResultsFile, Row
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.resume import check_resumable, config_snapshot


def config(**settings) -> dict:
    return {"name": "old", "backend": "llamacpp", "targets": [{"label": "T", "path": "/m/t.gguf"}],
            "drafts": [{"label": "D", "path": "/m/d.gguf"}], "settings": {"port": 0, **settings}}


def file_before_designs(snapshot: dict) -> ResultsFile:
    measurement = {k: v for k, v in snapshot["measurement"].items() if k != "design"}
    return ResultsFile(name="old", hardware="unknown", backend="llamacpp", model_family="", settings={},
                       config=dict(snapshot, measurement=measurement),
                       results=(Row(target="T", role="baseline", mean_tps=10.0),))


def test_a_file_from_before_designs_resumes_only_in_the_sequential_order(tmp_path):
    backend = get_backend("llamacpp")
    now = validate_config(config())
    old = file_before_designs(config_snapshot(now, backend))
    with pytest.raises(ResultsFileError, match=re.escape("settings.design 'sequential' vs 'auto'")):
        check_resumable(old, now, backend, tmp_path / "r.json")
    check_resumable(old, validate_config(config(design="sequential")), backend, tmp_path / "r.json")   # fine
    # a file with no row yet measured nothing in any order: any design may start it
    check_resumable(replace(old, results=()), now, backend, tmp_path / "r.json")
