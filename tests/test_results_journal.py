"""A sweep's rows saved as they are recorded: the results file's journal (results/journal.py) through the sweep's
row store (sweep/store.py) — a row costs its own line, every reader replays the journal, a torn line is ignored, a
file that is not the journal is never written, and the end leaves one strict-JSON results file. No servers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from draftbench.common.errors import ResultsFileError, UsageError
from draftbench.results.file import RequestRecord, ResultsFile, Row, load_results
from draftbench.results.journal import journal_for
from draftbench.results.output_paths import check_output_paths
from draftbench.sweep import store as store_module
from draftbench.sweep.store import RowStore


def request(prompt: str, tps: float) -> RequestRecord:
    return RequestRecord(prompt_id=prompt, category="code", run=0, decode_tps=tps, completion_tokens=32)


def row(draft: str | None, *tps: float) -> Row:
    return Row(target="T", draft=draft, requests=tuple(request(f"p{i}", v) for i, v in enumerate(tps)))


def empty() -> ResultsFile:
    return ResultsFile(name="j", hardware="box", backend="llamacpp", model_family="", settings={})


def test_rows_go_to_the_journal_as_recorded_and_every_reader_replays_it(tmp_path):
    path = tmp_path / "r.json"
    store = RowStore(empty(), path)
    assert load_results(path).results == () and journal_for(path).name == "r.journal"
    store.record(row(None, 10.0))
    store.record(row("d", 12.0))
    store.record(row("d", 12.0, 13.0))                          # the same row, one request more
    assert json.loads(path.read_text())["results"] == []        # the file is not rewritten for a row
    lines = journal_for(path).read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[3])["kept"] == 1 and len(json.loads(lines[3])["added"]) == 1
    loaded = load_results(path)
    assert [(r.draft, len(r.requests)) for r in loaded.results] == [(None, 1), ("d", 2)]
    assert loaded.results[1].requests == store.row(row("d").key).requests


def test_a_line_torn_by_a_crash_is_ignored_and_a_bad_one_is_named(tmp_path):
    path = tmp_path / "r.json"
    store = RowStore(empty(), path)
    store.record(row(None, 10.0))
    journal = journal_for(path)
    with open(journal, "a") as f:
        f.write('{"row": {"target": "T", "dra')                 # no newline: the write a crash cut
    assert len(load_results(path).results) == 1
    text = journal.read_text().rsplit("\n", 1)[0] + "\n"
    journal.write_text(text + '{"row": 3}\n')
    with pytest.raises(ResultsFileError, match=r"r\.journal line 3 is not a journal entry"):
        load_results(path)
    journal.write_text(text + '{"row": \n')
    with pytest.raises(ResultsFileError, match=r"r\.journal line 3 is not valid JSON.*\n  Fix: move"):
        load_results(path)


def test_a_file_that_is_not_the_journal_is_never_written_nor_read(tmp_path):
    path = tmp_path / "r.json"
    mine = journal_for(path)
    mine.write_text("my notes\n")
    with pytest.raises(UsageError, match="is in the way"):
        check_output_paths(path, None)
    with pytest.raises(ResultsFileError, match="is in the way"):
        RowStore(empty(), path)
    assert mine.read_text() == "my notes\n"
    store_path = tmp_path / "s.json"
    RowStore(empty(), store_path).record(row(None, 1.0))
    (tmp_path / "other.json").write_text(store_path.read_text())
    journal_for(store_path).rename(journal_for(tmp_path / "other.json"))    # the journal of another file
    assert load_results(tmp_path / "other.json").results == ()


def test_the_file_is_rewritten_when_the_journal_outgrows_it_and_at_the_end(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "JOURNAL_MIN_BYTES", 0)
    path = tmp_path / "r.json"
    store = RowStore(empty(), path)
    for i in range(5):
        store.record(row(f"d{i}", 10.0, 11.0))
    saved = json.loads(path.read_text())["results"]
    assert saved and len(journal_for(path).read_text().splitlines()) <= 3     # rewritten along the way
    final = store.current()
    store.finish(final)
    assert not journal_for(path).exists()
    assert [r["draft"] for r in json.loads(path.read_text())["results"]] == [f"d{i}" for i in range(5)]


def test_a_store_without_a_path_keeps_rows_in_memory(tmp_path: Path):
    store = RowStore(empty())
    store.record(row(None, 1.0))
    assert store.current().results[0].draft is None and not list(tmp_path.iterdir())
