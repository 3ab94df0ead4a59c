"""Every section of every kind of report, as a person sees it on a laptop (issue 25): one screenshot per
section in test-artifacts/screens/, and a failure for a table cell or header whose text is clipped, a
table cut by its frame, a chart drawn without data, or a short word (or "schema 3") broken over two lines.

Headless Chromium 1024 px wide (a small laptop's width); the pages: a fresh sweep (theory, k, drift), the two
upstream files, a method sweep (categories, a swept parameter, a hybrid), a sweep with ceiling runs
and per-position counts, a concurrency sweep, an adaptive race, and a comparison of two files from one hardware name.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path

import pytest
from draftbench.analysis.verdict import analyze
from draftbench.report import write_report
from draftbench.report.compare_page import write_comparison
from draftbench.results.file import load_results
from draftbench.share.compare import compare
from draftbench.share.compare.match import ComparedFile

from fakes.inprocess import FakeBackend
from test_analysis_draft import config as inside_config
from test_analysis_draft import run_sweep
from test_analysis_draft import script as inside_script
from test_measure_concurrent import config as concurrency_config
from test_measure_concurrent import crossover_script, sweep
from test_report import ARTIFACTS, browser, fresh_sweep_results, reference  # noqa: F401 (browser: a fixture)
from test_results_method_stats import DRAFTED, NGRAM, _results, _row
from test_sweep_race import config as race_config
from test_sweep_race import script as race_script
from test_sweep_race import sweep as race_sweep

LAPTOP = (1024, 768)     # a small laptop, or a browser window beside another
SCREENS = ARTIFACTS / "screens"

CHECK = """
const out = {clipped: [], cut: [], empty: [], wrapped: [], sections: []};
const visible = el => el.offsetParent !== null || el.tagName === 'BODY';
for (const wrap of document.querySelectorAll('.table-wrap')) {
  if (visible(wrap) && wrap.scrollWidth > wrap.clientWidth + 1)
    out.cut.push((wrap.querySelector('table') || wrap).id + ': ' + wrap.scrollWidth + ' px in ' + wrap.clientWidth);
}
for (const cell of document.querySelectorAll('th, td')) {
  if (visible(cell) && cell.scrollWidth > cell.clientWidth + 1)
    out.clipped.push(cell.closest('table').id + ': ' + cell.textContent.trim().slice(0, 60));
}
for (const gd of document.querySelectorAll('.js-plotly-plot')) {
  const values = (gd.data || []).flatMap(t => [].concat(...[t.y || [], t.z || []].map(
      v => Array.isArray(v) ? v.flat() : [v]))).filter(v => v !== null && v !== undefined);
  const svg = gd.querySelector('.main-svg');
  if (!values.length || !svg || svg.getBoundingClientRect().height < 100) out.empty.push(gd.id);
}
// a short word (or "schema 3") broken over two lines reads as two words ("eliminate d"); a break after
// a hyphen or a slash is where text may wrap
for (const cell of document.querySelectorAll('th, td')) {
  const t = cell.textContent.trim();
  if (visible(cell) && t && t.length <= 24 && (!/[\\s\\-\\/]/.test(t) || /^schema\\s\\d+$/.test(t))) {
    const range = document.createRange(); range.selectNodeContents(cell);
    const lines = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
    if (lines.size > 1) out.wrapped.push(cell.closest('table').id + ': ' + t);
  }
}
for (const s of document.querySelectorAll('main > header, main > section'))
  if (s.id || s.tagName === 'HEADER') { const r = s.getBoundingClientRect();
              out.sections.push([s.id || 'header', r.x + window.scrollX, r.y + window.scrollY, r.width, r.height]); }
