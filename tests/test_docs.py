"""The README is the front door and docs/ holds the depth: the README stays short, every relative link
in README.md and docs/*.md reaches a file and (for ``#anchor``) a heading there, every docs page is
linked from the README, and the places the code and the benchmarks point readers to exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"

README_BUDGET_LINES = 450     # issue 26: hyperfine's README is 359 lines, guidellm's 288

LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def outside_code(text: str) -> list[str]:
    """The lines of a Markdown file that are not inside a fenced code block."""
    kept, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            kept.append(line)
    return kept


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text, lower-cased, without punctuation, spaces as -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in outside_code(path.read_text(encoding="utf-8")):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    return [m.group(1) for line in outside_code(path.read_text(encoding="utf-8")) for m in LINK.finditer(line)]


def test_readme_stays_within_its_line_budget() -> None:
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= README_BUDGET_LINES, (
        f"README.md has {lines} lines (at most {README_BUDGET_LINES}): move the depth to a page under docs/ and link it"
    )


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_reaches_a_file_and_a_heading(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with the anchor #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: broken links:\n" + "\n".join(broken)


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links(README) if t.startswith("docs/")}
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if p.resolve() not in linked]
    assert not missing, f"docs pages the README never links: {missing}"


def test_the_places_code_points_readers_to_exist() -> None:
    """`docs/x.md` named in the package, tools or benchmarks exists; `README "Section"` names a heading
    or a bold run-in label of the README (case-insensitive)."""
    readme = README.read_text(encoding="utf-8")
    titles = [m.group(1).lower() for m in re.finditer(r"^#{1,6}\s+(.*)$", readme, re.M)]
    titles += [m.group(1).lower() for m in re.finditer(r"\*\*([^*]+?)\.?\*\*", readme)]
    problems = []
    for folder in ("draftbench", "tools", "benchmarks", "tests"):
        for source in sorted((ROOT / folder).rglob("*")):
            if source.suffix not in {".py", ".sh"} or source == Path(__file__):
                continue
            text = source.read_text(encoding="utf-8")
            where = source.relative_to(ROOT)
            for doc in set(re.findall(r"\bdocs/([\w.-]+\.md)", text)):
                if not (DOCS / doc).exists():
                    problems.append(f"{where}: docs/{doc} does not exist")
            for section in set(re.findall(r'README[\'’]?s? \\?"([^"\\]+)\\?"', text)):
                if not any(section.lower() in title for title in titles):
                    problems.append(f'{where}: README "{section}" names no heading of README.md')
    assert not problems, "\n".join(problems)


def test_slug_follows_githubs_rules() -> None:
    assert slug("sweep.py — the full sweep") == "sweeppy--the-full-sweep"
    assert slug("Latency as an axis: `benchmarks/rpc_latency.py`") == "latency-as-an-axis-benchmarksrpc_latencypy"
    assert slug("Loops in the target's own output") == "loops-in-the-targets-own-output"
    assert slug('llama.cpp (`"backend": "llamacpp"`, the default)') == "llamacpp-backend-llamacpp-the-default"
