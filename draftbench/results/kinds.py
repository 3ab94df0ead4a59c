"""What a results row is (its role, and a ceiling row's level) and how it ended (its status). A leaf:
the results classes and their declared file schema both use these. ``Row.role`` and ``Row.status``
hold these members (a file's strings are read into them); compare them with ``is``."""

from __future__ import annotations

from enum import Enum


class TextEnum(str, Enum):
    """A member is its text wherever it is shown (str(), f-strings, CSV), as in the file: Python 3.11
    would print a plain ``(str, Enum)`` member as ``Role.BASELINE``."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Role(TextEnum):
    BASELINE = "baseline"          # the target alone
    SPECULATIVE = "speculative"    # the target with a speculative candidate
    CONTROL = "control"            # the target alone again, after its candidates (drift check)
    DRAFT_ALONE = "draft_alone"    # a draft as the only model (its cost ratio)
    CEILING = "ceiling"            # a draft at synthetic acceptance (settings.ceiling): never a candidate


class Status(TextEnum):
    OK = "ok"
    ERROR = "error"
    SKIPPED = "skipped"
    ELIMINATED = "eliminated"     # left an adaptive race early: its probe numbers and the reason are kept
    NOT_PROBED = "not probed"     # planned, never measured: the budget ran out first (the same command continues)


class CeilingLevel(TextEnum):
    """The synthetic acceptance of a ceiling row (see ceiling.py)."""
    MEASURED = "measured"    # at the draft's own measured mean accepted length
    FULL = "full"            # every drafted token accepted: length k + 1


ROLES = tuple(r.value for r in Role)
STATUSES = tuple(s.value for s in Status)
CEILING_LEVELS = tuple(level.value for level in CeilingLevel)
