"""The README is the front door and docs/ holds the depth: the README stays short, every relative link
in README.md and docs/*.md reaches a file and (for ``#anchor``) a heading there, every docs page is
linked from the README, and the places the code and the benchmarks point readers to exist."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"

README_BUDGET_LINES = 450     # issue 26: hyperfine's README is 359 lines, guidellm's 288
README_BUDGET_BYTES = 16_384  # issue 48: "fits in about 15 KB" (it was 35.7 KB, about three times hyperfine's)

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


def test_readme_stays_within_its_budget() -> None:
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= README_BUDGET_LINES, (
        f"README.md has {lines} lines (at most {README_BUDGET_LINES}): move the depth to a page under docs/ and link it"
    )
    size = len(README.read_bytes())
    assert size <= README_BUDGET_BYTES, (
        f"README.md is {size} bytes (at most {README_BUDGET_BYTES}): move the depth to a page under docs/ and link it"
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


# --------------------------------------------------------------------------- the docs say what the code does

def settings_fields() -> dict[str, list]:
    """Every settings key (the shared ones and each backend's) and its declared Fields (a key two backends
    declare alike is listed once per declaration)."""
    from draftbench.backends import backend_names, get_backend
    from draftbench.config.settings import Settings

    fields: dict[str, list] = {key: [spec] for key, spec in Settings.schema().items()}
    for backend in {get_backend(name).settings_class for name in backend_names()}:
        for key, spec in backend.schema().items():
            fields.setdefault(key, [])
            if spec not in fields[key]:
                fields[key].append(spec)
    return fields


def table_rows(page: Path, first: str, second: str) -> list[tuple[int, list[str]]]:
    """(line number, cells) of every row of the tables whose header starts with the cells ``first`` and ``second``
    (``first`` may be followed by more, as in "key / flag")."""
    rows, inside = [], False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]] if line.startswith("|") else []
        if len(cells) >= 2 and cells[0].lower().startswith(first) and cells[1].lower() == second:
            inside = True
        elif not cells:
            inside = False
        elif inside and not set("".join(cells)) <= set("-: "):
            rows.append((number, cells))
    return rows


def documented_default(cell: str) -> tuple[bool, object]:
    """(is it a literal, its value): a JSON literal such as `0.02`, `"auto"`, `[1]`, `null (all)`'s null; or the
    cell's text for words ("searched", "server default": a default of None; `127.0.0.1`: that string)."""
    text = cell.replace("`", "").strip()
    for candidate in (text, text.split(" ")[0]):
        try:
            return True, json.loads(candidate)
        except ValueError:
            continue
    return False, text


def test_every_documented_default_is_the_one_the_code_declares() -> None:
    """The "default" column of every settings table (README and docs/) against config/settings.py and the
    backends' own settings: a literal must equal the declared default; words ("searched", "server default",
    "none") stand for a default of null; a bare word for a text default must be that text."""
    fields = settings_fields()
    wrong = []
    for page in pages():
        for number, cells in table_rows(page, "key", "default"):
            keys = [k for k in re.findall(r"`([a-z_0-9]+)`", cells[0]) if k in fields]
            for key in keys:
                literal, value = documented_default(cells[1])
                declared = [spec.default for spec in fields[key]]
                ok = (value in declared) if literal else (None in declared or value in declared)
                if not ok:
                    wrong.append(f"{page.relative_to(ROOT)}:{number}: `{key}` documented default {cells[1]}, "
                                 f"declared {declared}")
    assert not wrong, "\n".join(wrong)


def test_every_setting_is_documented_somewhere() -> None:
    text = "\n".join(p.read_text(encoding="utf-8") for p in pages())
    missing = [key for key in settings_fields() if f"`{key}`" not in text and f"settings.{key}" not in text]
    assert not missing, f"settings keys no page names: {missing}"


def known_values() -> dict[str, set[str]]:
    """Each settings key's possible text values that the docs name: its choices, its default, and for prompts the
    named sets."""
    from draftbench.config.prompt_sets import SET_SELECTORS
    from draftbench.config.prompts import ALL_CATEGORIES, STANDARD

    out: dict[str, set[str]] = {}
    for key, specs in settings_fields().items():
        for spec in specs:
            values = {*(spec.choices or ()), *([spec.default] if isinstance(spec.default, str) else [])}
            out.setdefault(key, set()).update(v for v in values if isinstance(v, str))
    out["prompts"] |= {"builtin", STANDARD, *ALL_CATEGORIES, *SET_SELECTORS}
    return out


