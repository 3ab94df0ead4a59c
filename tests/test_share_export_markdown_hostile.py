"""Issue 36, Markdown export: a label or a verdict from an edited results file never becomes a link, a remote
image, a heading or HTML in `--export md` (table cells, the verdict's prose, its "Run it" and "For …" lines)."""

from __future__ import annotations

import json
import re

import pytest
from draftbench.results.file import save_results
from draftbench.share.export.markdown_text import code, plain

from helpers import run_cli
from share_data import BAD, GOOD, TARGET, box_a

LINK = "0.1B [click me](javascript:alert(1))"
IMAGE = "![x](https://track.example/p.png?u=me)"
HEADING = "# Owned <script>alert(1)</script> www.evil.example me@evil.example http://evil.example"


def live(markdown: str) -> list[str]:
    """What a CommonMark/GFM renderer would turn into a link, an image, HTML, a heading or a bare-URL autolink
    (escaped characters and code spans are literal)."""
    text = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", markdown)          # code spans
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)        # fenced blocks
    text = text.replace("\n## Verdict\n", "\n")                        # our own heading
    found = []
    for pattern in (r"(?<!\\)\[[^\]]*(?<!\\)\]\(", r"(?<!\\)<[A-Za-z/!?]", r"^[ ]{0,3}#{1,6}[ \t]",
                    r"(?<![\\\w])(https?|ftp)(?=://)", r"(?<![\\\w])www\.", r"(?<!\\)@\w"):
        found += re.findall(pattern, text, flags=re.M)
    return found


@pytest.mark.parametrize("text", [LINK, IMAGE, HEADING, "> quote", "1. list", "- item", "a\nb\n===", "x` [y](z) `"])
def test_plain_and_code_leave_nothing_live(text):
    assert live(plain(text)) == [] and "\n" not in plain(text)
    assert live(code(text)) == [] and code(text).count("`") >= 2


def test_an_edited_results_file_exports_inert_markdown(tmp_path):
    path = tmp_path / "r.json"
    save_results(box_a(), path)
    text = path.read_text()
    for old, new in ((GOOD, LINK), (BAD, IMAGE), (TARGET, HEADING)):
        text = text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
    path.write_text(text)
    proc = run_cli("sweep.py", "--results", str(path), "--export", "md", timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "## Verdict" in out and "click me" in out and "Owned" in out      # the text is there, shown as text
    assert live(out) == [], live(out)
    assert not any(line.startswith("#") and line != "## Verdict" for line in out.splitlines())
