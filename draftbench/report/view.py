"""What the report shows, computed from an analysed results file; no HTML and no Plotly here.

The grid is targets × draft columns (a column per draft, or per draft and ``draft_max`` when
several were swept). Each cell says whether it is a valid speed-up and, if not, why; only
``CellState.OK`` cells are ever drawn as speed-ups.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import Enum

from ..analysis import context_length, temperature_axis
from ..analysis.verdict import primary_level, row_levels
from ..results.file import ResultsFile, Row, Speedup
from ..results.findings import Code
from ..results.kinds import Role, Status

UNKNOWN_SIZE = "unknown size"
NO_DRAFT_MODEL = "no draft model"      # the size class of model-free methods (n-gram lookup, suffix trees)

# A parameter count in a label: "0.5B", "1.5b", "135M", "Qwen2.5-0.5B-Instruct", "llama3-8b".
# Not "8bit", "Q4_K_M", "FP16" or the "2.5" of "Qwen2.5".
SIZE_RE = re.compile(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?)\s?([BbMm])(?![A-Za-z0-9])")


# --------------------------------------------------------------------------- size classes

def size_class(label: str | None, size_label: str | None = None) -> str:
    """'0.5B', '1.5B', '135M' from a label's parameter count; else GGUF's size_label; else 'unknown size'."""
    for text in (label, size_label):
        if not text:
            continue
        m = SIZE_RE.search(text)
        if m:
            return f"{float(m.group(1)):g}{m.group(2).upper()}"
    if size_label and size_label.strip():
        return size_label.strip()[:24]
    return UNKNOWN_SIZE


def size_value(cls: str) -> float:
    """Sort key for size classes: parameters, model-free methods first, unknown sizes last."""
    if cls == NO_DRAFT_MODEL:
        return 0.0
    m = SIZE_RE.search(cls)
    if not m:
        return math.inf
    return float(m.group(1)) * (1e9 if m.group(2).upper() == "B" else 1e6)


def _size_label_for(results: ResultsFile, row: Row, draft_label: str | None) -> str | None:
    """GGUF's size label for a row's draft model: from the row, else from the config snapshot."""
    for key in ("draft_size_label", "size_label"):
        value = row.extra.get(key)
        if isinstance(value, str) and value.strip():
            return value
    for entry in (results.config or {}).get("drafts") or []:
        if isinstance(entry, dict) and entry.get("label") == draft_label and isinstance(entry.get("size_label"), str):
            return entry["size_label"]
    return None


def row_size_class(results: ResultsFile, row: Row) -> str:
    """A row's size class: its draft model's (a hybrid takes its draft's), or "no draft model" for a
    model-free method. Rows without a recorded candidate (upstream files) are draft files."""
    cand = row.candidate if isinstance(row.candidate, dict) else {}
    if cand.get("method") and not cand.get("draft"):
        return NO_DRAFT_MODEL
    draft_label = cand.get("draft") if isinstance(cand.get("draft"), str) else row.draft
    return size_class(draft_label, _size_label_for(results, row, draft_label))


# --------------------------------------------------------------------------- the grid

class CellState(Enum):
    """Why a cell whose row finished does (OK) or does not show a speed-up; a row that did not finish
    shows its :class:`Status` instead (error, skipped, eliminated). The value is what the heatmap prints."""

    OK = "ok"
    INACTIVE = "inactive"
    NO_BASELINE = "no baseline"
    NOT_RUN = "not run"
    NO_DATA = "no data"


@dataclass(frozen=True)
class DraftCol:
    """One heatmap column: a draft, or a draft at one draft_max when several were swept."""

    draft: str
    draft_max: int | None
    label: str
    size: str


@dataclass(frozen=True)
class Cell:
    """One target × draft column: its row (None when not run), its state and the hover's note."""

    target: str
    col: DraftCol
    row: Row | None
    state: CellState | Status      # a Status: the row did not finish (an eliminated row holds probe numbers)
    note: str = ""

    @property
    def shows_speedup(self) -> bool:
        return self.state is CellState.OK

    @property
    def measured(self) -> Row:
        """The row behind a valid speed-up; only for cells that show one."""
        if self.row is None or not self.shows_speedup:
            raise ValueError(f"{self.target} + {self.col.label} has no valid speed-up ({self.state.value})")
        return self.row

    @property
    def speedup(self) -> Speedup:
        """The measured speed-up (see :func:`stats.speedup`)."""
        speed = self.measured.speedup
        if not speed:  # cell_state only says OK when there is one
            raise ValueError(f"{self.target} + {self.col.label} has no speed-up")
        return speed


@dataclass(frozen=True)
class ReportData:
    """The analysed results and their grid: targets across, draft columns grouped by size class."""

    results: ResultsFile
    targets: tuple[str, ...]
    columns: tuple[DraftCol, ...]
    classes: tuple[str, ...]
    cells: dict[tuple[str, DraftCol], Cell]
    multi_k: bool
    level: int = 1                        # the concurrency level of the grid (the lowest measured)
    levels: tuple[int, ...] = (1,)        # every level in the file; more than one: the concurrency charts

    def cell(self, target: str, col: DraftCol) -> Cell:
        return self.cells[(target, col)]

    @property
    def n_run(self) -> int:
        """Cells whose combination is in the results file (measured, failed or skipped)."""
        return sum(1 for c in self.cells.values() if c.row is not None)


def cell_state(row: Row | None, baseline: Row | None) -> tuple[CellState | Status, str]:
    """The state of a cell and the note its hover shows."""
    if row is None:
        return CellState.NOT_RUN, "this combination is not in the results file (sweep not finished?)"
    if row.speculation_active is False:
        return CellState.INACTIVE, row.reason or "the draft never drafted a token: speculation was not active"
    if not row.ok:
        return row.status, row.reason or ("eliminated by the adaptive search" if row.status is Status.ELIMINATED
                                          else row.status.value)
    if baseline is None:
        return CellState.NO_BASELINE, "no baseline was measured for this target, so no speed-up can be computed"
    if not row.speedup or not row.counts_as_speedup():
        return CellState.NO_DATA, "no tok/s was measured"
    return CellState.OK, ""


def _speculative_rows(results: ResultsFile, level: int = 1) -> list[Row]:
    return [r for r in results.results if r.role is Role.SPECULATIVE and r.draft is not None and r.concurrency == level]


def _column_key(row: Row, multi_k: bool) -> tuple[str | None, int | None]:
    return (row.draft, row.draft_max if multi_k else None)


def _columns(results: ResultsFile, spec_rows: list[Row], multi_k: bool) -> dict[tuple[str | None, int | None], DraftCol]:
    """One column per draft (per draft and k when several k were swept), in order of first appearance."""
    cols: dict[tuple[str | None, int | None], DraftCol] = {}
    for r in spec_rows:
        key = _column_key(r, multi_k)
        if r.draft is None or key in cols:
            continue
        label = r.draft + (f" (k={r.draft_max})" if multi_k and r.draft_max is not None else "")
        cols[key] = DraftCol(r.draft, key[1], label, row_size_class(results, r))
    return cols


def build_data(results: ResultsFile) -> ReportData:
    """The grid of an analysed results file (see :func:`analysis.analyze`), at its lowest concurrency level and
    its shortest context length and coolest temperature (those charts read every point from the summary)."""
    results = temperature_axis.primary(context_length.primary(results))
    level = primary_level(results)
    spec_rows = _speculative_rows(results, level)
    targets = tuple(dict.fromkeys(r.target for r in results.results
                                  if r.role in (Role.BASELINE, Role.SPECULATIVE, Role.CONTROL)))
    multi_k = len({r.draft_max for r in spec_rows}) > 1
    cols = _columns(results, spec_rows, multi_k)
    classes = tuple(sorted(dict.fromkeys(c.size for c in cols.values()), key=lambda s: (size_value(s), s)))
    # drafts grouped by size class, in order of first appearance within a class
    columns = tuple(sorted(cols.values(), key=lambda c: classes.index(c.size)))
    rows = {(r.target, _column_key(r, multi_k)): r for r in reversed(spec_rows)}  # the first row of a key wins
    cells = {}
    for target in targets:
        baseline = results.baseline_for(target, level)
        for col in columns:
            row = rows.get((target, (col.draft, col.draft_max)))
            state, note = cell_state(row, baseline)
            cells[(target, col)] = Cell(target, col, row, state, note)
    return ReportData(results, targets, columns, classes, cells, multi_k, level, row_levels(results))


# --------------------------------------------------------------------------- what the charts and verdict pick

def best_per_class(data: ReportData, target: str) -> dict[str, Cell]:
    """The fastest valid draft of each size class for a target (the first one on a tie)."""
    best: dict[str, Cell] = {}
    for col in data.columns:
        cell = data.cell(target, col)
        if not cell.shows_speedup:
            continue
        if col.size not in best or cell.speedup.ratio > best[col.size].speedup.ratio:
            best[col.size] = cell
    return best


def bar_classes(data: ReportData) -> list[str]:
    """Size classes with at least one valid measurement (the bar charts' series; the heatmap shows all)."""
    return [cls for cls in data.classes if any(cls in best_per_class(data, t) for t in data.targets)]


def recommended_row(results: ResultsFile, target: str, draft: str, draft_max: int | None,
                    level: int = 1) -> Row | None:
    """The measured row behind a recommendation: at the recommended k, else at any k."""
    rows = [r for r in results.rows_of(target)
            if r.role is Role.SPECULATIVE and r.draft == draft and r.ok and r.concurrency == level]
    return next((r for r in rows if r.draft_max == draft_max), rows[0] if rows else None)


def control_row(results: ResultsFile, target: str, level: int = 1) -> Row | None:
    """The baseline measured again at the end of the sweep (its 'speed-up' is the drift)."""
    return next((r for r in results.rows_of(target) if r.role is Role.CONTROL and r.ok and r.speedup
                 and r.concurrency == level), None)


def category_changes(row: Row, baseline: Row) -> list[tuple[str, float]]:
    """(prompt category, tok/s ratio to the baseline's) where both were measured."""
    base_cats, row_cats = baseline.by_category or {}, row.by_category or {}
    out = []
    for cat, stats in row_cats.items():
        base = base_cats.get(cat) or {}
        if stats.get("mean_tps") and base.get("mean_tps"):
            out.append((cat, stats["mean_tps"] / base["mean_tps"]))
    return out


# --------------------------------------------------------------------------- problems

@dataclass(frozen=True)
class InvalidRow:
    """A row that is not a valid measurement (the report's "Problems" table), and why: speculation
    never ran, or the row's status (error, skipped, eliminated)."""

    row: Row
    inactive: bool
    reason: str

    @property
    def what(self) -> str:
        return "speculation inactive" if self.inactive else self.row.status.value


def _inactive_reason(row: Row) -> str:
    # Without a recorded reason, the sweep's own warning about the draft says it best.
    warning = next((w.message for w in row.warnings if w.code is Code.NEVER_DRAFTED), None)
    return row.reason or warning or "the draft never drafted a token"


def invalid_rows(results: ResultsFile) -> list[InvalidRow]:
    """Every row that is not a valid measurement, in file order."""
    out = []
    for r in results.results:
        if r.speculation_active is False and r.role is Role.SPECULATIVE:
            out.append(InvalidRow(r, True, _inactive_reason(r)))
        elif not r.ok:
            out.append(InvalidRow(r, False, r.reason or "no reason recorded"))
    return out
