"""The stages' mechanics with the in-process backend: every stage on fresh servers with fresh prompts, no
method ever sent a prompt twice on one server, a resumed sweep that measures nothing again, the budget as
the seconds given (on a fake clock), --more, and issue 32's clear case recommended with its command."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from draftbench.analysis.summary import verdicts_of
from draftbench.analysis.verdict import analyze
from draftbench.results.file import load_results
from draftbench.results.kinds import Role, Status
from draftbench.sweep import EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_OK, Sweep
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.console import Reporter
from draftbench.sweep.session import RunOptions

from fakes.inprocess import FakeBackend, Script
from helpers import run_cli

TARGET, FAST, NEAR, SLOW = "/m/target.gguf", "/m/fast.gguf", "/m/near.gguf", "/m/slow.gguf"


def config(tmp_path: Path, prompts="mt-bench-free", drafts=(("fast", FAST), ("near", NEAR), ("slow", SLOW)),
           candidates=(), **settings):
    if prompts == "mt-bench-free":       # 24 prompts of their own: enough for four stages of six fresh ones
        path = tmp_path / "prompts.txt"
        path.write_text("\n".join(f"Question number {i} about {('code', 'prose', 'lists')[i % 3]}." for i in range(24)))
        prompts = str(path)
    data = {"name": "stages", "hardware": "box", "backend": "llamacpp", "targets": [{"label": "7B", "path": TARGET}],
            "drafts": [{"label": label, "path": path} for label, path in drafts],
            "candidates": list(candidates),
            "settings": {"max_tokens": 64, "prompts": prompts, "port": 0, "stages": 4, "prompts_per_stage": 6,
                         **settings}}
    return validate_config(data, source=str(tmp_path / "c.json"), base_dir=str(tmp_path))


def script(**kw) -> Script:
    base = dict(tps={TARGET: 50.0}, speedup={FAST: 1.3, NEAR: 1.28, SLOW: 0.8},
                acceptance={FAST: 0.8, NEAR: 0.8, SLOW: 0.3}, noise={FAST: 0.08, NEAR: 0.08, SLOW: 0.05})
    base.update(kw)
    return Script(**base)


def run(tmp_path, backend, cfg, reporter=None, options=None, name="r.json"):
    path = tmp_path / name
    code = Sweep(cfg, path, None, reporter=reporter or Reporter(), backend=backend,
                 options=options or RunOptions()).run()
    return code, analyze(load_results(path))    # the verdict as every view shows it: the file analysed again


def test_each_stage_measures_fresh_prompts_on_fresh_servers_and_no_server_sees_a_prompt_twice(tmp_path):
    cfg = config(tmp_path, candidates=[{"label": "ngram-mod", "method": "ngram-mod"}], search="exhaustive")
    code, results = run(tmp_path, FakeBackend(script()), cfg)
    assert code in (EXIT_OK, EXIT_INCOMPLETE)
    by_session: dict[str, list[str]] = {}
    for row in results.results:
        for r in row.requests:
            by_session.setdefault(r.session, []).append(r.prompt_id)
            assert r.seen_before is False if row.role is Role.SPECULATIVE else True
    candidates = [r for r in results.results if r.role is Role.SPECULATIVE]
    for row in candidates:
        stages = {r.block for r in row.requests}
        for stage in stages:
            sessions = {r.session for r in row.requests if r.block == stage}
            assert len(sessions) == 1                                # one fresh server per candidate and stage
        prompts = [r.prompt_id for r in row.requests]
        assert len(prompts) == len(set(prompts))                      # fresh prompts: never one twice
    for session, prompts in by_session.items():
        row = next(r for r in results.results if any(q.session == session for q in r.requests))
        if row.role is Role.SPECULATIVE:
            assert max(Counter(prompts).values()) == 1               # a candidate's server: each prompt once
    baseline = results.baseline_for("7B")
    assert all(r.beside for r in baseline.requests)                  # paired with the candidate beside it


def test_a_resumed_sweep_continues_at_the_first_missing_stage_and_measures_nothing_again(tmp_path):
    class StopAtStage2(Reporter):
        def combination_started(self, index, total, title, at_most=False):
            if "[stage 2/" in title:
                raise KeyboardInterrupt

    cfg = config(tmp_path, search="exhaustive")
    apart = dict(speedup={FAST: 1.4, NEAR: 1.2, SLOW: 0.8})      # separable, but not after one stage
    code, first = run(tmp_path, FakeBackend(script(**apart)), cfg, reporter=StopAtStage2())
    assert code == EXIT_INTERRUPTED
    before = {r.draft: r.requests for r in first.results}
    assert all({q.block for q in rows} == {0} for rows in before.values() if rows)
    numbers: list[tuple[int, int]] = []

    class Numbers(Reporter):
        def combination_started(self, index, total, title, at_most=False):
            numbers.append((index, total))

    code, resumed = run(tmp_path, FakeBackend(script(**apart)), cfg, reporter=Numbers())
    assert code == EXIT_OK
    assert numbers[0] == (4, 12)       # stage 1's three steps were measured: the resumed run numbers on (issue 37)
    for row in resumed.results:
        assert row.requests[: len(before[row.draft])] == before[row.draft]   # kept, then continued
        assert [q.block for q in row.requests] == sorted(q.block for q in row.requests)


class Clocked(FakeBackend):
    """Every request takes 5 s on a fake clock (and nothing else takes any time)."""

    def __init__(self, script: Script, clock: list[float]):
        super().__init__(script)
        self.clock = clock

    def launch(self, spec):
        server = super().launch(spec)
        clock, send = self.clock, server.send

        def timed(body, **kw):
            clock[0] += 5.0
            return send(body, **kw)
        server.send = timed
        return server


def test_the_budget_is_the_seconds_given_counted_once_on_the_clock(tmp_path):
    now = [0.0]
    said: list[str] = []

    class Said(Reporter):
        def race(self, text):
            said.append(text)

    cfg = config(tmp_path, search="exhaustive", budget_s=100)
    code, first = run(tmp_path, Clocked(script(), now), cfg, reporter=Said(), options=RunOptions(clock=lambda: now[0]))
    spent = sum(r.wall_time or 0 for r in first.results)
    # one candidate's step is 12 requests (with the baseline's beside it) = 60 s: the budget stops after the
    # step that crossed 100 s, never at half of it (rows' time counted twice, issue 37)
    assert code == EXIT_INCOMPLETE and 100 <= now[0] <= 100 + 60 and spent == now[0]
    not_probed = [r for r in first.results if r.status is Status.NOT_PROBED]
    assert not_probed and all(r.requests == () and "budget" in (r.reason or "") for r in not_probed)
    verdict = verdicts_of(first)[0].verdict
    assert all(r.draft in verdict for r in not_probed) and "larger budget_s, or with --more" in verdict
    assert any("budget" in line and "continue" in line for line in said)
    # the report's Problems and the export name every candidate not probed, with what continues it
    from draftbench.report.page import render_report
    problems = render_report(first).split('id="problems"')[1].split("</section>")[0]
    export = run_cli("sweep.py", "--results", str(tmp_path / "r.json"), "--export", "md").stdout
    for row in not_probed:
        assert row.draft in problems and row.draft in export
        line = next(x for x in export.splitlines() if x.startswith("|") and row.draft in x)
        assert "not probed" in line and "larger budget_s" in line
    assert problems.count("larger budget_s") == len(not_probed)
    assert "not probed: not probed" not in export
    # the same command with a larger budget continues: nothing measured is discarded
    bigger = config(tmp_path, search="exhaustive", budget_s=100000)
    code, again = run(tmp_path, Clocked(script(), now), bigger, options=RunOptions(clock=lambda: now[0]))
    before = {r.draft: r.requests for r in first.results}
    for row in again.results:
        assert row.requests[: len(before.get(row.draft, ()))] == before.get(row.draft, ())
    assert not any(r.status is Status.NOT_PROBED for r in again.results)


def test_more_continues_an_unresolved_target_beyond_the_planned_stages(tmp_path):
    cfg = config(tmp_path, drafts=(("fast", FAST), ("near", NEAR)), stages=2, search="exhaustive")
    backend = script(speedup={FAST: 1.3, NEAR: 1.3}, noise={FAST: 0.1, NEAR: 0.1})
    _code, first = run(tmp_path, FakeBackend(backend), cfg)
    assert verdicts_of(first)[0].stages.verdict.value in ("shortlist", "unresolved")
    assert "more server pair" in verdicts_of(first)[0].verdict
    shown: list[tuple[int, int, str]] = []

    class Titles(Reporter):
        def combination_started(self, index, total, title, at_most=False):
            shown.append((index, total, title))

    _code, more = run(tmp_path, FakeBackend(backend), cfg, reporter=Titles(), options=RunOptions(more=2))
    fast = next(r for r in more.results if r.draft == "fast")
    assert {q.block for q in fast.requests} == {0, 1, 2, 3}
    # numbered out of the stages --more reaches (it said "[5/≤4] … [stage 3/2]")
    assert shown and {t.split("[stage ")[1].split("/")[1][0] for _i, _n, t in shown} == {"4"}
    assert all(index <= total for index, total, _t in shown)
    earlier = next(r for r in first.results if r.draft == "fast").requests
    assert fast.requests[: len(earlier)] == earlier


def test_a_candidate_faster_on_every_request_by_half_is_recommended_with_its_command(tmp_path):
    """Issue 32's case: two prompts (code, prose), one candidate ~+55% on every request, 83% accepted."""
    cfg = config(tmp_path, prompts=["code", "prose"], drafts=(("fast", FAST),),
                 candidates=[], search="exhaustive", stages=6)
    code, results = run(tmp_path, FakeBackend(script(speedup={FAST: 1.55}, acceptance={FAST: 0.83},
                                                       noise={FAST: 0.06})), cfg)
    entry = verdicts_of(results)[0]
    assert code == EXIT_OK and entry.recommended_draft == "fast", entry.verdict
    assert entry.verdict.startswith("7B: use fast — expect +")
    assert "for the average on these prompts" in entry.verdict
    assert entry.run.what == "recommended" and "--draft /m/fast.gguf" in entry.run.advice.text


def test_progress_notes_say_when_there_are_too_few_requests_for_an_interval(tmp_path):
    notes: list[str] = []

    class Notes(Reporter):
        def note(self, text):
            notes.append(text)

    cfg = config(tmp_path, prompts=["code", "prose"], drafts=(("fast", FAST),), stages=2)
    run(tmp_path, FakeBackend(script()), cfg, reporter=Notes())
    so_far = [n for n in notes if "so far" in n]
    assert so_far and "too few requests to tell" in so_far[0]
    assert not any("[-9" in n or ("%, +" in n and "6911" in n) for n in so_far)
