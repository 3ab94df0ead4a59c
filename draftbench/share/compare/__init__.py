"""Several results files side by side (``sweep.py --compare``): :mod:`.match` pairs up the rows
that measured the same combination, :mod:`.differences` lists how the files differ in what they
measured, :mod:`.model` compares each combination across files with a confidence interval, and
:mod:`.text` renders it for the console."""

from .differences import Difference, DiffKind, file_differences
from .match import ComparedFile, Match, load_compared, match_key, match_rows
from .text import describe_change, render
from .view import CellState, Change, ComparedRow, Comparison, FileCell, compare

__all__ = ["CellState", "Change", "ComparedFile", "ComparedRow", "Comparison", "DiffKind", "Difference", "FileCell",
           "Match", "compare", "describe_change", "file_differences", "load_compared", "match_key", "match_rows",
           "render"]
