"""The report package's shape: what it may import, who may import it, and its chart registry."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

from draftbench.report import CHART_IDS, CHARTS, render_report
from draftbench.results.file import ResultsFile, Row

PACKAGE = Path(__file__).resolve().parent.parent / "draftbench"
REPORT = PACKAGE / "report"
# The report reads results (and their findings) and their analysis, and writes through paths; nothing else.
ALLOWED = {"draftbench", "draftbench.results.file", "draftbench.analysis.stats", "draftbench.analysis.verdict", "draftbench.common.files",
           "draftbench.results.findings"}
# The comparison page (compare_page, compare_figures) also reads the comparison of several results
# files: compare/ is a pure function of results files too.
ALLOWED_PACKAGES = ("draftbench.share.compare",)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, *, top_level_only: bool = False) -> list[str]:
    """Absolute names of the modules a file imports (``from x import y`` counts as x and x.y)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            out += [base] + [f"{base}.{alias.name}" for alias in node.names]
    return out


def _is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def test_report_imports_only_results_stats_analysis_and_paths():
    for path in REPORT.glob("*.py"):
        used = {name if _is_module(name) else name.rpartition(".")[0] for name in _imports(path)
                if name.startswith("draftbench") and not name.startswith("draftbench.report")}
        used = {n for n in used if not any(n == p or n.startswith(p + ".") for p in ALLOWED_PACKAGES)}
        assert used <= ALLOWED, (path, used - ALLOWED)


def test_no_module_imports_the_report_at_import_time():
    # The CLIs and the sweep import it inside the function that writes a report.
    for path in PACKAGE.rglob("*.py"):
        if REPORT in path.parents:
            continue
        names = _imports(path, top_level_only=True)
        assert not any(n == "draftbench.report" or n.startswith("draftbench.report.") for n in names), path


def test_report_imports_no_private_module_or_name():
    for path in REPORT.glob("*.py"):
        for name in _imports(path):
            private = [part for part in name.split(".") if part.startswith("_") and not part.startswith("__")]
            assert not private, (path, name)


def test_report_modules_stay_small():
    for path in REPORT.glob("*.py"):
        assert len(path.read_text(encoding="utf-8").splitlines()) <= 400, path


def test_the_page_draws_every_registered_chart_in_order():
    assert tuple(chart.chart_id for chart in CHARTS) == CHART_IDS
    assert len(set(CHART_IDS)) == len(CHART_IDS)
    results = ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="f", settings={},
                          results=(Row(target="T 7B", mean_tps=10.0),
                                   Row(target="T 7B", draft="D 0.5B", role="speculative", mean_tps=12.0)))
    page = render_report(results, cdn=True)
    one_stream = [chart for chart in CHARTS if not chart.chart_id.startswith("chart-concurrency-")]
    assert re.findall(r'<section class="chart-section" id="([^"]+)-section">', page) == [c.chart_id for c in one_stream]
    for chart in one_stream:
        assert f"<h2>{chart.title}</h2>" in page
    # several concurrency levels: every registered chart
    levels = results.results + tuple(Row(target="T 7B", draft=r.draft, role=r.role, mean_tps=r.mean_tps, concurrency=4)
                                     for r in results.results)
    page = render_report(dataclasses.replace(results, results=levels), cdn=True)
    assert re.findall(r'<section class="chart-section" id="([^"]+)-section">', page) == list(CHART_IDS)
    for chart in CHARTS:
        assert f"<h2>{chart.title}</h2>" in page
