"""The HTML report: golden data, structure, escaping, and rendering in headless Chromium.

Golden files (tests/golden/report-*.json) hold what the page *shows* — the figures' data as
embedded in the HTML and the text of its tables — not the HTML itself (which embeds plotly.js).
Regenerate them after an intended change with ``DRAFTBENCH_UPDATE_GOLDEN=1 pytest tests/test_report.py``
and review the diff.

The browser tests need Debian's ``chromium`` and ``chromium-driver`` (``make browser``) and the
``selenium`` package; without them they are skipped, except under CI=true or
DRAFTBENCH_REQUIRE_BROWSER=1, where a missing browser is a failure.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import os
import re
import shutil
import stat
from html.parser import HTMLParser
from pathlib import Path

import pytest
from draftbench.analysis.summary import verdicts_of
from draftbench.analysis.verdict import analyze, summarize_records
from draftbench.report import (
    CHART_IDS,
    UNKNOWN_SIZE,
    build_data,
    build_figures,
    plotly_text,
    render_report,
    size_class,
    write_report,
)
from draftbench.report.figures import PAIRED_NAME
from draftbench.results.file import RequestRecord, ResultsFile, Row, load_results
from draftbench.results.findings import Code, Finding

from helpers import (
    REFERENCE,
    REPO,
)

REFERENCE_FILES = {"72b": REFERENCE / "m4max-128gb_llamacpp_qwen25-72b.json",
                   "7b": REFERENCE / "m4max-128gb_llamacpp_qwen25-7b.json"}
GOLDEN = Path(__file__).resolve().parent / "golden"
ARTIFACTS = REPO / "test-artifacts"
UPDATE_GOLDEN = os.environ.get("DRAFTBENCH_UPDATE_GOLDEN") == "1"

XSS_DRAFT = '<img src=x onerror="window.__xss=1">'
XSS_TARGET = "</script><script>window.__xss=2</script>"
XSS_NAME = "<svg onload=window.__xss=3>"
XSS_REASON = "<script>window.__xss=4</script> & friends"


# --------------------------------------------------------------------------- results to render

def reference(name: str) -> ResultsFile:
    path = REFERENCE_FILES[name]
    if not path.exists():
        pytest.skip(f"reference results {path} are not available")
    return load_results(path)


def _records(base_tps: float, factor: float, *, accept: float | None, drafted_per_req: int = 80,
             categories=("code", "prose", "json"), runs: int = 2, cat_factor=None, seed: int = 0) -> list[RequestRecord]:
    """Deterministic per-request records: prompt p{i} of a category, repeated ``runs`` times."""
    out = []
    for i, cat in enumerate(categories):
        for run in range(runs):
            jitter = 1 + 0.01 * ((i * 7 + run * 3 + seed) % 5 - 2)
            f = factor * (cat_factor or {}).get(cat, 1.0)
            tps = round(base_tps * f * jitter, 3)
            drafted = None if accept is None else drafted_per_req
            accepted = None if accept is None else round(drafted_per_req * accept)
            steps = None if accept is None else 20
            out.append(RequestRecord(prompt_id=f"p{i}", category=cat, run=run, ttft_s=0.05 + 0.001 * i,
                                     total_s=round(128 / tps, 3), decode_tps=tps, server_decode_tps=tps,
                                     prompt_tokens=40, completion_tokens=128, draft_n=drafted,
                                     draft_n_accepted=accepted, verify_steps=steps, finish_reason="length",
                                     text=f"output {i}"))
    return out


def _measured(target: str, draft: str | None, records, *, role: str, draft_max: int | None = None,
              speculation_active=None, version="b6543 (llama.cpp)") -> Row:
    fields = summarize_records(records, max_tokens=128, runs=2)
    warnings = list(fields.pop("warnings"))
    if speculation_active is False:
        warnings.append(Finding(Code.NEVER_DRAFTED, "the draft never drafted a token (draft_n = 0 on every request): "
                                "this row is not a speed-up"))
    return Row(target=target, draft=draft, role=role, draft_max=draft_max, status="ok",
               speculation_active=speculation_active, requests=tuple(records), warnings=tuple(warnings),
               server={"backend": "llamacpp", "version": version, "command": ["llama-server"], "port": 8080},
               wall_time=12.5, load_time_s=1.2, **fields)


def fresh_sweep_results() -> ResultsFile:
    """What a sweep writes: per-request data, CIs, k-variants, every kind of problem, theory inputs."""
    t1, t2 = "8B Q4_K_M", "3B Q8_0"
    good, slow, unknown, inactive, missing = "0.5B Q8_0", "1.5B Q4_K_M", "tiny-draft Q4", "SmolLM2-135M", "360M Q8_0"
    rows = [
        _measured(t1, None, _records(40, 1.0, accept=None, seed=1), role="baseline"),
        _measured(t1, good, _records(40, 1.6, accept=0.75, cat_factor={"prose": 0.7}, seed=2), role="speculative",
                  draft_max=4, speculation_active=True),
        _measured(t1, good, _records(40, 1.75, accept=0.7, seed=3), role="speculative", draft_max=8, speculation_active=True),
        _measured(t1, slow, _records(40, 0.8, accept=0.85, seed=4), role="speculative", draft_max=4, speculation_active=True),
        _measured(t1, unknown, _records(40, 1.005, accept=0.3, seed=5), role="speculative", draft_max=4,
                  speculation_active=True),
        dataclasses.replace(_measured(t1, inactive, _records(40, 0.97, accept=None, seed=6), role="speculative",
                                      draft_max=4, speculation_active=False),
                            draft_n=0, draft_n_accepted=0, acceptance_rate=None),
        Row(target=t1, draft=missing, role="speculative", draft_max=4, status="skipped",
            reason="model file /models/360m.gguf does not exist — fix: download it or fix the path"),
        _measured(t1, None, _records(40, 1.01, accept=None, seed=7), role="control"),
        _measured(t2, None, _records(90, 1.0, accept=None, seed=8), role="baseline"),
        _measured(t2, good, _records(90, 1.2, accept=0.68, seed=9), role="speculative", draft_max=4, speculation_active=True),
        # (t2, good, k=8) was never run: the sweep was interrupted
        _measured(t2, slow, _records(90, 0.7, accept=0.8, seed=10), role="speculative", draft_max=4, speculation_active=True),
        _measured(t2, unknown, _records(90, 0.9, accept=0.25, seed=11), role="speculative", draft_max=4,
                  speculation_active=True),
        Row(target=t2, draft=inactive, role="speculative", draft_max=4, status="error", speculation_active=False,
            reason="speculation not active: the server loaded no draft model (vocabulary mismatch)"),
        Row(target=t2, draft=missing, role="speculative", draft_max=4, status="error",
            reason="llama-server exited with code 1 while loading"),
        _measured(good, None, _records(600, 1.0, accept=None, seed=12), role="draft_alone"),
    ]
    return ResultsFile(name="fresh-sweep", hardware="test-rig", backend="llamacpp", model_family="Forged family",
                       settings={"runs": 2, "max_tokens": 128, "temperature": 0.0, "draft_max": [4, 8],
                                 "prompts": ["code", "prose", "json"]},
                       results=tuple(rows), timestamp="2026-03-01T12:00:00+00:00", schema_version=1,
                       tool_version="0.1.0", host={"cpu": "Test CPU", "memory_gb": 16, "os": "Linux"})


def xss_results() -> ResultsFile:
    """Hostile labels and texts everywhere a config or results file can put them."""
    rows = [
        Row(target=XSS_TARGET, draft=None, role="baseline", mean_tps=10.0, median_tps=10.0, mean_ttft=0.1),
        Row(target=XSS_TARGET, draft=XSS_DRAFT, role="speculative", mean_tps=15.0, median_tps=15.0, mean_ttft=0.1,
            acceptance_rate=0.6),
        Row(target=XSS_TARGET, draft="1B <b>bold</b> & co", role="speculative", status="error", reason=XSS_REASON),
    ]
    return ResultsFile(name=XSS_NAME, hardware=XSS_NAME, backend="llamacpp", model_family="<i>fam</i>",
                       settings={"runs": 1}, results=tuple(rows), timestamp="2026-01-01T00:00:00+00:00",
                       schema_version=None, tool=None)


CASES = {
    "72b": lambda: reference("72b"),
    "7b": lambda: reference("7b"),
    "fresh-sweep": fresh_sweep_results,
}


# --------------------------------------------------------------------------- reading a page back

def extract_figures(page: str) -> dict[str, dict]:
    """The figures exactly as the page hands them to Plotly.newPlot."""
    decoder = json.JSONDecoder()
    figures = {}
    for m in re.finditer(r'Plotly\.newPlot\(\s*"([^"]+)",\s*', page):
        data, end = decoder.raw_decode(page, m.end())
        end = re.compile(r"\s*,\s*").match(page, end).end()
        layout, _ = decoder.raw_decode(page, end)
        figures[m.group(1)] = {"data": data, "layout": layout}
    return figures


class _Tables(HTMLParser):
    """Text of every <table id=...>, as rows of cells."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[str]]] = {}
        self._table = None
        self._cell = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._table = dict(attrs).get("id") or f"table-{len(self.tables)}"
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[self._table][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def tables(page: str) -> dict[str, list[list[str]]]:
    parser = _Tables()
    parser.feed(page)
    return parser.tables


def _round(v):
    if isinstance(v, float):
        return round(v, 2)
    if isinstance(v, list):
        return [_round(x) for x in v]
    return v


def golden_summary(page: str) -> dict:
    figs = extract_figures(page)
    charts = {}
    for div_id in (i for i in CHART_IDS if i in figs):       # concurrency charts: only with several levels
        traces = []
        for t in figs[div_id]["data"]:
            entry = {"type": t["type"], "name": t.get("name")}
            for key in ("x", "y", "z", "text"):
                if key in t:
                    entry[key] = _round(t[key])
            traces.append(entry)
        charts[div_id] = traces
    tbl = tables(page)
    return {"charts": charts, "meta": [list(m) for m in re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", page)],
            "tables": {k: v for k, v in tbl.items() if k in ("summary-table", "problems-table", "theory-table")}}


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return {name: render_report(make()) for name, make in CASES.items()}


# --------------------------------------------------------------------------- golden files

@pytest.mark.parametrize("name", list(CASES))
def test_report_matches_golden(name, pages):
    summary = golden_summary(pages[name])
    path = GOLDEN / f"report-{name}.json"
    text = json.dumps(summary, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    if UPDATE_GOLDEN or not path.exists():
        if not UPDATE_GOLDEN and os.environ.get("CI") == "true":
            pytest.fail(f"{path} is missing; generate it with DRAFTBENCH_UPDATE_GOLDEN=1")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if not UPDATE_GOLDEN:
            pytest.skip(f"wrote the missing golden file {path}; review and commit it")
        return
    expected = json.loads(path.read_text(encoding="utf-8"))
    assert summary == expected, (f"the report for {name} changed; if intended, regenerate with "
                                 "DRAFTBENCH_UPDATE_GOLDEN=1 and review the diff of " + str(path))


# --------------------------------------------------------------------------- structure

def _labels(results: ResultsFile) -> tuple[list[str], list[str]]:
    targets = list(dict.fromkeys(r.target for r in results.results if r.role in ("baseline", "speculative")))
    drafts = list(dict.fromkeys(r.draft for r in results.results if r.role == "speculative" and r.draft))
    return targets, drafts


@pytest.mark.parametrize("name", list(CASES))
def test_every_target_and_draft_is_charted(name, pages):
    results = CASES[name]()
    targets, drafts = _labels(results)
    figs = extract_figures(pages[name])
    # every chart with something to draw is drawn; the others say why, and draw no empty axes
    drawn = set(build_figures(results))
    shown_when_several = {i for i in CHART_IDS if i.startswith(("chart-concurrency-", "chart-context-",
                                                                "chart-temperature"))}
    assert set(figs) == drawn and drawn <= set(CHART_IDS) - shown_when_several
    for chart_id in set(CHART_IDS) - drawn - shown_when_several:
        assert f'<section class="chart-empty" id="{chart_id}-section">' in pages[name], chart_id
    heat = figs["chart-heatmap"]["data"]
    assert [t["type"] for t in heat] == ["heatmap", "heatmap", "heatmap"]
    assert heat[0]["x"] == [plotly_text(t) for t in targets]
    # every draft has a row (k-variants get their own), and every cell is drawn by exactly one trace
    shown = heat[0]["y"]
    for d in drafts:
        assert any(y == plotly_text(d) or y.startswith(plotly_text(d) + " (k=") for y in shown), d
    n_cols = len(build_data(analyze(results)).columns)
    assert len(shown) == n_cols >= len(drafts)
    assert len(heat[0]["z"]) == len(heat[1]["z"]) == len(heat[2]["z"]) == n_cols
    for zr, pr, nr, tr, ptr, ntr in zip(heat[0]["z"], heat[1]["z"], heat[2]["z"], heat[0]["text"], heat[1]["text"],
                                        heat[2]["text"]):
        assert len(zr) == len(pr) == len(nr) == len(targets)
        for z, p, n, t, pt, nt in zip(zr, pr, nr, tr, ptr, ntr):
            assert [z, p, n].count(None) == 2          # significant, no speed-up, or not significant
            assert [t, pt, nt].count("") == 2          # its text in the trace that draws it
    # throughput: the baseline plus one trace per size class (and its paired baseline's outline, where that
    # differs from the pooled one); speed-up: one per size class
    # (classes whose every draft failed have no bar; their drafts are still on the heatmap)
    data = build_data(analyze(results))
    measured = {c.col.size for c in data.cells.values() if c.shows_speedup}
    bars = [t for t in figs["chart-throughput"]["data"] if t["name"] != PAIRED_NAME]
    assert len(bars) == 1 + len(measured)
    assert len(figs["chart-speedup"]["data"]) == len(measured)
    if name != "fresh-sweep":
        assert measured == {size_class(d) for d in drafts}
    assert sum(len(t["x"]) for t in figs["chart-scatter"]["data"]) == sum(
        1 for trace in (heat[0], heat[2]) for zr in trace["z"] for z in zr if z is not None)


def test_upstream_numbers_reach_the_heatmap_unchanged(pages):
    results = reference("7b")
    heat = extract_figures(pages["7b"])["chart-heatmap"]["data"][0]
    base = {r.target: r.mean_tps for r in results.results if r.draft is None}
    row = next(r for r in results.results if r.target == "7B Q2_K" and r.draft == "3B FP16")
    i, j = heat["y"].index("3B FP16"), heat["x"].index("7B Q2_K")
    ratio = row.mean_tps / base["7B Q2_K"]
    assert ratio < 0.6
    assert heat["text"][i][j].startswith(f"\u2212{round((1 - ratio) * 100):.0f}%")   # shown as the slowdown it is
    # one fixed scale, centred on 1.0×: log2 of the ratio, full red at half the speed
    assert heat["zmid"] == 0 and heat["zmin"] == -1 and heat["zmax"] == 1
    assert heat["z"][i][j] == pytest.approx(max(-1.0, math.log2(ratio)), abs=1e-3)
    assert heat["colorbar"]["ticktext"] == ["0.5×", "0.71×", "1×", "1.41×", "2×"]


def test_negative_speedups_stay_negative_everywhere(pages):
    figs = extract_figures(pages["fresh-sweep"])
    heat = figs["chart-heatmap"]["data"][0]
    i = heat["y"].index("1.5B Q4_K_M (k=4)")
    assert all(z < 0 for z in [heat["z"][i][0], heat["z"][i][1]])
    assert all(t.startswith("\u2212") for t in [heat["text"][i][0], heat["text"][i][1]])
    # 1.5B is the only draft of its class: its bars are negative too
    speed = next(t for t in figs["chart-speedup"]["data"] if t["name"] == "best 1.5B draft")
    assert all(v < 0 for v in speed["y"])
    points = [y for t in figs["chart-scatter"]["data"] for y in t["y"]]
    assert sum(1 for y in points if y < 0) >= 3


def test_problem_rows_are_never_speedups(pages):
    page = pages["fresh-sweep"]
    figs = extract_figures(page)
    heat, problems, _not_significant = figs["chart-heatmap"]["data"]
    cell = {(y, x): (heat["z"][i][j], problems["text"][i][j])
            for i, y in enumerate(heat["y"]) for j, x in enumerate(heat["x"])}
    assert cell[("SmolLM2-135M (k=4)", "8B Q4_K_M")] == (None, "inactive")   # ran, drafted nothing
    assert cell[("SmolLM2-135M (k=4)", "3B Q8_0")] == (None, "inactive")     # error: speculation not active
    assert cell[("360M Q8_0 (k=4)", "8B Q4_K_M")] == (None, "skipped")
    assert cell[("360M Q8_0 (k=4)", "3B Q8_0")] == (None, "error")
    assert cell[("0.5B Q8_0 (k=8)", "3B Q8_0")] == (None, "not run")
    # no bar and no scatter point comes from them
    for t in figs["chart-throughput"]["data"][1:] + figs["chart-speedup"]["data"]:
        for custom in t["customdata"]:
            assert not custom[0].startswith(("SmolLM2", "360M"))
    for t in figs["chart-scatter"]["data"]:
        assert not any(c[0].startswith(("SmolLM2", "360M")) for c in t["customdata"])
    # the problems table names each with its reason
    rows = tables(page)["problems-table"]
    text = "\n".join(" | ".join(r) for r in rows)
    assert "8B Q4_K_M + SmolLM2-135M (k=4) | speculation inactive" in text
    assert "vocabulary mismatch" in text and "does not exist" in text and "exited with code 1" in text
    # the verdict never recommends them, and agrees with the CLI's sentence
    results = analyze(fresh_sweep_results())
    summary = tables(page)["summary-table"]
    for entry in verdicts_of(results):
        row = next(r for r in summary if r[0] == entry.target)
        assert entry.verdict in row[-1]
        assert "SmolLM2" not in row[2] and "360M" not in row[2]


def test_fresh_sweep_report_shows_statistics_and_theory(pages):
    page = pages["fresh-sweep"]
    tbl = tables(page)
    summary = {r[0]: r for r in tbl["summary-table"][1:]}
    assert summary["8B Q4_K_M"][2] == "0.5B Q8_0 (k=8)"
    assert re.match(r"\+\d+\.\d% \[\+\d+\.\d%, \+\d+\.\d%\]$", summary["8B Q4_K_M"][3])
    assert "baseline re-measured at the end" in summary["8B Q4_K_M"][-1]
    assert "by prompt type: code" in summary["8B Q4_K_M"][-1]
    # the unknown-size draft is +0.5%: within the noise, said so and drawn neutral (no colour of its own)
    heat, _problems, neutral = extract_figures(page)["chart-heatmap"]["data"]
    i = heat["y"].index("tiny-draft Q4 (k=4)")
    assert "(n.s.)" in neutral["text"][i][0] and neutral["z"][i][0] is not None and heat["z"][i][0] is None
    assert "theory-table" in tbl and any("8B Q4_K_M + 0.5B Q8_0 (k=4)" in r[0] for r in tbl["theory-table"])
    assert "b6543 (llama.cpp)" in page and "Test CPU" in page
    speed = next(t for t in extract_figures(page)["chart-speedup"]["data"] if t["name"] == "best 0.5B draft")
    assert speed["error_y"]["array"][0] > 0  # a confidence interval is drawn


def test_unknown_size_draft_gets_its_own_class(pages):
    figs = extract_figures(pages["fresh-sweep"])
    names = [t["name"] for t in figs["chart-throughput"]["data"]]
    # 135M (inactive everywhere) and 360M (failed everywhere) have no bar, only grey heatmap cells
    assert names == ["Target alone (mean over all its sessions)", "best 0.5B draft", "best 1.5B draft", f"best {UNKNOWN_SIZE} draft"]
    assert {"135M", "360M"} <= {c.size for c in build_data(analyze(fresh_sweep_results())).columns}
    unknown = figs["chart-throughput"]["data"][-1]
    assert unknown["y"][0] is not None and unknown["customdata"][0][0] == "tiny-draft Q4 (k=4)"


@pytest.mark.parametrize("label, expected", [
    ("0.5B Q8_0", "0.5B"), ("1.5B FP16", "1.5B"), ("135M Q4_1", "135M"), ("SmolLM2-135M-Instruct", "135M"),
    ("Qwen2.5-0.5B-Instruct Q4_K_M", "0.5B"), ("qwen2.5-coder-1.5b-q8", "1.5B"), ("Llama-3.2-1B", "1B"),
    ("llama3-8b-instruct", "8B"), ("qwen2_5_7B", "7B"), ("57M Q4_1 (8 blocks)", "57M"), ("7 B model", "7B"),
    ("0.50B", "0.5B"), ("tiny-draft Q4", UNKNOWN_SIZE), ("Q4_K_M", UNKNOWN_SIZE), ("8bit draft", UNKNOWN_SIZE),
    ("FP16", UNKNOWN_SIZE), ("Qwen2.5 draft", UNKNOWN_SIZE), ("", UNKNOWN_SIZE),
])
def test_size_class_from_label(label, expected):
    assert size_class(label) == expected


def test_size_class_falls_back_to_gguf_size_label():
    assert size_class("my-draft", "135M") == "135M"
    assert size_class("my-draft", "8x7B") == "8x7B"
    assert size_class("my-draft", None) == UNKNOWN_SIZE
    # a size_label carried by the row (or the config snapshot) is used by the report
    row = Row(target="T 7B", draft="my-draft", role="speculative", mean_tps=12.0, acceptance_rate=0.5,
              extra={"draft_size_label": "360M"})
    results = ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="f", settings={},
                          results=(Row(target="T 7B", mean_tps=10.0), row), schema_version=None)
    assert [c.size for c in build_data(analyze(results)).columns] == ["360M"]


def test_labels_are_escaped_in_the_page():
    page = render_report(xss_results())
    for hostile in (XSS_DRAFT, XSS_TARGET, XSS_NAME, "<script>window.__xss=4", "<b>bold</b>", "<i>fam</i>"):
        assert hostile not in page
    assert "<svg onload" not in page and "<img src=x" not in page
    assert html_escaped(XSS_DRAFT) in page and html_escaped(XSS_REASON) in page
    # inside the figures' JSON: no raw '<' or '/' that could end the <script>, and entity-escaped for Plotly
    for fig in extract_figures(page).values():
        blob = json.dumps(fig)
        assert "<img" not in blob and "<script" not in blob
    heat = extract_figures(page)["chart-heatmap"]["data"][0]
    assert "&lt;img src=x onerror=\"window.__xss=1\"&gt;" in heat["y"]
    assert "1B &lt;b&gt;bold&lt;/b&gt; &amp; co" in heat["y"]
    assert heat["x"] == ["&lt;/script&gt;&lt;script&gt;window.__xss=2&lt;/script&gt;"]
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", page, flags=re.S)
    assert "window.__xss" not in "".join(s for s in scripts if "Plotly.newPlot" not in s)


def html_escaped(text: str) -> str:
    import html
    return html.escape(text, quote=True)


def test_build_figures_matches_the_page(pages):
    figs = extract_figures(pages["fresh-sweep"])
    built = build_figures(fresh_sweep_results())
    assert set(figs) == set(built)
    for div_id in built:
        assert [t.get("name") for t in figs[div_id]["data"]] == [t.get("name") for t in built[div_id]["data"]]


def test_cdn_mode_links_plotly_instead_of_embedding(tmp_path):
    results = fresh_sweep_results()
    small = render_report(results, cdn=True)
    assert re.search(r'<script src="https://cdn\.plot\.ly/plotly-[\d.]+\.min\.js"', small)
    assert len(small) < 300_000
    full = render_report(results)
    assert '<script src="https://cdn.plot.ly' not in full and len(full) > 3_000_000
    assert full.count("plotly.js v") <= 2 and full.count("Plotly.newPlot(") == len(build_figures(results))


def test_write_report_is_atomic_and_readable(tmp_path):
    out = tmp_path / "sub" / "report.html"
    out.parent.mkdir()
    out.write_text("old report")
    path = write_report(fresh_sweep_results(), out, cdn=True)
    assert path == out and "Plotly.newPlot" in out.read_text()
    assert [p.name for p in out.parent.iterdir()] == ["report.html"]  # no temp file left behind
    assert out.stat().st_mode & stat.S_IRGRP  # shareable, unlike mkstemp's default 0600


def test_render_is_a_pure_function_of_the_results():
    results = fresh_sweep_results()
    assert render_report(results, cdn=True) == render_report(analyze(results), cdn=True)


def test_empty_and_baseline_only_results_render():
    empty = ResultsFile(name="e", hardware="h", backend="vllm", model_family="", settings={}, results=())
    page = render_report(empty, cdn=True)
    assert "No targets in this results file." in page
    only = ResultsFile(name="b", hardware="h", backend="llamacpp", model_family="", settings={},
                       results=(Row(target="7B", mean_tps=20.0),))
    page = render_report(only, cdn=True)
    assert "chart-heatmap" not in extract_figures(page)            # nothing to draw: no empty axes
    assert '<section class="chart-empty" id="chart-heatmap-section">' in page


# --------------------------------------------------------------------------- headless Chromium

REQUIRE_BROWSER = os.environ.get("CI") == "true" or os.environ.get("DRAFTBENCH_REQUIRE_BROWSER") == "1"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

ERROR_HOOK = """
window.__errors = [];
window.addEventListener('error', function (e) {
  window.__errors.push(String(e.message || (e.target && (e.target.src || e.target.href)) || e));
}, true);
window.addEventListener('unhandledrejection', function (e) { window.__errors.push('unhandled: ' + String(e.reason)); });
(function () { var orig = console.error; console.error = function () {
  window.__errors.push('console.error: ' + Array.prototype.join.call(arguments, ' ')); return orig.apply(console, arguments); }; })();
"""

PROBE = """
const ids = %s;
const out = {errors: window.__errors || [], xss: typeof window.__xss, charts: {}, text: document.body.innerText,
             resources: performance.getEntriesByType('resource').map(e => e.name),
             plotly: typeof window.Plotly, svgText: ''};
for (const id of ids) {
  const gd = document.getElementById(id);
  if (!gd) { out.charts[id] = null; continue; }
  const svg = gd.querySelector('.main-svg');
  out.charts[id] = {
    traces: gd.data ? gd.data.length : null,
    full: gd._fullData ? gd._fullData.length : null,
    drawn: !!(svg && svg.getBoundingClientRect().height > 100),
    heatmapTexts: Array.from(gd.querySelectorAll('.hm text')).filter(t => t.textContent.trim() !== '').length,
    bars: gd.querySelectorAll('.bars .point').length,
    points: gd.querySelectorAll('.scatterlayer .points .point').length,
  };
  out.svgText += Array.from(gd.querySelectorAll('text')).map(t => t.textContent).join('\\n') + '\\n';
}
return out;
"""


@pytest.fixture(scope="module")
def browser():
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("the selenium package (pip install -e '.[test]')")
    if missing:
        message = f"headless Chromium is not available: missing {', '.join(missing)} (run `make browser`)"
        if REQUIRE_BROWSER:
            pytest.fail(message + "; CI requires the browser tests", pytrace=False)
        pytest.skip(message)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000",
                "--no-first-run", "--disable-extensions", "--disable-background-networking", "--disable-sync",
                "--disable-component-update", "--disable-default-apps", "--hide-scrollbars"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        # No network: the report must render from the file alone.
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["http://*", "https://*", "ws://*", "wss://*"]})
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": True, "latency": 0,
                                                                    "downloadThroughput": -1, "uploadThroughput": -1})
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": ERROR_HOOK})
        yield driver
    finally:
        driver.quit()


