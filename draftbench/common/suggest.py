"""'Did you mean …?' for every name a person types (settings keys, parameters, methods, labels).

A misspelt name must never be ignored quietly: ``settings.max_token`` once ran the default 512
tokens with a warning nobody read. Every unknown name is an error whose fix names the closest
known one (or, with nothing close, the known ones), so the fix is one edit.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def _normal(name: str) -> str:
    """Spelling differences that are not typos: case, and - vs _ (``ngram_mod`` / ``ngram-mod``)."""
    return name.strip().lower().replace("-", "_")


def closest(name: str, known: Iterable[str], n: int = 1) -> list[str]:
    """The known names nearest to ``name`` (at most ``n``), best first; [] when none is close."""
    names = list(dict.fromkeys(known))
    by_normal = {_normal(k): k for k in names}
    if _normal(name) in by_normal:
        return [by_normal[_normal(name)]]
    # prefixes count: "max_token" → "max_tokens", "ngram_mod_n" → "ngram_mod_n_match"
    matches = difflib.get_close_matches(_normal(name), list(by_normal), n=n, cutoff=0.75)
    return [by_normal[m] for m in matches]


def did_you_mean(name: str, known: Iterable[str], *, show_known: int = 12, quote: bool = False) -> str:
    """A fix for an unknown ``name``: 'did you mean "max_tokens"?' when one known name is close, else
    the known names (the first ``show_known`` of them)."""
    names = list(dict.fromkeys(known))
    near = closest(name, names)

    def shown(text: str) -> str:
        return repr(text) if quote else text

    if near:
        return f"did you mean {shown(near[0])}?"
    if not names:
        return "remove it"
    more = f", … ({len(names) - show_known} more)" if len(names) > show_known else ""
    return "use one of: " + ", ".join(shown(k) for k in names[:show_known]) + more
