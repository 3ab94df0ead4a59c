"""Where a sweep's rows go as they are measured: a :class:`RowStore` keeps them by key (the order each was first
recorded) over the rest of its results file, and with a results path saves them as it goes — each recorded row
appended to the file's journal (:mod:`draftbench.results.journal`: it costs the row, not the file), the file
rewritten when the journal has grown past it, and at the end. Recording a row analyses nothing: the sweep
decides on the rows as measured, and the file is analysed once, at the end.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..analysis.context_length import lengths as context_lengths
from ..config.prompts import PromptSelection, prompts_for
from ..config.settings import Settings
from ..results.file import SCHEMA_VERSION, ResultsFile, Row, save_results
from ..results.journal import Journal
from .config_file import SweepConfig

# Below this the journal is left to grow (a small file is rewritten seldom); above, once it passes the file.
JOURNAL_MIN_BYTES = 1 << 20


class RowStore:
    """The rows of a sweep's results file as it records them; ``path``: saved there as it goes."""

    def __init__(self, results: ResultsFile, path: Path | None = None):
        self._base = replace(results, results=())
        self._rows: dict[tuple, Row] = {r.key: r for r in results.results}
        self._current: ResultsFile | None = results
        self.path = path
        self._journal: Journal | None = None
        self._saved_bytes = 0
        if path is not None:
            self.save()

    def row(self, key: tuple) -> Row | None:
        return self._rows.get(key)

    def current(self) -> ResultsFile:
        """The results file as recorded so far (made again only after a change)."""
        if self._current is None:
            self._current = replace(self._base, results=tuple(self._rows.values()))
        return self._current

    def record(self, row: Row) -> Row:
        """Add (or replace, by key) a row; saved in the journal before this returns."""
        prior = self._rows.get(row.key)
        self._rows[row.key] = row
        self._current = None
        if self._journal is not None:
            self._journal.record(row, prior)
            if self._journal.size > max(JOURNAL_MIN_BYTES, self._saved_bytes):
                self.save()
        return row

    def describe_prompts(self, prompt_set: dict) -> None:
        """The prompts measured, as built during the sweep (long prompts: per target, with their sources)."""
        self._base = replace(self._base, prompt_set=prompt_set)
        self._current = None
        if self.path is not None:
            self.save()

    def save(self) -> None:
        """The results file rewritten (atomically) with every row, and its journal emptied."""
        assert self.path is not None
        save_results(self.current(), self.path)
        self._saved_bytes = self.path.stat().st_size if self.path.is_file() else 0
        if self._journal is None:
            self._journal = Journal(self.path)
        else:
            self._journal.reset()

    def finish(self, results: ResultsFile) -> None:
        """The sweep's last word (``results``: analysed): saved, and the journal gone."""
        self._base, self._rows, self._current = replace(results, results=()), {r.key: r for r in results.results}, results
        if self.path is not None:
            save_results(results, self.path)
            if self._journal is not None:
                self._journal.remove()
                self._journal = None


def empty_results(config: SweepConfig, selection: PromptSelection | None = None) -> ResultsFile:
    """A new results file for ``config``, its prompt set recorded (``selection``: the sweep's, when it has it)."""
    settings = config.settings
    return ResultsFile(name=config.name, hardware=config.hardware, backend=config.backend,
                       model_family=config.model_family, settings=settings.to_dict(), schema_version=SCHEMA_VERSION,
                       prompt_set=recorded_prompts(settings, selection or prompts_for(settings)))


def recorded_prompts(settings: Settings, selection: PromptSelection) -> dict | None:
    """The prompt set as a results file records it, the command line's and ``run_sweep``'s alike (the forecast reads
    it: past the set, its prompts come back); None with context lengths: long prompts record theirs when built."""
    return None if context_lengths(settings) else selection.record()
