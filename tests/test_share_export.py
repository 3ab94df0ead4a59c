"""sweep.py --export md|csv|json (of a results file, and of a comparison), checked against golden files.

Regenerate the golden files after an intended change with
``DRAFTBENCH_UPDATE_GOLDEN=1 pytest tests/test_share_export.py`` and review the diff.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from pathlib import Path

import pytest
from draftbench.results.file import save_results

from helpers import REFERENCE, run_cli
from share_data import box_a, box_b

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE_GOLDEN = os.environ.get("DRAFTBENCH_UPDATE_GOLDEN") == "1"
REF_7B = REFERENCE / "m4max-128gb_llamacpp_qwen25-7b.json"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE_GOLDEN or not path.exists():
        if not UPDATE_GOLDEN and os.environ.get("CI") == "true":
            pytest.fail(f"{path} is missing; generate it with DRAFTBENCH_UPDATE_GOLDEN=1")
        path.write_text(text)
        if not UPDATE_GOLDEN:
            pytest.skip(f"wrote the missing golden file {path}; review and commit it")
    assert text == path.read_text(), f"{name} changed; if intended, rerun with DRAFTBENCH_UPDATE_GOLDEN=1 and " \
                                     f"review the diff of {path}"


@pytest.fixture
def folder(tmp_path) -> Path:
    """A folder holding a.json and b.json (two machines) and the upstream 7B file, by relative names."""
    save_results(box_a(), tmp_path / "a.json")
    save_results(box_b(), tmp_path / "b.json")
    shutil.copy(REF_7B, tmp_path / "upstream-7b.json")
    return tmp_path


def export(folder: Path, *args: str) -> str:
    proc = run_cli("sweep.py", *args, cwd=folder)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return proc.stdout


@pytest.mark.parametrize("source, fmt, golden", [
    ("upstream-7b.json", "md", "export-upstream-7b.md"),
    ("a.json", "md", "export-a.md"),
    ("a.json", "csv", "export-a.csv"),
    ("a.json", "json", "export-a.json"),
])
def test_export_of_a_results_file_matches_golden(folder, source, fmt, golden):
    check_golden(golden, export(folder, "--results", source, "--export", fmt))


def test_export_of_a_comparison_matches_golden(folder):
    text = export(folder, "--compare", "a.json", "b.json", "--export", "md", "--no-chart")
    check_golden("export-compare-a-b.md", text)
    assert "Warning" not in text          # standard output holds the export alone


def test_markdown_is_a_hyperfine_table(folder):
    lines = export(folder, "--results", "a.json", "--export", "md").splitlines()
    assert lines[0] == "| Combination | Mean [tok/s] | Min [tok/s] | Max [tok/s] | Acceptance | Relative | Note |"
    assert lines[1] == "|:---|---:|---:|---:|---:|---:|:---|"
    assert lines[2].startswith("| `7B Q4_K_M (baseline)` | 45.89 ± 5.25 |") and "| 1.00 |" in lines[2]
    table = lines[:lines.index("")] if "" in lines else lines
    assert all(line.count("|") == 8 for line in table)
    assert "## Verdict" in lines          # the table is followed by each target's verdict and its command


def test_csv_has_one_row_per_combination_and_empty_for_not_measured(folder):
    rows = list(csv.DictReader(io.StringIO(export(folder, "--results", "upstream-7b.json", "--export", "csv"))))
    assert len(rows) == 207
    baseline = rows[0]
    assert baseline["role"] == "baseline" and baseline["acceptance_rate"] == "" and baseline["speedup"] == ""
    assert float(rows[1]["speedup"]) == pytest.approx(90.53 / 33.63, abs=1e-3)


def test_json_export_is_flat_and_strict(folder):
    text = export(folder, "--compare", "a.json", "b.json", "upstream-7b.json", "--export", "json", "--no-chart")
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-finite number {c} in the export"))
    assert data["kind"] == "comparison" and data["columns"][0] == "combination"
    assert [f["letter"] for f in data["meta"]["files"]] == ["A", "B", "C"]
    assert all(not isinstance(v, (dict, list)) for row in data["rows"] for v in row.values())
    assert len(data["rows"]) == 3 + 205          # 3 combinations in A and B (one also in C), 205 only in C
    good = next(r for r in data["rows"] if r["combination"] == "7B Q4_K_M + 0.5B Q8_0")
    assert good["files"] == "ABC" and good["B_vs_A_significant"] is True and good["C_vs_A_method"] == "ratio-of-means"


def test_output_is_written_and_never_replaces_an_input_or_a_results_file(folder):
    out = export(folder, "--results", "a.json", "--export", "md", "--output", "a.md")
    assert out == "Exported 3 combinations to a.md\n"
    assert (folder / "a.md").read_text().startswith("| Combination |")
    before = (folder / "a.json").read_bytes()
    for target in ("a.json", "b.json", "./a.json"):
        proc = run_cli("sweep.py", "--results", "a.json", "--export", "csv", "--output", target, cwd=folder)
        assert proc.returncode == 2 and proc.stderr.startswith("Error: --output "), proc.stderr
    assert (folder / "a.json").read_bytes() == before


def test_export_needs_a_source(folder):
    proc = run_cli("sweep.py", "--export", "md", cwd=folder)
    assert proc.returncode == 2 and "--export needs --results FILE (or --compare)" in proc.stderr
    proc = run_cli("sweep.py", "--results", "a.json", "--output", "x.md", cwd=folder)
    assert proc.returncode == 2 and "--output is where --export or --redact-paths writes" in proc.stderr


def test_an_inactive_row_exports_no_speed_up():
    """Issue 37: an export gave `1.71 [0.06, 45.72]` for a row that never speculated."""
    from dataclasses import replace

    from draftbench.share.export.table import results_table

    a = box_a()
    rows = list(a.results)
    assert rows[1].speedup is not None
    rows[1] = replace(rows[1], speculation_active=False)
    table = results_table(replace(a, results=tuple(rows)), "a.json")
    record, text = table.records[1], dict(zip([h.title for h in table.headings], table.text[1]))
    assert record["speedup"] is None and record["speedup_ci95_low"] is None and record["speedup_significant"] is None
    assert text["Relative"] == "—" and text["Note"] == "speculation not active: not a speed-up"
