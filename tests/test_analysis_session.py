"""The session workload: its gain is "within a session", kept apart from the fresh-prompt figure in
the row, the verdict, the console and the report."""

from __future__ import annotations

import io

from draftbench.analysis.summary import verdicts_of
from draftbench.analysis.verdict import analyze
from draftbench.report import write_report
from draftbench.results.file import RequestRecord, ResultsFile, Row
from draftbench.sweep.console import Console

NGRAM = {"label": "ngram-mod", "method": ["ngram-mod"], "draft": None, "params": {}}
PROMPTS = (("chat-advice", "chat"), ("prose-story", "prose"), ("session-1", "session"), ("session-2", "session"),
           ("session-3", "session"))


def row(draft, factors: dict[str, float]) -> Row:
    reqs = tuple(RequestRecord(prompt_id=pid, category=cat, run=run, completion_tokens=64,
                               decode_tps=50 * factors[cat] * (1 + 0.004 * run + 0.002 * i),
                               text=f"answer {pid} {run}: " + " ".join(f"w{j}" for j in range(30)))
                 for run in range(3) for i, (pid, cat) in enumerate(PROMPTS) if cat in factors)
    mean = sum(r.decode_tps for r in reqs) / len(reqs)
    return Row(target="T", draft=draft, role="speculative" if draft else "baseline", mean_tps=mean,
               speculation_active=True if draft else None, acceptance_rate=0.9 if draft else None, requests=reqs,
               candidate=NGRAM if draft else None)


def results(*rows) -> ResultsFile:
    return analyze(ResultsFile(name="s", hardware="h", backend="llamacpp", model_family="f",
                               settings={"noise_floor": 0.02, "temperature": 0.0}, results=rows))


def test_a_session_gain_is_kept_out_of_the_fresh_prompt_figure():
    res = results(row(None, {"chat": 1, "prose": 1, "session": 1}),
                  row("ngram-mod", {"chat": 1.0, "prose": 1.0, "session": 2.5}))
    ngram = res.results[1]
    assert abs(ngram.speedup.ratio - 1.0) < 0.02 and not (ngram.speedup.significant and ngram.speedup.ratio > 1.02)
    assert ngram.speedup_in_session.ratio > 2.4 and ngram.speedup_in_session.significant
    assert ngram.speedup_in_session.n_pairs == 9
    entry = verdicts_of(res)[0]
    assert "speculative decoding not recommended" in entry.verdict          # the fresh figure decides
    assert "Within a session (the session workload" in entry.verdict and "not the figure for a user's next, " \
        "fresh prompt" in entry.verdict and "best ngram-mod, +1" in entry.verdict
    assert entry.within_session.candidate == "ngram-mod" and entry.within_session.significant_gain
    # the row as saved and loaded keeps it apart
    loaded = Row.from_dict(ngram.to_dict())
    assert loaded.speedup_in_session == ngram.speedup_in_session


def test_only_a_session_measured_says_there_is_no_fresh_prompt_figure():
    res = results(row(None, {"session": 1}), row("ngram-mod", {"session": 2.0}))
    assert res.results[1].speedup is None and res.results[1].speedup_in_session.ratio > 1.9
    verdict = verdicts_of(res)[0].verdict
    assert verdict.startswith("T: only the session workload was measured, so there is no figure for a user's next")
    assert "Within a session" in verdict


def test_console_and_report_label_the_session_figure(tmp_path):
    res = results(row(None, {"chat": 1, "prose": 1, "session": 1}),
                  row("ngram-mod", {"chat": 1.3, "prose": 0.9, "session": 2.5}))
    out = io.StringIO()
    Console(out).row_recorded(res.results[1])
    text = out.getvalue()
    assert "Speed-up vs baseline: +" in text
    assert "Speed-up within a session (turns that build on earlier ones; not a fresh prompt's figure): +1" in text
    assert "session (within a session) +1" in text
    write_report(res, tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert "session (within a session)" in html and "Within a session (the session workload" in html
