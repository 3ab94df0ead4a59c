"""Which rows of several results files measured the same thing.

Rows match on their role, target label, candidate label, draft length and — where the file
records it — the candidate's method and parameters, so two files that used the same label for
different settings never pair up. Upstream rows (no ``candidate``) match a draft-file candidate
of the same label with no method and no parameters.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ...analysis.verdict import analyze
from ...results.file import ResultsFile, Row, combination_title, load_results
from ...results.kinds import Role

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class ComparedFile:
    """One results file in a comparison: its letter (A, B, …), where it came from, its analysed rows."""

    letter: str
    path: str
    results: ResultsFile

    @property
    def name(self) -> str:
        return Path(self.path).name

    @property
    def has_requests(self) -> bool:
        return any(r.requests for r in self.results.results)

    @property
    def noise_floor(self) -> float:
        return self.results.read_settings().noise_floor

    def describe(self) -> str:
        r = self.results
        origin = " (upstream file: no per-request data)" if r.is_upstream else ""
        return f"{self.letter}  {self.name} — {r.hardware}, {r.backend}, {r.name}{origin}"


def load_compared(paths: list[str]) -> list[ComparedFile]:
    """Load and analyse each file (speed-ups recomputed as ``--chart-only`` does)."""
    if len(paths) > len(LETTERS):
        from ...common.errors import UsageError
        raise UsageError(f"--compare takes at most {len(LETTERS)} files (got {len(paths)})",
                         "compare fewer files at a time")
    files = []
    for i, path in enumerate(paths):
        files.append(ComparedFile(LETTERS[i], str(path), analyze(load_results(path))))
    return files


def method_and_params(row: Row) -> tuple[tuple[str, ...], str]:
    """The candidate's method and parameters (draft length excluded: it has its own field)."""
    cand = row.candidate if isinstance(row.candidate, dict) else {}
    method = tuple(str(m) for m in cand.get("method") or ())
    params = {k: v for k, v in (cand.get("params") or {}).items() if k != "draft_max"} \
        if isinstance(cand.get("params"), dict) else {}
    return method, json.dumps(params, sort_keys=True) if params else ""


def match_key(row: Row) -> tuple:
    """What was measured: role, target, candidate, draft length, method, parameters, concurrency level, prompt
    length (settings.context_tokens) and temperature (on the temperature axis)."""
    method, params = method_and_params(row)
    return (row.role, row.target, row.draft, row.draft_max, method, params, row.concurrency, row.context_tokens,
            row.temperature)


@dataclass(frozen=True)
class Match:
    """One combination across the files: its row in each file (None where a file lacks it)."""

    key: tuple
    title: str
    rows: tuple[Row | None, ...]

    @property
    def present(self) -> tuple[int, ...]:
        """Indices of the files that hold this combination."""
        return tuple(i for i, r in enumerate(self.rows) if r is not None)

    @property
    def role(self) -> Role:
        return self.key[0]

    @property
    def target(self) -> str:
        return self.key[1]

    @property
    def draft(self) -> str | None:
        return self.key[2]

    @property
    def draft_max(self) -> int | None:
        return self.key[3]


def _title(key: tuple) -> str:
    role, target, draft, draft_max, _, _, concurrency, context_tokens, temperature = key
    return combination_title(role, target, draft, draft_max, show_k=True, concurrency=concurrency,
                             context_tokens=context_tokens, temperature=temperature)


def match_rows(files: list[ComparedFile]) -> list[Match]:
    """Every combination of every file, in order of first appearance (first file first)."""
    order: list[tuple] = []
    by_key: dict[tuple, list[Row | None]] = {}
    for i, f in enumerate(files):
        for row in f.results.results:
            key = match_key(row)
            if key not in by_key:
                order.append(key)
                by_key[key] = [None] * len(files)
            if by_key[key][i] is None:     # a file's first row of a key wins (as in the report)
                by_key[key][i] = row
    titles = Counter(_title(k) for k in order)
    out = []
    for key in order:
        title = _title(key)
        if titles[title] > 1:   # same label, other method or parameters: say which
            method, params = key[4], key[5]
            title += f" [{'+'.join(method) or 'draft'}{' ' + params if params else ''}]"
        out.append(Match(key, title, tuple(by_key[key])))
    return out

