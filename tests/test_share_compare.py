"""Comparing results files (sweep.py --compare): matching, pairing, significance, differences, the
table and the comparison report. No server: the files are built in share_data.py or are the
upstream reference files; the real-sweep comparison is in test_share_llama.py."""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest
from draftbench.report.compare_page import render_comparison
from draftbench.results.file import Row, save_results
from draftbench.share.compare import DiffKind, compare, load_compared, match_key, render
from draftbench.share.compare.text import describe_change

from helpers import REFERENCE, run_cli
from share_data import GOOD, SETTINGS, TARGET, box_a, box_b, machine, without_requests
from test_report import browser  # noqa: F401  (the headless Chromium fixture)

REF_72B = REFERENCE / "m4max-128gb_llamacpp_qwen25-72b.json"
REF_7B = REFERENCE / "m4max-128gb_llamacpp_qwen25-7b.json"


def files(tmp_path: Path, *results) -> list[str]:
    paths = []
    for i, r in enumerate(results):
        path = tmp_path / f"{'abcdefg'[i]}.json"
        save_results(r, path)
        paths.append(str(path))
    return paths


def comparison(tmp_path, *results):
    return compare(load_compared(files(tmp_path, *results)))


def row_titled(comp, title):
    return next(r for r in comp.rows if r.title == title)


# --------------------------------------------------------------------------- matching

def test_rows_match_on_target_candidate_and_settings():
    plain = Row(target="7B", draft="0.5B", role="speculative", draft_max=8)
    upstream = Row.from_dict({"target": "7B", "draft": "0.5B", "mean_tps": 10.0})
    tuned = replace(plain, candidate={"label": "0.5B", "method": [], "draft": "0.5B", "params": {"draft_max": 8}})
    assert match_key(plain) == match_key(tuned)               # draft_max has its own field
    assert match_key(upstream) != match_key(plain)            # another draft length is another combination
    assert match_key(upstream) == match_key(replace(plain, draft_max=None))
    other_params = replace(plain, candidate={"label": "0.5B", "method": ["draft-simple", "ngram-mod"],
                                             "draft": "0.5B", "params": {"ngram_mod_n_match": 24}})
    assert match_key(other_params) != match_key(plain)        # same label, other settings: never paired


def test_same_label_with_other_settings_is_listed_apart(tmp_path):
    a = box_a()
    hybrid = replace(a.results[1], candidate={"label": GOOD, "method": ["draft-simple", "ngram-mod"], "draft": GOOD,
                                              "params": {"ngram_mod_n_match": 24}})
    comp = comparison(tmp_path, a, replace(box_b(), results=(box_b().results[0], hybrid)))
    assert [m.title for m in comp.only_in[0]] == [f"{TARGET} + {GOOD} [draft]", f"{TARGET} + 57M trunc8"]
    assert [m.title for m in comp.only_in[1]] == [f"{TARGET} + {GOOD} [draft-simple+ngram-mod "
                                                  '{"ngram_mod_n_match": 24}]']


# --------------------------------------------------------------------------- pairing and significance

def test_same_requests_are_paired_and_a_real_difference_is_significant(tmp_path):
    comp = comparison(tmp_path, box_a(), box_b())
    base = row_titled(comp, f"{TARGET} (baseline)")
    change = base.changes[0]
    assert (change.index, change.reference, change.paired) == (1, 0, True)
    assert change.ratio.method == "paired-log-by-prompt" and change.ratio.n_pairs == 9
    assert change.significant is True and change.ratio.ratio == pytest.approx(1.5, rel=0.01)
    assert re.match(r"1\.5\dx faster \[1\.\d\dx, 1\.\d\dx\]$", describe_change(change))


def test_the_same_machine_twice_is_not_significant(tmp_path):
    again = machine("qwen", "box-a", base=40.0, good=1.5, bad=0.7, wobble=3)
    comp = comparison(tmp_path, box_a(), again)
    texts = [describe_change(c) for r in comp.rows for c in r.changes]
    assert texts and all(t.startswith("not significant (") for t in texts), texts
    out = render(comp)
    assert "not significant: the 95% interval does not lie wholly beyond the noise floor" in out


