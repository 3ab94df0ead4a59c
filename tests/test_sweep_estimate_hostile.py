"""draftbench.sweep.estimate scans the results folder for earlier measurements: it reads only
draftbench's own files of the same hardware, judged from their first bytes. A FIFO there used to hang
``--dry-run``; an unrelated 442 MB JSON turned a 0.2 s dry run into 14 s and 1.6 GB."""

from __future__ import annotations

import json
import os
from dataclasses import replace

from draftbench.results.file import ResultsFile, Row, save_results
from draftbench.results.peek import peek_header
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.estimate import Estimator

from helpers import sparse_file, within_watchdog


def test_estimates_read_only_our_own_results_files_and_never_wait(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    os.mkfifo(folder / "a-fifo.json")
    (folder / "b-huge-unrelated.json").write_bytes(b'{"data": [' + b"1," * 1000 + b"1]}")
    sparse_file(folder / "b-huge-unrelated.json", 442_000_000)     # another tool's 442 MB JSON (sparse: no disk used)
    (folder / "c-upstream.json").write_text(json.dumps({"hardware": "box", "results": []}))
    ours = ResultsFile(name="old", hardware="box", backend="llamacpp", model_family="", settings={},
                       results=(Row(target="7B", role="baseline", mean_total_time=30.0, load_time_s=10.0),))
    save_results(ours, folder / "d-ours.json")
    save_results(replace(ours, hardware="other"), folder / "e-other-hardware.json")
    config = validate_config({"name": "est", "hardware": "box", "targets": [{"label": "7B", "path": "/m/t.gguf"}],
                              "settings": {"runs": 1, "prompts": ["code"]}}, source="c.json", base_dir=str(tmp_path))
    estimator = within_watchdog(Estimator.for_results_path, config, 1, folder / "new.json")
    assert [r.name for r in estimator.history] == ["old"] and estimator.history[0].hardware == "box"
    assert not peek_header(folder / "b-huge-unrelated.json").is_results      # judged from its first 256 kB
    assert peek_header(folder / "d-ours.json").ours and not peek_header(folder / "c-upstream.json").ours
    assert peek_header(folder / "a-fifo.json") is None
