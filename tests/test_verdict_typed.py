"""The verdict is typed end to end (issue 33): ``analyze`` builds a frozen ``Summary`` of ``TargetVerdict``s, every
view reads their attributes, and the results file's ``summary`` object is only their ``to_dict``. No module reads
the verdict back as a dict; a file's stored summary is only ever written back (a copy), never rendered."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest
from draftbench.analysis.summary import Summary, TargetVerdict, summary_of, verdicts_of
from draftbench.analysis.verdict import analyze
from draftbench.results.file import StoredSummary, load_results, save_results
from draftbench.share.redact_paths import redacted_results

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("draftbench", "benchmarks", "tools")
UPSTREAM = ROOT / "tests" / "data" / "upstream" / "m4max-128gb_llamacpp_qwen25-7b.json"
# Keys only a verdict entry (or the summary) holds: read as a string key anywhere, they would be a dict path.
VERDICT_KEYS = {"verdict", "recommended_draft", "no_draft_can_pay", "inactive_drafts", "within_session",
                "run_by_category", "server_loads", "crossover", "by_category", "stages", "best", "run", "race",
                "per_length", "k_prediction"}


def _string_key(node: ast.AST) -> tuple[ast.expr, str] | None:
    """(the object, the key) of ``x["key"]`` or ``x.get("key", …)``; None for anything else."""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant) \
            and isinstance(node.slice.value, str):
        return node.value, node.slice.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args \
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return node.func.value, node.args[0].value
    return None


def _reads_the_summary(obj: ast.expr) -> bool:
    """``results.summary[…]``, ``(results.summary or {}).get(…)``: the summary read as a dict."""
    return any(isinstance(n, ast.Attribute) and n.attr == "summary" for n in ast.walk(obj))


def dict_reads_of_the_verdict() -> list[str]:
    found = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                read = _string_key(node)
                if read is None:
                    continue
                obj, key = read
                if _reads_the_summary(obj) or (key in VERDICT_KEYS and rel.startswith("draftbench/")):
                    found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_reads_the_verdict_as_a_dict():
    assert dict_reads_of_the_verdict() == []


def test_the_count_sees_a_dict_read():
    tree = ast.parse('entry = (results.summary or {}).get("targets")[0]\nprint(entry["verdict"])\n')
    reads = [r for n in ast.walk(tree) if (r := _string_key(n)) is not None]
    assert [key for obj, key in reads if _reads_the_summary(obj) or key in VERDICT_KEYS] == ["targets", "verdict"]


def test_the_verdict_is_frozen_and_typed():
    results = analyze(load_results(UPSTREAM))
    summary = summary_of(results)
    assert isinstance(summary, Summary) and all(isinstance(v, TargetVerdict) for v in summary.targets)
    verdict = summary.targets[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.verdict = "changed"         # type: ignore[misc]
    assert verdict.recommended_draft == verdict.choice.recommended_draft and verdict.speedup is not None


def test_a_stored_summary_is_written_back_as_read_and_never_rendered(tmp_path):
    analysed = analyze(load_results(UPSTREAM))
    path = tmp_path / "r.json"
    save_results(analysed, path)
    written = json.loads(path.read_text(encoding="utf-8"))["summary"]
    assert written == summary_of(analysed).to_dict()          # the file's summary is the typed value's to_dict
    loaded = load_results(path)
    assert isinstance(loaded.summary, StoredSummary) and loaded.summary.to_dict() == written
    assert verdicts_of(loaded) == ()                           # nothing renders it: every view analyses again
    assert summary_of(analyze(loaded)).to_dict() == written    # … and reaches the same verdict
    again = tmp_path / "again.json"
    save_results(loaded, again)                                # a copy (as --redact-paths writes) keeps it
    assert json.loads(again.read_text(encoding="utf-8"))["summary"] == written
    assert redacted_results(loaded).summary.to_dict() == written