def test_a_resumed_copy_is_never_compared_with_its_own_measurements(tmp_path):
    """Issue 37: "1.00x [1.00x, 1.00x]" for 0.40 → 0.64 tok/s. B is A resumed on a quiet machine: its rows hold
    A's requests plus new ones; pairing them with themselves said nothing changed while the cells differed."""
    from share_data import records

    a = box_a()
    rows = list(a.results)
    good = rows[1]
    newer = tuple(replace(r, run=r.run + 3, decode_tps=r.decode_tps * 1.6) for r in records(60.0, accept=0.75))
    rows[1] = replace(good, requests=good.requests + newer,
                      mean_tps=round(sum(r.decode_tps for r in good.requests + newer) / 18, 2))
    comp = comparison(tmp_path, a, replace(a, results=tuple(rows)))
    baseline = row_titled(comp, f"{TARGET} (baseline)")
    assert baseline.changes == () and baseline.copies == ((1, 0),)     # the very same requests: no change
    change = row_titled(comp, f"{TARGET} + {GOOD}").changes[0]
    assert change.repeated == 9 and change.paired is False
    assert change.ratio.ratio > 1.5 and change.significant is True      # B's own requests against A's
    out = render(comp)
    assert "1.00x [1.00x, 1.00x]" not in out
    assert f"| {TARGET} (baseline)" in out and "| same measurements " in out      # said in the B vs A column
    assert "B repeats 9 of A's own requests of this combination" in out


def test_a_baseline_measured_beside_every_candidate_is_averaged_not_picked(tmp_path):
    """The interleaved design measures each (prompt, repetition) of the baseline once per candidate."""
    from draftbench.share.compare.view import tps_by_request

    a = box_a()
    base = a.results[0]
    twice = replace(base, requests=tuple(replace(r, session="s1") for r in base.requests)
                    + tuple(replace(r, session="s2", decode_tps=r.decode_tps * 4) for r in base.requests))
    by_request = tps_by_request(twice)
    first = base.requests[0]
    assert len(by_request) == 9 and by_request[(first.prompt_id, first.run)] == pytest.approx(first.decode_tps * 2)


def loaded(results, share: float):
    """A file as if measured while other programs used ``share`` of the CPU."""
    rows = tuple(replace(r, machine_load={"other_cpu_share": share, "other_cpu_share_max": share, "cpu_count": 2,
                                          "seconds": 60.0, "windows": 1}) for r in results.results)
    return replace(results, results=rows, load_before=[{"at": "2026-03-01T12:00:00+00:00", "other_cpu_share": share,
                                                        "load_avg_1m": 8.0 * share, "cpu_count": 2, "seconds": 0.5}])


def test_files_measured_under_different_load_never_agree_in_every_detail(tmp_path):
    """Issue 37: `--compare loaded quiet` said the files "agree in every recorded hardware detail" before a 20.8x
    baseline difference."""
    same = machine("qwen", "box-a", base=40.0, good=1.5, bad=0.7, wobble=3)
    out = render(comparison(tmp_path, loaded(box_a(), 0.9), loaded(same, 0.03)))
    assert "agree in every" not in out
    assert ("machine load: A busy (before it: other programs used 90% of the CPU (load average 7.2 on 2 cores); while "
            "measuring: other programs used 90% of the CPU on average); B quiet (") in out
    assert out.index("machine load") > out.index("Warning: the files differ in what was measured")
    quiet = render(comparison(tmp_path, loaded(box_a(), 0.03), loaded(same, 0.05)))
    assert "in the machine's load." in quiet and "machine load:" not in quiet
    older = render(comparison(tmp_path, box_a(), same))           # files from before the load was recorded
    assert "the machine's load was not recorded in A, B" in older


def test_other_requests_are_compared_unpaired_and_say_why(tmp_path):
    longer = machine("qwen", "box-b", base=60.0, good=1.3, bad=0.7, settings={**SETTINGS, "max_tokens": 256})
    comp = comparison(tmp_path, box_a(), longer)
    change = row_titled(comp, f"{TARGET} (baseline)").changes[0]
    assert change.paired is False and change.ratio.method == "welch-t-log"
    assert change.why_unpaired == "settings.max_tokens differs"
    out = render(comp)
    assert "Warning: the files differ in what was measured" in out
    assert "settings.max_tokens: A 128; B 256" in out
    assert "Requests compared unpaired (Welch) because settings.max_tokens differs." in out


def test_another_prompt_text_is_never_paired(tmp_path):
    b = box_b()
    other_text = replace(b, results=tuple(replace(r, requests=tuple(
        replace(q, prompt_tokens=q.prompt_tokens + 3) if q.prompt_id == "json-users" else q for q in r.requests))
        for r in b.results))
    change = row_titled(comparison(tmp_path, box_a(), other_text), f"{TARGET} (baseline)").changes[0]
    assert not change.paired and "json-users has 52 vs 55 prompt tokens" in change.why_unpaired


