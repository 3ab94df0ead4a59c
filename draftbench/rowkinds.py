"""What a results row is (its role) and how it ended (its status). A leaf: the results classes and
their declared file schema both use these."""

from __future__ import annotations

from enum import Enum


class Role(str, Enum):
    BASELINE = "baseline"          # the target alone
    SPECULATIVE = "speculative"    # the target with a speculative candidate
    CONTROL = "control"            # the target alone again, after its candidates (drift check)
    DRAFT_ALONE = "draft_alone"    # a draft as the only model (its cost ratio)


class Status(str, Enum):
    OK = "ok"
    ERROR = "error"
    SKIPPED = "skipped"


ROLES = tuple(r.value for r in Role)
STATUSES = tuple(s.value for s in Status)