return out;
"""


def methods_results():
    hybrid = {"label": "135M + ngram-mod", "method": ["draft-simple", "ngram-mod"], "draft": "135M",
              "params": {"draft_max": 4}}
    rows = [_row(None, "baseline", {"code-edit": 1, "chat": 1, "prose": 1}),
            _row("135M + ngram-mod", "speculative", {"code-edit": 1.6, "chat": 1.2, "prose": 1.21}, candidate=hybrid,
                 draft_max=4)]
    for n, f in ((8, 1.5), (16, 1.9), (24, 1.7)):
        cand = dict(NGRAM, label=f"ngram-mod n_match={n}", params={"ngram_mod_n_match": n})
        rows.append(_row(f"ngram-mod n_match={n}", "speculative", {"code-edit": f, "chat": 0.99, "prose": 0.87},
                         candidate=cand))
    rows.append(_row("135M", "speculative", {"code-edit": 1.1, "chat": 1.15, "prose": 1.12}, candidate=DRAFTED,
                     draft_max=4))
    rows = [dataclasses.replace(r, draft_path="/m/135m.gguf") if r.draft and "135M" in r.draft else r for r in rows]
    return _results(*rows)


def pages(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, results in (("fresh-sweep", fresh_sweep_results()), ("upstream-72b", reference("72b")),
                          ("upstream-7b", reference("7b")), ("methods", methods_results())):
        out[name] = write_report(results, tmp_path / f"{name}.html")
    folder = tmp_path / "ceiling"
    folder.mkdir()
    _code, path = run_sweep(folder, FakeBackend(inside_script()), inside_config(folder, ceiling=True,
                                                                                draft_max=[2, 4]))
    out["ceiling"] = write_report(load_results(path), tmp_path / "ceiling.html")
    folder = tmp_path / "streams"
    folder.mkdir()
    streams = sweep(folder, FakeBackend(crossover_script()), concurrency_config(folder, concurrency=[1, 2, 4]))
    out["concurrency"] = write_report(load_results(streams), tmp_path / "concurrency.html")
    folder = tmp_path / "race"
    folder.mkdir()
    _code, raced = race_sweep(folder, FakeBackend(race_script()), race_config(folder))
    out["race"] = write_report(raced, tmp_path / "race.html")
    # two files of one hardware name, the second slower: legends, the files table, inverted intervals
    slower = load_results(streams)
    slower = dataclasses.replace(slower, results=tuple(
        dataclasses.replace(r, requests=tuple(dataclasses.replace(q, decode_tps=q.decode_tps * (0.5 if r.draft else 1))
                                              for q in r.requests)) for r in slower.results))
    comparison = compare([ComparedFile("A", "box-monday.json", analyze(load_results(streams))),
                          ComparedFile("B", "box-tuesday.json", analyze(slower))])
    out["compare"] = write_comparison(comparison, tmp_path / "compare.html")
    return out


def screenshot(driver, section: list, path: Path) -> None:
    _id, x, y, width, height = section
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": x, "y": y, "width": width, "height": max(1, height), "scale": 1}})
    path.write_bytes(base64.b64decode(shot["data"]))


@pytest.mark.browser
def test_every_section_at_laptop_width(browser, tmp_path):  # noqa: F811 (the fixture imported above)
    from selenium.webdriver.support.ui import WebDriverWait

    SCREENS.mkdir(parents=True, exist_ok=True)
    browser.set_window_size(*LAPTOP)
    problems = []
    for name, path in pages(tmp_path).items():
        browser.get(path.resolve().as_uri())
        WebDriverWait(browser, 30).until(lambda d: d.execute_script(
            "return document.readyState === 'complete' && Array.from(document.querySelectorAll('.js-plotly-plot'))"
            ".every(g => g._fullLayout && g.querySelector('.main-svg'))"))
        browser.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
        found = browser.execute_script(CHECK)
        assert found["sections"], name
        for section in found["sections"]:
            screenshot(browser, section, SCREENS / f"{name}-{section[0]}.png")
        for kind in ("clipped", "cut", "empty", "wrapped"):
            problems += [f"{name}: {kind}: {what}" for what in found[kind]]
    assert not problems, json.dumps(problems, indent=1, ensure_ascii=False)
