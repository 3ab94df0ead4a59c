"""The report's chart registry: every registered chart is drawn, in order (its imports: test_architecture)."""

from __future__ import annotations

import dataclasses
import re

from draftbench.report import CHART_IDS, CHARTS, render_report
from draftbench.results.file import ResultsFile, Row


def test_the_page_draws_every_registered_chart_in_order():
    assert len(set(CHART_IDS)) == len(CHART_IDS)
    results = ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="f", settings={},
                          results=(Row(target="T 7B", mean_tps=10.0),
                                   Row(target="T 7B", draft="D 0.5B", role="speculative", mean_tps=12.0)))
    page = render_report(results, cdn=True)
    one_stream = [chart for chart in CHARTS
                  if not chart.chart_id.startswith(("chart-concurrency-", "chart-context-", "chart-temperature"))]
    # in order; a chart with nothing to draw is a section that says why (no empty axes)
    assert re.findall(r'<section class="chart-(?:section|empty)" id="([^"]+)-section">', page) == [
        c.chart_id for c in one_stream]
    for chart in one_stream:
        assert f"<h2>{chart.title}</h2>" in page
    # several concurrency levels: every registered chart
    levels = results.results + tuple(Row(target="T 7B", draft=r.draft, role=r.role, mean_tps=r.mean_tps, concurrency=4)
                                     for r in results.results)
    page = render_report(dataclasses.replace(results, results=levels), cdn=True)
    every = [c for c in CHARTS if not c.chart_id.startswith(("chart-context-", "chart-temperature"))]   # other axes
    assert re.findall(r'<section class="chart-(?:section|empty)" id="([^"]+)-section">', page) == [
        c.chart_id for c in every]
    for chart in every:
        assert f"<h2>{chart.title}</h2>" in page
