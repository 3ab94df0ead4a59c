"""Redact local paths from a results file so it can be posted publicly (``--redact-paths``).

Every string value is rewritten: an absolute path (``/home/alex/models/q.gguf``,
``C:\\Users\\alex\\q.gguf``) becomes its last component (``q.gguf``) and a bare home directory
becomes ``~``; ``~/…`` paths become their last component too. URLs and relative paths are left
alone. Generated text (a request's ``text``, the output excerpts of ``equivalence``) is model
output, not a path, and is kept as measured. Keys are never changed, so a redacted file loads,
charts, compares and exports like the original.

Secrets are masked too: every list of strings (a server's ``command``, ``extra_args``) goes
through :func:`draftbench.common.redact_secrets.redact_command`, so a file written before secrets were masked on
save (or by upstream) does not carry an ``--api-key`` value into a public post.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..common.redact_secrets import redact_command
from ..results.file import ResultsFile

# Fields that hold what a model generated; rewriting them would falsify the measurement.
GENERATED_TEXT_KEYS = frozenset({"text", "baseline_excerpt", "candidate_excerpt"})

# A path component: anything but separators, whitespace, quotes and the punctuation that ends a
# path in prose or in a command line ("…", 'x.gguf', (see /a/b), a,b).
_PART = r"[^\s/\\\"'`()\[\]{},;<>|]+"
# An absolute path is not preceded by a character that would make it part of a word, a URL
# (http://host/x, 127.0.0.1:8080/v1) or a relative path (models/x).
_UNIX = rf"(?<![\w.:/~\\-])/(?:{_PART}/)*{_PART}/?"
_TILDE = rf"(?<![\w.:/\\-])~(?:/{_PART})+/?"
_WINDOWS = rf"(?<![\w.:/\\-])[A-Za-z]:\\(?:{_PART}\\)*{_PART}\\?"
_PATH_RE = re.compile(f"{_UNIX}|{_TILDE}|{_WINDOWS}")
_HOME_RE = re.compile(r"^(?:/home/[^/\\]+|/Users/[^/\\]+|/root|[A-Za-z]:\\Users\\[^/\\]+)[/\\]?$")


def _is_home(path: str) -> bool:
    home = os.path.expanduser("~").rstrip("/\\")
    return bool(_HOME_RE.match(path)) or (bool(home) and path.rstrip("/\\") == home)


def _replace(match: re.Match) -> str:
    path = match.group(0)
    if _is_home(path) or path.rstrip("/") == "~":
        return "~"
    parts = [p for p in re.split(r"[/\\]", path) if p]
    if not parts or (len(parts) == 1 and path.startswith("/") and not path.startswith("//")):
        # "/" alone, or one component ("/v1", "/health", "/props"): an endpoint, not a local path.
        return path
    return parts[-1]


def redact_path_text(text: str) -> str:
    """``text`` with every absolute (or ``~/``) path replaced by its last component and home folders by ``~``."""
    return _PATH_RE.sub(_replace, text)


def redact_paths(value: Any, *, key: str | None = None) -> Any:
    """A copy of a JSON value with paths redacted in every string (see the module's docstring)."""
    if key in GENERATED_TEXT_KEYS:
        return value
    if isinstance(value, str):
        return redact_path_text(value)
    if isinstance(value, dict):
        return {k: redact_paths(v, key=k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, str) for v in value):
            value = redact_command(value)     # a command line: mask secret flag values first
        return [redact_paths(v, key=key) for v in value]
    return value


def redacted_results(results: ResultsFile) -> ResultsFile:
    """A copy of a results file with its paths redacted (it loads like the original)."""
    return ResultsFile.from_dict(redact_paths(results.to_dict()), source="<redacted>")