def test_files_without_per_request_data_give_ratios_without_an_interval(tmp_path):
    comp = comparison(tmp_path, box_a(), without_requests(box_b()))
    change = row_titled(comp, f"{TARGET} (baseline)").changes[0]
    assert change.ratio.method == "ratio-of-means" and change.significant is None
    assert describe_change(change) == "1.51x faster (no CI)"
    assert "no CI: significance unknown because B has no per-request data (a ratio of means)." in render(comp)


# --------------------------------------------------------------------------- what differs, what is missing

def test_every_difference_between_the_files_is_listed(tmp_path):
    comp = comparison(tmp_path, box_a(), box_b())
    found = {d.what: (d.kind, d.values) for d in comp.differences}
    assert found["server version"] == (DiffKind.BUILD, ("b6543", "b7000"))
    assert found["hardware"] == (DiffKind.HARDWARE, ("box-a", "box-b"))
    assert found["CPU"] == (DiffKind.HARDWARE, ("Test CPU", "Other CPU"))
    assert not [d for d in comp.differences if d.kind is DiffKind.MEASUREMENT]   # same settings, same prompts
    out = render(comp)
    assert "server version: A b6543; B b7000 — acceptance can change between server builds" in out


def test_reference_files_share_no_row_and_every_row_is_listed(tmp_path):
    comp = compare(load_compared([str(REF_72B), str(REF_7B)]))
    assert comp.rows == () and [len(o) for o in comp.only_in] == [64, 207]
    out = render(comp)
    assert "No combination is in more than one file" in out
    assert "Only in A (64 combinations):" in out and "Only in B (207 combinations):" in out
    assert "  72B Q4_K_M: baseline, 0.5B FP16," in out and "  7B Q2_K: baseline," in out
    # no row in common, yet each file's own verdict per target is a table side by side
    assert "Each file's own verdict, per target (speed-up over that file's own baseline):" in out
    assert "| A    | 72B Q8_0   | 6.45           | 1.5B Q6_K      | +199.7% (significance unknown) | 83.9%      |" in out
    assert "| B    | 7B FP16    | 33.63          | 0.5B Q4_0      | +192.9% (significance unknown) | 71.2%      |" in out
    page = render_comparison(comp, cdn=True)
    assert 'id="best-table"' in page and "<td>72B Q4_K_M</td>" in page


def test_a_target_where_no_candidate_pays_says_so(tmp_path):
    slow = replace(box_a(), results=tuple(r for r in box_a().results if GOOD not in (r.draft or "")))
    out = render(comparison(tmp_path, slow, box_b()))
    best_rows = [line for line in out.splitlines() if line.startswith("| A    |")]
    assert len(best_rows) == 1 and "| none pays " in best_rows[0], best_rows


def test_an_upstream_file_matches_a_new_one_by_labels(tmp_path):
    comp = compare(load_compared(files(tmp_path, box_a()) + [str(REF_7B)]))
    base = row_titled(comp, f"{TARGET} (baseline)")        # the 7B file has a "7B Q4_K_M" target too
    assert base.changes[0].ratio.method == "ratio-of-means"
    assert "per-request data: A yes; B no" in render(comp)


# --------------------------------------------------------------------------- the command

def test_compare_command_prints_the_table_and_writes_the_report(tmp_path):
    a, b = files(tmp_path, box_a(), box_b())
    chart = tmp_path / "cmp.html"
    proc = run_cli("sweep.py", "--compare", a, b, str(REF_7B), "--chart", str(chart))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "| Combination" in out and "| B vs A" in out and "| C vs A" in out
    assert f"| {TARGET} + {GOOD}" in out and "1.30x faster [" in out
    assert "Only in C (" in out and f"Comparison report saved to {chart}" in out
    page = chart.read_text()
    for section in ('id="files-table"', 'id="measurement-differences"', 'id="compare-table"',
                    'id="chart-compare-speedup"', 'id="chart-difference-B"', 'id="chart-difference-C"',
                    'id="chart-file-A"', 'id="only-in"'):
        assert section in page, section


