"""Comparing speculative methods without a server: per-method statistics from llama-server's log lines,
trace verbosity in the command, the workloads, loop detection, per-category verdicts and the report's
model-free classes and method charts. The real llama-server runs in test_backends_llamacpp_methods_llama.py."""

from __future__ import annotations

import io

from draftbench.analysis.degenerate import LOOP_SHARE_LIMIT, loop_share
from draftbench.analysis.summary import verdicts_of
from draftbench.analysis.verdict import analyze
from draftbench.backends.base import LaunchSpec
from draftbench.backends.llamacpp.command import build_command, stats_lines_expected
from draftbench.backends.llamacpp.stats import StatsLog, parse_line, parse_lines, per_request
from draftbench.config.prompts import BUILTIN_PROMPTS, CATEGORIES, METHOD_PROMPTS, resolve_prompts
from draftbench.report import build_figures, render_report
from draftbench.report.view import NO_DRAFT_MODEL, build_data
from draftbench.results.file import RequestRecord, ResultsFile, Row
from draftbench.results.findings import Code
from draftbench.results.method_stats import aggregate
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.console import Console

from helpers import default_settings

# As common_speculative_print_stats (common/speculative.cpp, build 11434) prints them, with the log prefix.
FIRST = ("3.45.554.735 I spec common_specu: statistics     ngram-simple: #calls(b,g,a) =    1     39      0, "
         "#gen drafts =      0, #acc drafts =     0, #gen tokens =      0, #acc tokens =     0, "
         "dur(b,g,a) = 0.000, 0.059, 0.000 ms")
SECOND = ("3.50.000.001 I spec common_specu: statistics     ngram-simple: #calls(b,g,a) =    2     60     10, "
          "#gen drafts =     10, #acc drafts =     8, #gen tokens =     50, #acc tokens =    30, #mean acc len = 4.00, "
          "#acc rate/pos = (0.800, 0.700, 0.500), dur(b,g,a) = 0.010, 0.159, 0.020 ms")
DRAFT = ("3.50.000.002 I spec common_specu: statistics     draft-simple: #calls(b,g,a) =    2     60     40, "
         "#gen drafts =     40, #acc drafts =    20, #gen tokens =    160, #acc tokens =    50, #mean acc len = 2.25, "
         "#acc rate/pos = (0.500, 0.400, 0.300, 0.050), dur(b,g,a) = 0.100, 90.000, 1.000 ms")


# --------------------------------------------------------------------------- log lines

def test_statistics_lines_are_parsed_with_and_without_acceptance_figures():
    first, second = parse_line(FIRST), parse_line(SECOND)
    assert first.impl == "ngram-simple" and (first.calls_begin, first.calls_draft, first.calls_accept) == (1, 39, 0)
    assert first.acc_rate_per_pos == () and first.draft_ms == 0.059
    assert second.acc_tokens == 30 and second.acc_rate_per_pos == (0.8, 0.7, 0.5) and second.accept_ms == 0.02
    assert parse_line("slot print_timing: id  0 | task 2 | draft acceptance = 0.6") is None
    old = parse_line("statistics ngram_mod: #calls = 12, #gen drafts = 3, #acc drafts = 2, #gen tokens = 9, "
                     "#acc tokens = 5")
    assert old.impl == "ngram_mod" and old.calls_draft == 12 and old.calls_accept is None and old.begin_ms is None


def test_cumulative_lines_become_per_request_figures():
    totals: dict = {}
    assert per_request(parse_lines(FIRST), totals)["ngram-simple"]["gen_tokens"] == 0
    fig = per_request(parse_lines(SECOND), totals)["ngram-simple"]
    assert (fig["calls_draft"], fig["calls_accept"], fig["gen_tokens"], fig["acc_tokens"]) == (21, 10, 50, 30)
    assert fig["acceptance_rate"] == 0.6 and fig["mean_accepted_len"] == 4.0
    assert fig["accepted_per_pos"] == [8.0, 7.0, 5.0] and fig["acc_rate_per_pos"] == [0.8, 0.7, 0.5]
    assert fig["draft_ms"] == 0.1


