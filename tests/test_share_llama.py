"""A fresh real sweep (forged SmolLM2 family on llama-server) compared with the upstream reference
files, exported and redacted, as a user would share it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import REFERENCE, run_cli
from test_cli_sweep_cli_llama import write_config

pytestmark = pytest.mark.llama

REF_72B = REFERENCE / "m4max-128gb_llamacpp_qwen25-72b.json"
REF_7B = REFERENCE / "m4max-128gb_llamacpp_qwen25-7b.json"


@pytest.fixture(scope="module")
def fresh(models, tmp_path_factory) -> Path:
    """One small real sweep: the 241M target alone and with the good draft."""
    folder = tmp_path_factory.mktemp("fresh")
    config = write_config(folder, models, drafts=("good",), name="fresh", runs=1, max_tokens=16)
    results = folder / "fresh-results.json"
    proc = run_cli("sweep.py", "--config", str(config), "--results", str(results), "--no-chart", timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return results


def test_reference_files_and_a_fresh_sweep_compare(fresh, tmp_path):
    chart = tmp_path / "cmp.html"
    before = fresh.read_bytes()
    proc = run_cli("sweep.py", "--compare", str(REF_72B), str(REF_7B), str(fresh), "--chart", str(chart))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "C  fresh-results.json — test-2core, llamacpp, fresh" in out
    assert "Warning: the files differ in what was measured" in out
    assert "settings.max_tokens: A 1024; B 1024; C 16" in out
    assert "per-request data: A no; B no; C yes" in out
    assert "Only in A (64 combinations):" in out and "Only in B (207 combinations):" in out
    assert "Only in C (2 combinations):" in out and "  241M Q4_1: baseline, 135M Q4_1" in out
    assert f"Comparison report saved to {chart}" in out
    # no row in common (other models), yet a table: each file's own verdict per target, side by side
    verdicts = [line for line in out.splitlines() if line.startswith(("| A ", "| B ", "| C "))]
    assert [line[:6] for line in verdicts] == ["| A   "] * 2 + ["| B   "] * 9 + ["| C   "], verdicts
    assert verdicts[-1].startswith("| C    | 241M Q4_1 ")
    page = chart.read_text()
    assert 'id="best-table"' in page and 'id="measurement-differences"' in page and "fresh-results.json" in page and 'id="chart-file-C"' in page
    assert fresh.read_bytes() == before


def test_a_sweep_compared_with_its_shared_copy_matches_itself(fresh, tmp_path):
    shared = tmp_path / "fresh-results.shared.json"
    proc = run_cli("sweep.py", "--results", str(fresh), "--redact-paths", "--output", str(shared))
    assert proc.returncode == 0, proc.stderr
    text = shared.read_text()
    assert str(Path.home()) + "/" not in text and "/.cache/draftbench/" not in text
    proc = run_cli("sweep.py", "--compare", str(fresh), str(shared), "--no-chart")
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| 241M Q4_1")]
    # a copy holds the same measurements, not a second measurement of them (issue 37): said, never paired
    # with themselves into "1.00x [1.00x, 1.00x]"
    assert len(rows) == 2 and all("| same measurements " in r for r in rows), rows
    assert "1.00x [1.00x, 1.00x]" not in proc.stdout and "same measurements (no change to show)" in proc.stdout


def test_fresh_sweep_exports(fresh):
    proc = run_cli("sweep.py", "--results", str(fresh), "--export", "md")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[2].startswith("| `241M Q4_1 (baseline)` |") and lines[3].startswith("| `241M Q4_1 + 135M Q4_1` |")
    proc = run_cli("sweep.py", "--results", str(fresh), "--export", "json")
    rows = json.loads(proc.stdout)["rows"]
    assert rows[1]["speculation_active"] is True and rows[1]["acceptance_rate"] > 0.5
