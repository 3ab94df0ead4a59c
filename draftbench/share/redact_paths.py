"""Redact local paths from a results file so it can be posted publicly (``--redact-paths``).

Every string value is rewritten: an absolute path (``/home/alex/models/q.gguf``,
``C:\\Users\\alex\\q.gguf``, ``\\\\server\\share\\q.gguf``, ``file:///home/alex/q.gguf``,
``~alex/q.gguf``, folders with spaces such as ``/Users/Alex Smith/My Models/q.gguf``) becomes its
last component (``q.gguf``) and a bare home directory becomes ``~``. http(s) URLs and relative
paths are left alone. Generated text (a request's ``text``, the output excerpts of ``equivalence``) is model
output, not a path, and is kept as measured. Keys are never changed, so a redacted file loads,
charts, compares and exports like the original.

Secrets are masked too, wherever a string holds them: every list of strings (a server's ``command``,
``extra_args``) goes through :func:`draftbench.common.redact_secrets.redact_command`, every other string through
:func:`~draftbench.common.redact_secrets.redact_secret_text` (``--api-key K`` inside the stored summary's "Run
it:" line, ``Bearer sk-…``, an ``hf_…`` token), and a string under a key whose name says it is a secret
(``"api_key"``, under any key, known or not) is masked whole. So a file written before secrets were masked on
save, by upstream, or edited by hand does not carry a key into a public post.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..common.redact_secrets import MASK, is_secret_name, redact_command, redact_secret_text
from ..results.file import ResultsFile

# Fields that hold what a model generated; rewriting them would falsify the measurement.
GENERATED_TEXT_KEYS = frozenset({"text", "baseline_excerpt", "candidate_excerpt"})

# A path component: anything but separators, whitespace, quotes and the punctuation that ends a
# path in prose or in a command line ("…", 'x.gguf', (see /a/b), a,b).
_PART = r"[^\s/\\\"'`()\[\]{},;<>|]+"
# Folders may hold single spaces ("/Users/Alex Smith/…", "My Models/"): a folder is followed by a
# separator, which tells where it ends. A file name may hold them only where it runs to the end of the
# line (a value that is a whole path); elsewhere "x.gguf not found" must not swallow the prose.
_DIR = rf"{_PART}(?: {_PART})*"
_LAST = rf"{_PART}(?:(?: {_PART})+(?=\n|\Z))?"
# An absolute path is not preceded by a character that would make it part of a word, a URL
# (http://host/x, 127.0.0.1:8080/v1) or a relative path (models/x).
_NOT_INSIDE = r"(?<![\w.:/~\\-])"
_FILE_URL = rf"\bfile://[^\s/\\\"'<>]*(?:[/\\]{_DIR})*(?:[/\\]{_LAST})?[/\\]?"
_UNIX = rf"{_NOT_INSIDE}//?(?:{_DIR}/)*{_LAST}/?"                  # /a/b, //server/share/b
_TILDE = rf"{_NOT_INSIDE}~(?:[A-Za-z_][\w.-]*)?/(?:{_DIR}/)*(?:{_LAST})?/?"   # ~/a, ~alex/a (a bare ~alex: whole values only)
_WINDOWS = rf"{_NOT_INSIDE}[A-Za-z]:[\\/](?:{_DIR}[\\/])*{_LAST}[\\/]?"
_UNC = rf"{_NOT_INSIDE}\\\\{_PART}(?:\\{_DIR})*(?:\\{_LAST})?\\?"    # \\server\share\a
_PATH_RE = re.compile(f"{_FILE_URL}|{_UNC}|{_WINDOWS}|{_TILDE}|{_UNIX}")
_HOME_RE = re.compile(r"^(?:/home/[^/\\]+|/Users/[^/\\]+|/root|[A-Za-z]:[\\/]Users[\\/][^/\\]+|~[\w.-]*)[/\\]?$")
_FILE_HOST = re.compile(r"^file://[^/\\]*")
_BARE_TILDE_USER = re.compile(r"~[A-Za-z_][\w.-]*")


def _is_home(path: str) -> bool:
    home = os.path.expanduser("~").rstrip("/\\")
    return bool(_HOME_RE.match(path)) or (bool(home) and path.rstrip("/\\") == home)


def _replace(match: re.Match) -> str:
    path = match.group(0)
    if path.startswith("file:"):
        rest = _FILE_HOST.sub("", path)
        parts = [p for p in re.split(r"[/\\]", rest) if p]
        return "~" if not parts or _is_home(rest) or _is_home(rest.lstrip("/\\")) else parts[-1]
    if _is_home(path):
        return "~"
    parts = [p for p in re.split(r"[/\\]", path) if p]
    if path.startswith("~"):
        return parts[-1] if len(parts) > 1 else "~"       # ~alex/x.gguf → x.gguf; ~alex → ~
    if not parts or (len(parts) == 1 and path.startswith("/") and not path.startswith("//")):
        # "/" alone, or one component ("/v1", "/health", "/props"): an endpoint, not a local path.
        return path
    return parts[-1]


def redact_path_text(text: str) -> str:
    """``text`` with every absolute path (POSIX, ``~``/``~user``, Windows, UNC, ``file://``) replaced by its
    last component and home folders by ``~``."""
    if _BARE_TILDE_USER.fullmatch(text.strip()):
        return "~"          # a value that is just someone's home, ~alex (in prose "~2x" is not a path)
    return _PATH_RE.sub(_replace, text)


def redact_paths(value: Any, *, key: str | None = None) -> Any:
    """A copy of a JSON value with paths redacted in every string (see the module's docstring)."""
    if key in GENERATED_TEXT_KEYS:
        return value
    if isinstance(value, str):
        return MASK if key is not None and is_secret_name(key) else redact_path_text(redact_secret_text(value))
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