def test_a_late_line_is_counted_once_with_the_next_request():
    totals: dict = {}
    late = per_request(parse_lines(FIRST + "\n" + SECOND), totals)       # both arrived after one request
    assert late["ngram-simple"]["calls_draft"] == 60 and late["ngram-simple"]["acc_tokens"] == 30


def test_the_log_is_followed_from_the_servers_start(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(SECOND + "\n")                      # an earlier server's lines in the same (appended) file
    stats = StatsLog(str(log), log.stat().st_size, expected=2)
    with log.open("a") as fh:
        fh.write("noise\n" + FIRST + "\n" + DRAFT.replace("60     40", "30     20").replace("#gen tokens =    160",
                                                                                               "#gen tokens =     80"))
    first = stats.after_request()                      # DRAFT has no newline yet: not read
    assert set(first) == {"ngram-simple"}
    with log.open("a") as fh:
        fh.write("\n" + SECOND + "\n" + DRAFT + "\n")
    second = stats.after_request()
    assert second["ngram-simple"]["acc_tokens"] == 30 and second["draft-simple"]["gen_tokens"] == 160
    assert StatsLog(str(log), 0, expected=0).after_request() is None


def test_row_totals_sum_the_requests_per_method():
    totals: dict = {}
    requests = [{"methods": per_request(parse_lines(FIRST), totals)},
                {"methods": per_request(parse_lines(SECOND + "\n" + DRAFT), totals)}, None, {}]
    rows = aggregate(requests)
    assert rows["ngram-simple"]["requests"] == 2 and rows["ngram-simple"]["acc_tokens"] == 30
    assert rows["draft-simple"]["acceptance_rate"] == round(50 / 160, 4)
    assert rows["draft-simple"]["mean_accepted_len"] == 2.25
    assert aggregate([None, {}]) is None


# --------------------------------------------------------------------------- the command

CAPS = {"flags": ["-m", "-np", "--metrics", "--spec-type", "-lv", "--log-verbosity", "-md", "--spec-draft-n-max"],
        "version": "x"}


def test_trace_verbosity_is_added_to_every_server_when_method_stats_is_on():
    def cmd(**kw):
        base = dict(target="/m/t.gguf", port=8080, settings=default_settings(method_stats=True))
        return build_command("/bin/llama-server", CAPS, LaunchSpec(**{**base, **kw}))

    model_free = cmd(method=("ngram-mod",))
    assert model_free[-2:] == ["-lv", "4"] and stats_lines_expected(model_free) == 1
    hybrid = cmd(draft="/m/d.gguf", method=("draft-simple", "ngram-mod"))
    assert stats_lines_expected(hybrid) == 2
    baseline = cmd()
    assert baseline[-2:] == ["-lv", "4"] and stats_lines_expected(baseline) == 0     # same level, nothing to read
    off = cmd(method=("ngram-mod",), settings=default_settings(method_stats=False))
    assert "-lv" not in off and stats_lines_expected(off) == 0
    overridden = cmd(method=("ngram-mod",), extra_args=("-lv", "3"))                  # the user's flag wins
    assert stats_lines_expected(overridden) == 0


# --------------------------------------------------------------------------- workloads

def test_method_workloads_run_only_when_named():
    assert resolve_prompts("builtin") == list(BUILTIN_PROMPTS) and "code-edit" not in CATEGORIES
    chosen = resolve_prompts(["code-edit", "session", "code"])
    assert [p.id for p in chosen] == ["code-bst", "code-edit-rename", "session-1", "session-2", "session-3"]
    config = validate_config({"name": "w", "targets": [{"label": "t", "path": "/m/t.gguf"}],
                              "settings": {"prompts": ["rewrite", "summarise-long", "reasoning"]}})
    assert config.settings.prompts == ["rewrite", "summarise-long", "reasoning"]


def test_the_code_edit_prompt_holds_the_file_and_later_turns_repeat_earlier_ones():
    edit = next(p for p in METHOD_PROMPTS if p.category == "code-edit")
    assert "def parse_rows(lines):" in edit.text and "Return the complete modified module" in edit.text
    turns = [p for p in METHOD_PROMPTS if p.category == "session"]
    assert [len(t.messages) for t in turns] == [1, 3, 5]
    assert turns[2].messages[:3] == turns[1].messages and turns[1].messages[:1] == turns[0].messages


# --------------------------------------------------------------------------- loops

LOOP = "Sure! " + "<|im_start|>user\n" * 40


def test_loop_share_finds_back_to_back_repetition_only():
    assert loop_share(LOOP) > 0.9
    assert loop_share("Hello.\n" + "\n" * 60) > 0.9
    assert loop_share("too short to judge") is None
    for p in BUILTIN_PROMPTS + METHOD_PROMPTS:
        assert (loop_share(p.text) or 0) < LOOP_SHARE_LIMIT, p.id
    listing = " ".join(f"{i}. Country{i}: capital City{i}, population {i * 7} million." for i in range(30))
    assert loop_share(listing) < LOOP_SHARE_LIMIT


def _req(pid, category, run, tps, text="a normal answer", methods=None):
    return RequestRecord(prompt_id=pid, category=category, run=run, decode_tps=tps, completion_tokens=64,
                         text=text, draft_details={"methods": methods} if methods else None)


def _row(draft, role, factors, *, text_for=None, candidate=None, draft_max=None):
    prompts = (("edit", "code-edit"), ("chat", "chat"), ("story", "prose"))
    reqs = tuple(_req(pid, cat, run, 50 * factors[cat] * (1 + 0.003 * run + 0.001 * i),
                      text=(text_for or {}).get(pid, f"answer {pid} {run}: " + " ".join(f"w{j}" for j in range(30))))
                 for run in range(3) for i, (pid, cat) in enumerate(prompts))
    mean = sum(r.decode_tps for r in reqs) / len(reqs)
    return Row(target="T 7B", draft=draft, role=role, mean_tps=mean, speculation_active=True if draft else None,
               acceptance_rate=0.6 if draft else None, requests=reqs, candidate=candidate, draft_max=draft_max)


def _results(*rows):
    return analyze(ResultsFile(name="m", hardware="h", backend="llamacpp", model_family="f",
                               settings={"noise_floor": 0.02, "temperature": 0.0}, results=rows))


NGRAM = {"label": "ngram-mod", "method": ["ngram-mod"], "draft": None, "params": {}}
DRAFTED = {"label": "135M", "method": [], "draft": "135M", "params": {"draft_max": 4}}


def test_the_verdict_names_the_best_configuration_per_category_when_they_differ():
    res = _results(_row(None, "baseline", {"code-edit": 1, "chat": 1, "prose": 1}),
                   _row("ngram-mod", "speculative", {"code-edit": 2.0, "chat": 0.97, "prose": 0.95}, candidate=NGRAM),
                   _row("135M", "speculative", {"code-edit": 1.2, "chat": 1.3, "prose": 1.25}, candidate=DRAFTED,
                        draft_max=4))
    entry = verdicts_of(res)[0]
    assert entry.by_category["code-edit"].candidate == "ngram-mod"
    assert entry.by_category["chat"].candidate == "135M (k=4)"
    assert "Best per prompt type (a gain is named only where it holds at 95% over the categories × candidates" \
        in entry.verdict and "for code-edit: ngram-mod (+" in entry.verdict
    assert "for chat: 135M (k=4)" in entry.verdict
    ngram = next(r for r in res.results if r.draft == "ngram-mod")
    assert ngram.speedup_by_category["code-edit"].ratio > 1.9 and ngram.speedup_by_category["prose"].ratio < 1


def test_one_best_configuration_everywhere_needs_no_per_category_sentence():
    res = _results(_row(None, "baseline", {"code-edit": 1, "chat": 1, "prose": 1}),
                   _row("135M", "speculative", {"code-edit": 1.2, "chat": 1.3, "prose": 1.25}, candidate=DRAFTED))
    assert "Best per prompt type" not in verdicts_of(res)[0].verdict


def test_speedups_resting_on_a_looping_baseline_are_flagged_once_everywhere():
    looping = {"edit": LOOP}
    base = _row(None, "baseline", {"code-edit": 1, "chat": 1, "prose": 1}, text_for=looping)
    fast = _row("ngram-mod", "speculative", {"code-edit": 2.0, "chat": 1.5, "prose": 1.5}, text_for=looping,
                candidate=NGRAM)
    res = analyze(_results(base, fast))                                   # analysed twice: one finding, not two
    baseline, row = res.results
    assert [w.code for w in baseline.warnings if w.code is Code.DEGENERATE_OUTPUT] == [Code.DEGENERATE_OUTPUT]
    flagged = [w for w in row.warnings if w.code is Code.DEGENERATE_OUTPUT]
    assert len(flagged) == 1 and "rests on looping output" in flagged[0].message and "edit" in flagged[0].message
    assert flagged[0].setting == "settings.prompts"
    info = row.degenerate_output
    assert info["looping_requests"] == 3 and info["prompts"] == ["edit"]
    assert abs(info["speedup_without_loops"]["ratio"] - 1.5) < 0.02        # without the loops: +50%, not +59%
    assert "Caution: the target's own output loops on 3 of 9 requests" in verdicts_of(res)[0].verdict
    out = io.StringIO()
    Console(out).row_recorded(row)
    assert "rests on looping output" in out.getvalue()
    figs = build_figures(res)
    assert any("loops" in t for line in figs["chart-heatmap"]["data"][0]["text"] for t in line)
    cats = figs["chart-categories"]["data"][0]
    assert "loops" in cats["text"][0][cats["x"].index("code-edit")]


# --------------------------------------------------------------------------- the report

def test_model_free_and_hybrid_candidates_are_charted_in_their_own_classes():
    hybrid = {"label": "135M + ngram-mod", "method": ["draft-simple", "ngram-mod"], "draft": "135M", "params": {}}
    rows = [_row(None, "baseline", {"code-edit": 1, "chat": 1, "prose": 1}),
            _row("ngram-mod", "speculative", {"code-edit": 2.0, "chat": 1.1, "prose": 1.05}, candidate=NGRAM),
            _row("135M + ngram-mod", "speculative", {"code-edit": 1.8, "chat": 1.3, "prose": 1.2}, candidate=hybrid)]
    for i, n_match in enumerate((8, 16, 24)):
        params = {"ngram_mod_n_match": n_match}
        rows.append(_row(f"mod n_match={n_match}", "speculative", {"code-edit": 1.2 + 0.2 * i, "chat": 1, "prose": 1},
                         candidate={"label": "mod", "method": ["ngram-mod"], "draft": None, "params": params}))
    res = _results(*rows)
    data = build_data(res)
    sizes = {c.label: c.size for c in data.columns}
    assert sizes["ngram-mod"] == NO_DRAFT_MODEL and sizes["135M + ngram-mod"] == "135M"
    assert data.classes[0] == NO_DRAFT_MODEL
    figs = build_figures(res)
    assert "best model-free method" in [t["name"] for t in figs["chart-throughput"]["data"]]
    assert figs["chart-categories"]["data"][0]["x"] == ["code-edit", "chat", "prose"]
    lines = figs["chart-params"]["data"]
    assert lines[0]["name"] == "mod (by n_match)" and lines[0]["x"] == [8, 16, 24]
    assert lines[0]["y"] == sorted(lines[0]["y"]) and lines[-1]["name"] == "T 7B alone"


def test_method_charts_say_why_they_are_empty():
    res = _results(Row(target="T", mean_tps=10.0), Row(target="T", draft="d 1B", role="speculative", mean_tps=12.0))
    figs = build_figures(res)
    assert "chart-categories" not in figs and "chart-params" not in figs       # no empty axes drawn
    page = render_report(res, cdn=True)
    assert '<section class="chart-empty" id="chart-params-section">' in page
    assert "Not drawn: No parameter was swept" in page


def test_the_console_shows_each_component_of_a_row():
    totals: dict = {}
    details = {"methods": per_request(parse_lines(SECOND + "\n" + DRAFT), totals)}
    row = Row(target="T", draft="135M + ngram-simple", role="speculative", speculation_active=True,
              method_stats=aggregate([details]))
    out = io.StringIO()
    Console(out).row_recorded(row)
    assert ("Per method: ngram-simple: 50 drafted, 30 accepted (60%), 4.00 tokens per step; "
            "draft-simple: 160 drafted, 50 accepted (31%), 2.25 tokens per step") in out.getvalue()


def test_a_model_free_method_that_never_drafts_is_not_a_speedup_and_says_why():
    from draftbench.backends.base import SpeculationStatus
    from draftbench.sweep.runner import speculation_outcome

    active, findings = speculation_outcome(True, SpeculationStatus(True), 0, model_free=True)
    assert active is False and findings[0].code is Code.NEVER_DRAFTED
    assert "only draft where the answer repeats" in findings[0].message


def test_a_baseline_that_speculates_is_an_error_row_and_its_candidates_are_not_compared(tmp_path):
    """A build that turns a method on by default (upstream proposes ngram-mod) would flatter every
    baseline: /slots speculative.types must list nothing for the target alone."""
    import json

    from draftbench.sweep import EXIT_INCOMPLETE, Sweep
    from draftbench.sweep.console import Reporter

    from fakes.inprocess import FakeBackend, FakeServer, Script

    class SpeculatingServer(FakeServer):
        def active_methods(self):
            return ("ngram-mod",)          # what /slots says, whatever the command asked for

    class SpeculatingBackend(FakeBackend):
        def launch(self, spec):
            server = SpeculatingServer(spec, self.script, self.log)
            self.servers.append(server)
            return server

    cfg = validate_config({"name": "u", "hardware": "box", "backend": "llamacpp",
                           "targets": [{"label": "7B", "path": "/m/t.gguf"}],
                           "candidates": [{"label": "ngram-mod", "method": "ngram-mod"}],
                           "settings": {"runs": 1, "max_tokens": 16, "prompts": ["code"], "port": 0}},
                          source=str(tmp_path / "c.json"), base_dir=str(tmp_path))
    backend = SpeculatingBackend(Script(tps={"/m/t.gguf": 50.0}))
    code = Sweep(cfg, tmp_path / "r.json", None, reporter=Reporter(), backend=backend).run()
    rows = json.loads((tmp_path / "r.json").read_text())["results"]
    baseline, candidate = rows
    assert code == EXIT_INCOMPLETE
    assert baseline["status"] == "error" and baseline["active_methods"] == ["ngram-mod"]
    assert "the baseline is not plain decoding: the server ran ngram-mod" in baseline["reason"]
    assert baseline["requests"], "what was measured is kept"
    assert candidate["status"] == "skipped" and candidate["speedup"] is None
    assert all(server.stopped for server in backend.servers)


def test_the_report_lists_each_configurations_flags_active_methods_and_per_method_statistics():
    import dataclasses

    from draftbench.report import render_report
    from draftbench.report.methods_table import speculative_flags

    hybrid = {"label": "135M + ngram-mod", "method": ["draft-simple", "ngram-mod"], "draft": "135M",
              "params": {"draft_max": 4, "ngram_mod_n_match": 24}}
    command = ["llama-server", "-m", "/m/t.gguf", "--port", "8080", "--spec-type", "draft-simple,ngram-mod",
               "-md", "/models/d 135M.gguf", "-ngld", "0", "--spec-draft-n-max", "4", "--spec-draft-cpu-moe",
               "--spec-ngram-mod-n-match", "24", "-lv", "4"]
    assert speculative_flags(command) == ("--spec-type draft-simple,ngram-mod -md d 135M.gguf -ngld 0 "
                                          "--spec-draft-n-max 4 --spec-draft-cpu-moe --spec-ngram-mod-n-match 24")
    totals: dict = {}
    details = {"methods": per_request(parse_lines(SECOND + "\n" + DRAFT), totals)}
    base = dataclasses.replace(_row(None, "baseline", {"code-edit": 1, "chat": 1, "prose": 1}), active_methods=[],
                               server={"command": ["llama-server", "--spec-type", "none"]})
    row = dataclasses.replace(_row("135M + ngram-mod", "speculative", {"code-edit": 2, "chat": 1.2, "prose": 1.1},
                                   candidate=hybrid), active_methods=["draft-simple", "ngram-mod"],
                              method_stats=aggregate([details]), server={"command": command})
    page = render_report(_results(base, row))
    section = page[page.index('<section id="methods">'):]
    section = section[:section.index("</section>")]
    assert "--spec-type none" in section and "none (plain decoding)" in section
    assert "--spec-ngram-mod-n-match 24" in section and "draft-simple, ngram-mod" in section
    assert "ngram-simple<br>draft-simple" in section or "draft-simple<br>ngram-simple" in section
    assert "50<br>160" in section and "60%<br>31%" in section       # each component's drafted tokens and acceptance
    plain = render_report(_results(_row(None, "baseline", {"code-edit": 1, "chat": 1, "prose": 1}),
                                   _row("135M", "speculative", {"code-edit": 1.2, "chat": 1.3, "prose": 1.2})))
    assert '<section id="methods">' not in plain


def test_a_configuration_that_drafted_nothing_on_a_category_is_not_its_best():
    """On a busy machine an n-gram row that never drafted on chat can still measure 'faster' there:
    that is noise, so the per-category verdict does not name it."""
    import dataclasses

    ngram = _row("ngram-mod", "speculative", {"code-edit": 2.0, "chat": 1.5, "prose": 0.95}, candidate=NGRAM)
    ngram = dataclasses.replace(ngram, requests=tuple(dataclasses.replace(r, draft_n=0 if r.category == "chat" else 9)
                                                      for r in ngram.requests))
    res = _results(_row(None, "baseline", {"code-edit": 1, "chat": 1, "prose": 1}), ngram,
                   _row("135M", "speculative", {"code-edit": 1.2, "chat": 1.3, "prose": 1.25}, candidate=DRAFTED))
    best = verdicts_of(res)[0].by_category
    assert best["code-edit"].candidate == "ngram-mod" and best["chat"].candidate == "135M"
    assert res.results[1].speedup_by_category["chat"].ratio > 1.4          # still recorded as measured


def test_per_category_bests_without_a_significant_gain_say_so():
    from draftbench.analysis.categories import CategoryBest, category_sentence
    from draftbench.results.speedup import Speedup

    noisy = Speedup(ratio=5.4, percent=440.0, significant=None, method="single-sample", n_pairs=0)
    best = {"chat": CategoryBest("135M (k=4)", False, speedup=noisy),
            "code-edit": CategoryBest("ngram-simple", False, speedup=noisy)}
    assert category_sentence(best).startswith("Best measured per prompt type (exploratory: no gain shown once "
                                              "corrected for the categories × candidates compared): for chat: 135M")


def test_looping_output_is_blamed_only_where_it_raises_a_speed_up():
    """Issue 37: "this speed-up rests on looping output" was attached to slowdowns and inactive rows."""
    from dataclasses import replace

    looping = {"edit": LOOP}
    base = _row(None, "baseline", {"code-edit": 1, "chat": 1, "prose": 1}, text_for=looping)
    slower = _row("slow", "speculative", {"code-edit": 0.7, "chat": 0.7, "prose": 0.7}, text_for=looping,
                  candidate=NGRAM)
    flat = _row("flat", "speculative", {"code-edit": 1.2, "chat": 1.3, "prose": 1.3}, text_for=looping,
                candidate=NGRAM)        # faster, but no faster on the looping requests than on the others
    inactive = replace(_row("idle", "speculative", {"code-edit": 2.0, "chat": 1.0, "prose": 1.0}, text_for=looping,
                            candidate=NGRAM), speculation_active=False, draft_n=0)
    raised = _row("raised", "speculative", {"code-edit": 2.0, "chat": 1.1, "prose": 1.1}, text_for=looping,
                  candidate=NGRAM)
    res = _results(base, slower, flat, inactive, raised)
    rows = {r.draft: r for r in res.results}
    for name in ("slow", "flat", "idle"):
        assert rows[name].degenerate_output is None, name
        assert not [w for w in rows[name].warnings if w.code is Code.DEGENERATE_OUTPUT], name
    assert [w for w in rows["raised"].warnings if w.code is Code.DEGENERATE_OUTPUT]
    assert [w for w in rows[None].warnings if w.code is Code.DEGENERATE_OUTPUT]      # the target's own loops


def test_method_fields_are_declared_and_type_checked_on_load(tmp_path):
    import json

    from draftbench.common.errors import ResultsFileError
    from draftbench.results.file import load_results
    from draftbench.results.schema import first_problem

    totals: dict = {}
    details = {"methods": per_request(parse_lines(SECOND + "\n" + DRAFT), totals)}
    res = _results(_row(None, "baseline", {"code-edit": 1, "chat": 1, "prose": 1}, text_for={"edit": LOOP}),
                   _row("ngram-mod", "speculative", {"code-edit": 2.0, "chat": 1.1, "prose": 1.0}, candidate=NGRAM,
                        text_for={"edit": LOOP}))
    data = json.loads(json.dumps(res.to_dict()))
    row = data["results"][1]
    row["method_stats"] = aggregate([details])
    row["requests"][0]["draft_details"] = details
    assert row["speedup_by_category"] and row["degenerate_output"]["speedup_without_loops"]
    assert first_problem(data) is None
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    assert load_results(path).results[1].method_stats["draft-simple"]["gen_tokens"] == 160

    row["method_stats"]["ngram-simple"]["gen_tokens"] = "fifty"
    path.write_text(json.dumps(data))
    try:
        load_results(path)
    except ResultsFileError as exc:
        assert "$.results[1].method_stats.ngram-simple.gen_tokens" in str(exc)
    else:
        raise AssertionError("a string counter was accepted")


def test_per_method_statistics_are_followed_for_one_stream_only(monkeypatch, tmp_path):
    """At N concurrent streams the statistics lines of different requests interleave (and count per
    slot), so they cannot be attributed to a request: the log is then not followed."""
    from types import SimpleNamespace

    from draftbench.backends.llamacpp import backend as llamacpp

    caps = {"flags": ["-m", "-np", "--metrics", "--spec-type", "-lv", "--spec-ngram-mod-n-match"],
            "spec_types": ["ngram-mod"], "removed_flags": [], "version": "test"}
    monkeypatch.setattr(llamacpp, "find_llama_server", lambda explicit=None: "llama-server")
    monkeypatch.setattr(llamacpp, "capabilities", lambda binary: caps)
    monkeypatch.setattr(llamacpp, "ManagedProcess", lambda cmd, log_path, env=None, port=None: SimpleNamespace(log_path=log_path))
    monkeypatch.setattr(llamacpp, "launch_process", lambda server, spec, **kw: None)
    followed = {}
    for streams in (1, 2):
        spec = LaunchSpec(target="/m/t.gguf", method=("ngram-mod",), port=8080, settings=default_settings(method_stats=True),
                          log_path=str(tmp_path / f"s{streams}.log"), concurrency=streams)
        server = llamacpp.LlamaCppBackend().launch(spec)
        followed[streams] = server.stats_log is not None
        assert server.command[-2:] == ["-lv", "4"]
    assert followed == {1: True, 2: False}