def open_in_browser(driver, path: Path, *, screenshot: str | None = None) -> dict:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get_log("performance")  # drop what earlier pages logged
    chart_ids = re.findall(r'<section class="chart-section" id="([^"]+)-section">', path.read_text(encoding="utf-8"))
    driver.get(path.resolve().as_uri())
    try:
        WebDriverWait(driver, 20).until(lambda d: d.execute_script(
            "return document.readyState === 'complete' && (typeof Plotly === 'undefined' || "
            f"{json.dumps(chart_ids)}.every(id => {{ const g = document.getElementById(id); "
            "return g && g._fullLayout && g.querySelector('.main-svg'); }))"))
    except Exception:
        pass  # the probe below reports what is missing
    info = driver.execute_script(PROBE % json.dumps(chart_ids))
    info["log"] = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    # every request the page attempted (blocked ones included), from the DevTools network events
    info["requests"] = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            info["requests"].append(message["params"]["request"]["url"])
    if screenshot:
        ARTIFACTS.mkdir(exist_ok=True)
        metrics = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
        size = metrics["cssContentSize"]
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}})
        (ARTIFACTS / f"report-{screenshot}.png").write_bytes(base64.b64decode(shot["data"]))
    return info


@pytest.mark.browser
@pytest.mark.parametrize("name", list(CASES))
def test_report_renders_offline_in_chromium(name, browser, tmp_path):
    results = CASES[name]()
    path = write_report(results, tmp_path / f"{name}.html")
    info = open_in_browser(browser, path, screenshot=name)
    assert info["errors"] == [] and info["log"] == [], (info["errors"], info["log"])
    assert info["plotly"] == "object"
    assert info["requests"], "the DevTools network log is empty: the no-network check would prove nothing"
    for url in info["requests"] + info["resources"]:
        assert url.startswith(("file:", "data:", "blob:")), f"the report tried to load {url}"
    built = build_figures(results)
    data = build_data(analyze(results))
    for div_id in built:
        chart = info["charts"][div_id]
        assert chart is not None and chart["drawn"], (div_id, chart)
        assert chart["traces"] == chart["full"] == len(built[div_id]["data"]), (div_id, chart)
    # every heatmap cell is drawn with its text, in one of the two traces
    assert info["charts"]["chart-heatmap"]["heatmapTexts"] == len(data.targets) * len(data.columns)
    n_points = sum(len(t["x"]) for t in built["chart-scatter"]["data"])
    assert info["charts"]["chart-scatter"]["points"] == n_points
    assert info["charts"]["chart-throughput"]["bars"] > 0
    targets, drafts = _labels(results)
    for label in targets + drafts:
        assert label in info["text"] or label in info["svgText"], label
    for label in drafts:
        assert label in info["svgText"]  # on the heatmap itself, not only in a table