def test_compare_never_overwrites_an_input(tmp_path):
    a, b = files(tmp_path, box_a(), box_b())
    before = Path(a).read_bytes()
    (tmp_path / "link.html").symlink_to(a)            # another name for an input is still the input
    os.link(b, tmp_path / "hard.md")
    cases = [(["--chart", a], "ends in .json: the report is an HTML page"),
             (["--chart", str(tmp_path / "link.html")], "writing it would destroy the input"),
             (["--export", "md", "--output", b], "writing it would destroy the input"),
             (["--export", "md", "--output", str(tmp_path / "hard.md"), "--no-chart"], "writing it would destroy"),
             (["--export", "csv", "--output", a, "--no-chart"], "writing it would destroy the input"),
             (["--export", "md", "--output", str(tmp_path)], "is a folder, not a file")]
    for flags, message in cases:
        proc = run_cli("sweep.py", "--compare", a, b, *flags)
        assert proc.returncode == 2 and message in proc.stderr, (flags, proc.stderr)
        assert proc.stdout == ""             # checked before anything is printed or written
    assert Path(a).read_bytes() == before


@pytest.mark.parametrize("args, message", [
    (["--compare", "x.json"], "--compare needs at least two results files"),
    (["--compare", "a.json", "b.json", "--results", "c.json"], "--compare takes the results files itself"),
    (["--compare", "a.json", "b.json", "--config", "c.json"], "they do not run a sweep"),
    (["--compare", "nope.json", "b.json"], "results file nope.json does not exist"),
    (["--chart-only", "--results", "a.json", "--export", "md"], "--chart-only and --export are separate commands"),
])
def test_compare_usage_errors_are_one_line(tmp_path, args, message):
    proc = run_cli("sweep.py", *args, cwd=tmp_path)
    assert proc.returncode in (1, 2) and proc.stderr.startswith("Error: ") and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- the report

def test_report_escapes_labels_from_the_files(tmp_path):
    hostile = "<img src=x onerror=alert(1)>"
    a, b = box_a(), box_b()
    a = replace(a, hardware=hostile, results=tuple(replace(r, target=hostile) for r in a.results))
    b = replace(b, results=tuple(replace(r, target=hostile) for r in b.results))
    page = render_comparison(comparison(tmp_path, a, b), cdn=True)
    assert hostile not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_console_shows_control_characters_from_the_files_as_escapes(tmp_path):
    hostile = "7B\x1b]0;owned\x07"
    a = box_a()
    a = replace(a, results=tuple(replace(r, target=hostile) for r in a.results))
    paths = files(tmp_path, a, box_b())
    for extra in ([], ["--export", "md"]):
        proc = run_cli("sweep.py", "--compare", *paths, "--no-chart", *extra)
        assert proc.returncode == 0, proc.stderr
        assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout and "7B\\x1b]0;owned\\x07" in proc.stdout


@pytest.mark.browser
def test_comparison_report_renders_offline_in_chromium(browser, tmp_path):  # noqa: F811
    from draftbench.report.compare_page import write_comparison
    from selenium.webdriver.support.ui import WebDriverWait
    comp = compare(load_compared(files(tmp_path, box_a(), box_b()) + [str(REF_7B)]))
    path = write_comparison(comp, tmp_path / "cmp.html")
    browser.get(path.resolve().as_uri())
    ids = ["chart-compare-speedup", "chart-difference-B", "chart-difference-C"]
    WebDriverWait(browser, 30).until(lambda d: d.execute_script(
        f"return {json.dumps(ids)}.every(id => {{ const g = document.getElementById(id); "
        "return g && g._fullLayout && g.querySelector('.main-svg'); })"))
    assert browser.execute_script("return window.__errors") == []
    traces = browser.execute_script("return document.getElementById('chart-compare-speedup')._fullData.length")
    assert traces == 3     # one series per file; C (upstream, same labels) holds the good draft only
    bar_texts = browser.execute_script("return Array.from(document.querySelectorAll('#chart-compare-speedup "
                                       ".bars text')).map(t => t.textContent)")
    assert len(bar_texts) == 5 and "+51%" in bar_texts
    texts = browser.execute_script("return Array.from(document.querySelectorAll('#chart-difference-C text'))"
                                   ".map(t => t.textContent).join('|')")
    assert "not in C" in texts        # a grey cell says why it has no difference


def test_a_failed_row_is_shown_as_such_never_as_a_change(tmp_path):
    from draftbench.report.compare_figures import difference_cell
    b = box_b()
    failed = replace(b.results[1], status="error", reason="llama-server crashed (signal 9)")
    comp = comparison(tmp_path, box_a(), replace(b, results=(b.results[0], failed, b.results[2])))
    good = row_titled(comp, f"{TARGET} + {GOOD}")
    assert good.changes == () and describe_change(None) == "—"
    assert "| 69.10   | error   |" in render(comp)
    assert difference_cell(good, 1, 0, comp.letters) == (None, "error in B", ["error in B"])
