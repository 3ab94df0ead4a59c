"""Labels people give models and candidates: shown everywhere and used in log file names."""

from __future__ import annotations

import json
import re
from typing import Any

from ..common.errors import Problem
from ..common.text_safety import safe_text, text_problem

_SAFE_LABEL = re.compile(r"^[^\x00-\x1f\x7f/\\]+$")
MAX_LABEL = 100


def check_label(where: str, label: Any, seen: dict[str, str], problems: list[Problem]) -> bool:
    """Append a problem when ``label`` is missing, unsafe in a file name, too long, or used before
    (``seen`` maps labels to where they were first given, and is updated). True when it is fine."""
    if not isinstance(label, str) or not label.strip():
        problems.append(Problem(where, "is missing or empty" if label is None or isinstance(label, str)
                                else f"must be a string, not {json.dumps(label)}",
                                "add a short display name like \"7B Q4_K_M\""))
        return False
    if not _SAFE_LABEL.fullmatch(label) or label.strip() in (".", "..") or len(label) > MAX_LABEL:
        problems.append(Problem(where, f"{safe_text(repr(label))} cannot be used in file names (no '/', '\\', "
                                f"control characters, '.' or '..'; at most {MAX_LABEL} characters)", "rename it"))
        return False
    problem = text_problem(label)
    if problem:
        problems.append(Problem(where, str(problem), "use a short display name like \"7B Q4_K_M\""))
        return False
    if label in seen:
        problems.append(Problem(where, f"duplicates {seen[label]} ({safe_text(repr(label))})",
                                "give every entry its own label"))
        return False
    seen[label] = where
    return True