@pytest.mark.browser
def test_injected_labels_stay_inert_in_chromium(browser, tmp_path):
    path = write_report(xss_results(), tmp_path / "xss.html")
    info = open_in_browser(browser, path, screenshot="xss")
    assert info["xss"] == "undefined"
    assert info["errors"] == [] and info["log"] == [], (info["errors"], info["log"])
    for hostile in (XSS_DRAFT, XSS_TARGET, XSS_NAME, XSS_REASON, "1B <b>bold</b> & co"):
        assert hostile in info["text"], hostile         # shown as text in the page
    for hostile in (XSS_DRAFT, XSS_TARGET, "1B <b>bold</b> & co"):
        assert hostile in info["svgText"], hostile      # and as text in the charts
    assert info["charts"]["chart-heatmap"]["heatmapTexts"] == 2
    # hovers show the numbers, and the labels as text (cell rows: "1B <b>…" first, then the <img> draft)
    hover = browser.execute_script("""
        const gd = document.getElementById('chart-heatmap'), out = [];
        for (const y of [1, 0]) { Plotly.Fx.hover(gd, {xval: 0, yval: y}, 'xy');
                                  out.push(gd.querySelector('.hoverlayer').textContent); Plotly.Fx.unhover(gd); }
        return out;""")
    assert XSS_DRAFT in hover[0] and XSS_TARGET in hover[0]
    assert "15.0 tok/s" in hover[0] and "acceptance 60.0%" in hover[0] and "TTFT 100 ms" in hover[0]
    assert "error: " + XSS_REASON in hover[1]
    assert browser.execute_script("return typeof window.__xss") == "undefined"
    assert browser.execute_script("return document.querySelectorAll('img, svg[onload], b script').length") == 0


@pytest.mark.browser
def test_offline_check_catches_a_cdn_report(browser, tmp_path):
    """The harness itself: a --cdn report opened offline must fail to draw (so the checks above mean something)."""
    path = write_report(fresh_sweep_results(), tmp_path / "cdn.html", cdn=True)
    info = open_in_browser(browser, path)
    assert info["plotly"] == "undefined"
    assert info["errors"] or info["log"]
    assert any(url.startswith("https://cdn.plot.ly/") for url in info["requests"])
    assert not any(c and c["drawn"] for c in info["charts"].values())