def test_a_value_called_the_default_is_the_default() -> None:
    """`key: "value"` (the default) names that key's default; `"value"` (the default) names one a key with that
    value defaults to (docs/prompts.md once called "builtin" the default while "standard" was)."""
    fields, values = settings_fields(), known_values()
    wrong = []
    for page in pages():
        for line in outside_code(page.read_text(encoding="utf-8")):
            for key, value in re.findall(r'`(?:settings\.)?([a-z_]+): "([^"`]+)"`\s*\(the default[),;]', line):
                if key in fields and value not in [s.default for s in fields[key]]:
                    wrong.append(f"{page.relative_to(ROOT)}: {key}: {value!r} called the default")
            for value in re.findall(r'`"([^"`]+)"`\s*\(the default\)', line):
                owners = [k for k, known in values.items() if value in known]
                if owners and not any(value == s.default for k in owners for s in fields[k]):
                    wrong.append(f"{page.relative_to(ROOT)}: {value!r} called the default; it is not the default of "
                                 f"{', '.join(owners)}")
    assert not wrong, "\n".join(wrong)


def option_choices() -> dict[str, set[str]]:
    """Every option with a fixed list of choices in sweep.py, bench.py and server.py (its subcommands too)."""
    import argparse

    from draftbench.cli import bench_cli, server_cli, sweep_cli

    out: dict[str, set[str]] = {}
    parsers = [m.build_parser() for m in (sweep_cli, bench_cli, server_cli)]
    while parsers:
        parser = parsers.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
            elif action.choices and action.option_strings:
                for option in action.option_strings:
                    out.setdefault(option, set()).update(str(c) for c in action.choices)
    return out


def test_every_documented_choice_list_is_the_options_own() -> None:
    """`--option a|b|c` names only the option's choices, and all of them in the option's own table row; a
    backticked list of words in that row (`code json list …`) is all of them too (the README once listed 6 of
    bench.py --category's 11)."""
    choices = option_choices()
    wrong = []
    for page in pages():
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            row = line.startswith("|")
            first_cell = re.split(r"(?<!\\)\|", line)[1] if row else ""
            for option, known in choices.items():
                for listed in re.findall(re.escape(option) + r"[ =]((?:[\w:.-]+\\?\|)+[\w:.-]+)", line):
                    values = set(listed.replace("\\|", "|").split("|"))
                    whole = row and option in first_cell
                    if not values <= known or (whole and values != known):
                        wrong.append(f"{page.relative_to(ROOT)}:{number}: {option} {listed} (choices: "
                                     f"{'|'.join(sorted(known))})")
                if row and re.search(re.escape(option) + r"\b", first_cell):
                    for words in re.findall(r"`([\w:.-]+(?: [\w:.-]+)+)`", line):
                        values = set(words.split())
                        if len(values & known) >= 2 and values != known:
                            wrong.append(f"{page.relative_to(ROOT)}:{number}: {option}: `{words}` (choices: "
                                         f"{' '.join(sorted(known))})")
    assert not wrong, "\n".join(wrong)


def backticked(text: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", text))


def test_the_documented_row_statuses_roles_and_verdict_outcomes_are_the_codes() -> None:
    """docs/results-format.md lists every row status and role and every staged verdict's outcome, and nothing
    else (results/kinds.py, analysis/decision.py's Outcome)."""
    from draftbench.analysis.decision import Outcome
    from draftbench.results.kinds import ROLES, STATUSES

    rows = dict((cells[0], cells[1]) for _n, cells in table_rows(DOCS / "results-format.md", "key", "meaning"))
    assert backticked(rows["`status`, `reason`"]) == set(STATUSES)
    assert backticked(rows["`role`"]) == set(ROLES)
    summary = rows["`summary.targets[]`"]
    decisions = re.search(r"`stages`: `decision` \(([^)]*)\)", summary)
    assert decisions is not None and backticked(decisions.group(1)) == {o.value for o in Outcome}
