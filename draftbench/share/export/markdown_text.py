"""Text from a results file or a user, made literal in Markdown (the ``--export md`` table and verdicts).

A results file may have been edited by anyone, and labels come from users: a label
``[click me](javascript:…)`` or ``![x](track.png?u=me)`` must not become a link or a remote image where
the file is shown (GitHub, an editor's preview), nor ``# …`` a heading or ``<script>`` HTML.
:func:`plain` escapes ``[`` and ``]`` (no link or image can form), ``<`` and ``>`` (no HTML, no ``<url>``
autolink), ``\\``, emphasis and code characters, ``@`` and the ``:`` of ``http:`` / the ``.`` of ``www.``
(GitHub's bare-link autolinks), on one line, and a first character that would start a block (a
heading, a quote, a list). :func:`code` fences a code span past any backticks the text holds.
"""

from __future__ import annotations

import re

_INLINE = re.compile(r"[\\\[\]<>@`*]")
# GitHub's extended autolinks: bare http(s):// and ftp:// URLs, www. names, e-mail addresses (the @ above)
_AUTOLINK = re.compile(r"(?i)\b(https?|ftp|mailto)(:)|\b(www)(\.)")
_BLOCK_START = re.compile(r"^(\s*)([#>+=|-]|\d+(?=[.)]))")


def plain(text: object) -> str:
    """``text`` as literal Markdown on one line: no link, image, autolink, heading, HTML or emphasis."""
    s = " ".join(str(text).split())
    s = _INLINE.sub(lambda m: "\\" + m.group(0), s)
    s = _AUTOLINK.sub(lambda m: (m.group(1) + "\\:") if m.group(1) else (m.group(3) + "\\."), s)
    return _BLOCK_START.sub(lambda m: m.group(1) + "\\" + m.group(2), s)


def code(text: object) -> str:
    """``text`` as a code span (literal: nothing inside is Markdown), fenced past any backticks it holds."""
    s = " ".join(str(text).split())
    fence = "`" * (1 + max((len(m) for m in re.findall(r"`+", s)), default=0))
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


