"""The comparison: each combination's tok/s in every file, and each file against the first that has it.

Pairing (see docs/comparing.md): within one file a speculative request is paired
with the baseline request for the same prompt and repetition. Across files the same pairing is
used only when both files ran the same requests — the same prompt ids with the same prompt
token counts (the server's own count, so the same text and chat template), and the same
``prompts``, ``max_tokens``, ``temperature`` and ``seed`` settings. Pairing then removes the
differences between prompts (code decodes faster than prose on both machines) from the
interval. Which repetition of one machine is paired with which of the other is arbitrary (no
shared condition links run 2 on both), but the estimate, the mean of log ratios, is the same for
any matching; only the width of the interval depends on pairing, and repetitions of one prompt
are interchangeable. Otherwise the two groups of requests are compared unpaired (Welch's t on
log tok/s), and a file without per-request data gives a ratio of means without an interval.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from enum import Enum

from ...analysis.stats import speedup
from ...common.percent import percent_change
from ...results.file import RequestRecord, Row
from ...results.kinds import Status
from ...results.speedup import Speedup
from .differences import Difference, file_differences
from .match import ComparedFile, Match, match_rows

PAIRING_SETTINGS = ("prompts", "max_tokens", "temperature", "seed")


class CellState(str, Enum):
    """A combination that is absent from a file, or whose row finished; a row that did not finish
    shows its :class:`Status` instead (error, skipped, eliminated: an adaptive search's probe)."""

    OK = "ok"
    NO_DATA = "no tok/s"
    ABSENT = "not in file"


@dataclass(frozen=True)
class FileCell:
    """A combination in one file."""

    row: Row | None
    state: CellState | Status

    @property
    def tps(self) -> float | None:
        return self.row.mean_tps if self.row is not None and self.state is CellState.OK else None

    @property
    def speedup(self) -> Speedup | None:
        """The row's own speed-up over its file's baseline (speculative rows that speculated)."""
        if self.row is None or self.state is not CellState.OK or not self.row.counts_as_speedup():
            return None
        return self.row.speedup


@dataclass(frozen=True)
class Change:
    """File ``index`` against file ``reference`` for one combination: ``ratio`` is what :func:`stats.speedup`
    finds for file ``index``'s tok/s over file ``reference``'s."""

    index: int
    reference: int
    ratio: Speedup
    paired: bool
    why_unpaired: str = ""
    repeated: int = 0            # file ``index``'s requests that are file ``reference``'s own (left out)

    @property
    def significant(self) -> bool | None:
        return self.ratio.significant


@dataclass(frozen=True)
class ComparedRow:
    match: Match
    cells: tuple[FileCell, ...]
    changes: tuple[Change, ...]
    copies: tuple[tuple[int, int], ...] = ()   # (file, reference): the file's row holds only the reference's own
                                               # measurements (a copy): no change to show

    @property
    def title(self) -> str:
        return self.match.title

    def change_for(self, index: int) -> Change | None:
        return next((c for c in self.changes if c.index == index), None)

    def copy_of(self, index: int, reference: int) -> bool:
        """Whether file ``index``'s row is file ``reference``'s own measurements (no change to show)."""
        return (index, reference) in self.copies


@dataclass(frozen=True)
class Comparison:
    files: tuple[ComparedFile, ...]
    rows: tuple[ComparedRow, ...]            # combinations in at least two files
    only_in: tuple[tuple[Match, ...], ...]   # per file: combinations no other file has
    differences: tuple[Difference, ...]

    @property
    def letters(self) -> tuple[str, ...]:
        return tuple(f.letter for f in self.files)


def cell_for(row: Row | None) -> FileCell:
    if row is None:
        return FileCell(None, CellState.ABSENT)
    if not row.ok:
        return FileCell(row, row.status)
    if not row.mean_tps:
        return FileCell(row, CellState.NO_DATA)
    return FileCell(row, CellState.OK)


def _measurement(r: RequestRecord) -> tuple:
    """What makes a request one measurement: a copy of a file (or a resumed copy) holds it unchanged."""
    return (r.session, r.block, r.prompt_id, r.run, r.decode_tps, r.ttft_s, r.total_s, r.completion_tokens)


def tps_by_request(row: Row, leave_out: frozenset[tuple] = frozenset()) -> dict[tuple, float]:
    """(prompt, repetition) → tok/s. The interleaved design measures a baseline's (prompt, repetition) once
    beside every candidate, each on a server session of its own: those are averaged (geometric mean, as
    the speed-up averages), never one picked. ``leave_out``: measurements the other file holds too."""
    logs: dict[tuple, list[float]] = {}
    for r in row.requests:
        if r.error is None and r.decode_tps and _measurement(r) not in leave_out:
            logs.setdefault((r.prompt_id, r.run), []).append(math.log(r.decode_tps))
    return {key: math.exp(statistics.fmean(values)) for key, values in logs.items()}


def repeated_measurements(reference: Row, row: Row) -> frozenset[tuple]:
    """The measurements ``row`` holds that ``reference`` holds too (a file compared with its own copy,
    or with the file it was resumed from): the same requests, not a second measurement of them."""
    mine = {_measurement(r) for r in reference.requests if r.error is None and r.decode_tps}
    return frozenset(m for r in row.requests if (m := _measurement(r)) in mine)


def why_not_paired(a: ComparedFile, ra: Row, b: ComparedFile, rb: Row) -> str:
    """Why the requests of two rows cannot be paired by (prompt, repetition); "" when they can."""
    for key in PAIRING_SETTINGS:
        va, vb = (a.results.settings or {}).get(key), (b.results.settings or {}).get(key)
        if va is None or vb is None:
            return f"settings.{key} is not recorded in both files"
        if va != vb:
            return f"settings.{key} differs"
    prompts_a = {r.prompt_id: (r.category, r.prompt_tokens) for r in ra.requests}
    prompts_b = {r.prompt_id: (r.category, r.prompt_tokens) for r in rb.requests}
    if set(prompts_a) != set(prompts_b):
        return "the files measured different prompts"
    for pid, (cat, tokens) in prompts_a.items():
        cat_b, tokens_b = prompts_b[pid]
        if cat != cat_b:
            return f"prompt {pid} has another category"
        if tokens is None or tokens_b is None:
            return "prompt token counts are not recorded, so the prompt texts cannot be checked"
        if tokens != tokens_b:
            return f"prompt {pid} has {tokens} vs {tokens_b} prompt tokens (another text or chat template)"
    if len(set(tps_by_request(ra)) & set(tps_by_request(rb))) < 2:
        return "fewer than two requests measured in both"
    return ""


def change(files: tuple[ComparedFile, ...], ref: int, index: int, ra: Row, rb: Row) -> Change | None:
    """File ``index``'s tok/s against file ``ref``'s for one combination."""
    noise_floor = max(files[ref].noise_floor, files[index].noise_floor)
    if ra.requests and rb.requests:
        repeated = repeated_measurements(ra, rb)
        why = why_not_paired(files[ref], ra, files[index], rb)
        base, cand = tps_by_request(ra), tps_by_request(rb, leave_out=repeated)
        if repeated and not cand:
            return None     # the same measurements in both files: there is nothing to compare
        if repeated:
            why = (f"{files[index].letter} repeats {len(repeated)} of {files[ref].letter}'s own requests of this "
                   "combination (the same measurements), which are left out")
        if why:   # keys made disjoint, so stats.speedup compares the two groups unpaired (Welch)
            base = {("ref", *k): v for k, v in base.items()}
            cand = {("new", *k): v for k, v in cand.items()}
        ratio = speedup(base, cand, noise_floor=noise_floor)
        if ratio is not None:
            return Change(index, ref, ratio, paired=not why, why_unpaired=why, repeated=len(repeated))
    if ra.mean_tps and rb.mean_tps:
        value = rb.mean_tps / ra.mean_tps
        missing = [files[i].letter for i, r in ((ref, ra), (index, rb)) if not r.requests]
        return Change(index, ref, Speedup(ratio=round(value, 4), method="ratio-of-means", n_pairs=0,
                                          percent=percent_change(value)),
                      paired=False, why_unpaired=f"{' and '.join(missing)} has no per-request data")
    return None


def compare(files: list[ComparedFile]) -> Comparison:
    """Match the files' rows and compare every combination that at least two files hold."""
    fs = tuple(files)
    rows: list[ComparedRow] = []
    only: list[list[Match]] = [[] for _ in fs]
    for m in match_rows(files):
        present = m.present
        if len(present) == 1:
            only[present[0]].append(m)
            continue
        cells = tuple(cell_for(r) for r in m.rows)
        changes, copies = [], []
        ok = [i for i in present if cells[i].state is CellState.OK]
        for index in ok[1:]:
            ref = ok[0]
            ra, rb = cells[ref].row, cells[index].row
            assert ra is not None and rb is not None   # OK cells hold a row
            c = change(fs, ref, index, ra, rb)
            if c is not None:
                changes.append(c)
            elif rb.requests and len(repeated_measurements(ra, rb)) == len(rb.requests):
                copies.append((index, ref))
        rows.append(ComparedRow(m, cells, tuple(changes), tuple(copies)))
    return Comparison(fs, tuple(rows), tuple(tuple(o) for o in only), tuple(file_differences(files)))
