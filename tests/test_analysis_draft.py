"""Inside a draft, the logic: acceptance by position and its diagnosis, the best k from one run, and
ceiling runs (planning, reading the measured length, verdicts) — with the in-process fake backend
and hand-made rows. The real llama-server mechanics are in test_analysis_draft_llama.py."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from draftbench.analysis.draft import best_k as kpredict
from draftbench.analysis.draft import positions as perpos
from draftbench.analysis.verdict import analyze, summarize_records
from draftbench.backends.llamacpp.command import candidate_problems
from draftbench.common.errors import ConfigError, ResultsFileError
from draftbench.config.candidates import CandidateSpec
from draftbench.report import build_figures, render_report
from draftbench.results.file import SCHEMA_VERSION, RequestRecord, ResultsFile, Row, load_results
from draftbench.results.findings import Code
from draftbench.results.kinds import Role
from draftbench.results.schema import first_problem
from draftbench.sweep import Console, Sweep, plan
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.console import Reporter

from fakes.inprocess import FakeBackend, Script

TARGET, GOOD, BAD = "/m/target.gguf", "/m/good.gguf", "/m/bad.gguf"


def config(tmp_path: Path, backend: str = "llamacpp", **settings):
    data = {"name": "unit", "hardware": "box", "backend": backend,
            "targets": [{"label": "7B", "path": TARGET}],
            "drafts": [{"label": "good", "path": GOOD}, {"label": "bad", "path": BAD}],
            "settings": {"runs": 2, "max_tokens": 64, "prompts": ["code", "json"], "port": 0, **settings}}
    return validate_config(data, source=str(tmp_path / "c.json"), base_dir=str(tmp_path))


def script(**kw) -> Script:
    base = dict(tps={TARGET: 50.0}, speedup={GOOD: 1.5, BAD: 0.6}, acceptance={GOOD: 0.8, BAD: 0.02},
                full_speedup={GOOD: 1.9, BAD: 1.4})
    base.update(kw)
    return Script(**base)


def run_sweep(tmp_path, backend, cfg, reporter=None) -> tuple[int, Path]:
    results = tmp_path / "r.json"
    return Sweep(cfg, results, None, reporter=reporter or Reporter(), backend=backend).run(), results


# --------------------------------------------------------------------------- acceptance by position

def record(per_pos, accepted=None, drafted=8, **kw) -> RequestRecord:
    return RequestRecord("p", "code", 0, decode_tps=50.0, completion_tokens=33, draft_n=drafted,
                         draft_n_accepted=sum(per_pos) if accepted is None else accepted, verify_steps=4,
                         accepted_per_pos=per_pos, **kw)


def test_per_position_counts_are_summed_per_row_and_checked_against_the_accepted_total():
    fields = summarize_records([record([4, 3, 1, 0]), record([4, 4, 2, 1])], max_tokens=32, runs=1)
    assert fields["accepted_per_pos"] == [8, 7, 3, 1] and fields["draft_n_accepted"] == 19
    assert fields["mean_accepted_len"] == round(1 + 19 / 8, 3)        # llama-server's "mean len"
    per_pos, findings = perpos.row_positions([record([4, 3, 1, 0], accepted=9)])
    assert per_pos is None and findings[0].code is Code.PER_POSITION_MISMATCH
    # a request that drafted but has no per-position counts: no partial sum
    assert perpos.row_positions([record([4, 3]), record(None, accepted=3)]) == (None, [])
    # a server that reports none at all (LM Studio): not reported, not zeros
    assert summarize_records([record(None, accepted=3)], max_tokens=32, runs=1)["accepted_per_pos"] is None


@pytest.mark.parametrize("per_pos, k, code, words", [
    ([12, 4, 0, 0], None, Code.EARLY_REJECTIONS, "rejections are early: only 30% of verify steps"),
    ([36, 32, 28, 24, 8, 4, 0, 0], 8, Code.ACCEPTANCE_DECAYS, "decays after position 4: only 20% of verify steps "
                                                               "get to position 5 (tokens were accepted up to "
                                                               "position 6); no token past position 6 was ever "
                                                               "accepted (k=8)"),
    ([40, 36, 36, 32], 4, Code.ACCEPTANCE_HOLDS, "80% of verify steps accept all 4 drafted tokens"),
])
def test_one_line_diagnosis_states_facts(per_pos, k, code, words):
    finding = perpos.diagnose(per_pos, 40, k=k)
    assert finding is not None and finding.code is code and words in finding.message, finding
    assert "\n" not in finding.message and " k " not in finding.message + " "     # k advice is k_advice.py's


def test_positions_never_drafted_are_not_read_as_a_decay():
    """Issue 37: llama-server exports 64 positions for ngram-mod (n-max 64) whether or not a draft reached
    them; ten positions accepted and 54 zeros is not "acceptance decays after position 10"."""
    per_pos = [40 - i for i in range(10)] + [0] * 54
    finding = perpos.diagnose(per_pos, 40, model_free=True)
    assert finding is not None and finding.code is Code.ACCEPTANCE_HOLDS, finding
    assert "decays" not in finding.message and "64" not in finding.message
    assert "get to position 10, the last at which any token was accepted" in finding.message
    assert perpos.drafted_positions(per_pos) == per_pos[:10] and perpos.drafted_positions(per_pos, 4) == per_pos[:4]


def test_too_few_drafts_are_said_to_be_too_few():
    finding = perpos.diagnose([2, 2, 2], 2)
    assert finding is not None and finding.code is Code.TOO_FEW_DRAFTS and "only 2 drafts" in finding.message


def test_no_diagnosis_without_counts():
    assert perpos.diagnose(None, 10) is None and perpos.diagnose([1, 0], 0) is None


# --------------------------------------------------------------------------- best k from one run

T_TARGET, COST = 0.02, 0.006          # s per target token alone; s per drafted token (draft + verify)


def linear_world_row(per_pos: list[int], steps: int, k: int, *, draft_max: int, requests: int = 2) -> Row:
    """A row measured in a world where the model holds exactly: every step drafts min(k, k_max)
    tokens, step time = T_TARGET + COST * drafted, and acceptance follows ``per_pos``."""
    accepted = sum(per_pos[:k])
    drafted = steps * k
    time_s = steps * T_TARGET + COST * drafted
    tokens = steps + accepted
    recs = tuple(RequestRecord("p", "code", i, decode_tps=tokens / time_s, completion_tokens=tokens + 1,
                               draft_n=drafted, draft_n_accepted=accepted, verify_steps=steps,
                               accepted_per_pos=per_pos[:k]) for i in range(requests))
    return Row(target="7B", draft="good", role="speculative", draft_max=draft_max, draft_path=GOOD,
               mean_tps=tokens / time_s, accepted_per_pos=[a * requests for a in per_pos[:k]],
               verify_steps=steps * requests, draft_n=drafted * requests, draft_n_accepted=accepted * requests,
               speculation_active=True, candidate={"label": "good", "method": [], "draft": "good", "params": {}},
               requests=recs)


def baseline_row() -> Row:
    recs = tuple(RequestRecord("p", "code", i, decode_tps=1 / T_TARGET, completion_tokens=65) for i in range(2))
    return Row(target="7B", role="baseline", mean_tps=1 / T_TARGET, requests=recs)


def test_prediction_from_one_run_recovers_a_world_that_follows_the_model():
    per_pos = [90, 70, 45, 25, 12, 6, 3, 1]
    baseline = baseline_row()
    rows = [linear_world_row(per_pos, 100, k, draft_max=k) for k in (2, 4, 8)]
    pred = kpredict.predict(rows[2], baseline)
    assert pred is not None and pred["from_k"] == 8 and len(pred["per_k"]) == 8
    assert pred["cost_per_drafted_token_s"] == pytest.approx(COST, rel=1e-3)
    assert pred["target_s_per_token"] == pytest.approx(T_TARGET, rel=1e-6)
    pred = kpredict.with_measured(pred, kpredict.siblings(rows[2], rows))
    measured = {p["k"]: p for p in pred["per_k"] if p["measured_tps"] is not None}
    assert set(measured) == {2, 4} and pred["compared"] == 2
    for p in measured.values():
        assert abs(p["error_pct"]) < 0.1                       # the model holds here, so the prediction is exact
    best = max(range(1, 9), key=lambda k: (1 + sum(per_pos[:k]) / 100) / (T_TARGET + COST * k))
    assert pred["recommended_k"] == best
    assert pred["per_k"][7]["predicted_tps"] == round(rows[2].mean_tps, 3)   # anchored to the measured row
    assert "best k predicted" in pred["text"]


def test_prediction_models_a_step_overhead_and_drafts_cut_short_by_p_min():
    """A world with a fixed cost per verify step and drafts that stop one token past what the target
    accepts (a p-min at work): the prediction recovers it exactly at every k."""
    overhead, k_max = 0.004, 8
    accepted_prefixes = [[0, 1, 1, 2, 8, 8], [3, 3, 4, 5, 8, 8], [0, 0, 0, 1, 1, 2], [6, 7, 8, 8, 8, 8]]

    def world(k: int) -> tuple[float, list[RequestRecord]]:
        recs, tokens_all, time_all = [], 0, 0.0
        for i, prefixes in enumerate(accepted_prefixes):
            steps = len(prefixes) * 10
            accepted = sum(min(a, k) for a in prefixes) * 10
            drafted = sum(min(a + 1, k) for a in prefixes) * 10
            time_s = steps * (T_TARGET + overhead) + COST * drafted
            per_pos = [sum(1 for a in prefixes if min(a, k) > j) * 10 for j in range(k)]
            recs.append(RequestRecord("p", "code", i, decode_tps=(steps + accepted) / time_s,
                                      completion_tokens=steps + accepted + 1, draft_n=drafted,
                                      draft_n_accepted=accepted, verify_steps=steps, accepted_per_pos=per_pos))
            tokens_all, time_all = tokens_all + steps + accepted, time_all + time_s
        return tokens_all / time_all, recs

    tps, recs = world(k_max)
    row = Row(target="7B", draft="good", role="speculative", draft_max=k_max, draft_path=GOOD, mean_tps=tps,
              accepted_per_pos=[sum(r.accepted_per_pos[j] for r in recs) for j in range(k_max)],
              verify_steps=sum(r.verify_steps for r in recs), draft_n=sum(r.draft_n for r in recs),
              draft_n_accepted=sum(r.draft_n_accepted for r in recs), speculation_active=True,
              candidate={"label": "good", "method": [], "draft": "good", "params": {}}, requests=tuple(recs),
              server={"command": ["llama-server", "--spec-draft-p-min", "0.5"]})     # the p-min that cuts drafts
    pred = kpredict.predict(row, baseline_row())
    assert pred["drafts"] == "cut short"
    assert pred["cost_per_step_s"] == pytest.approx(overhead, rel=1e-3)
    assert pred["cost_per_drafted_token_s"] == pytest.approx(COST, rel=1e-3)
    for p in pred["per_k"]:
        assert p["predicted_tps"] == pytest.approx(world(p["k"])[0], rel=1e-3), p["k"]
    # without a p-min, short drafts are the ends of answers: cut in proportion at every k
    plain = kpredict.predict(Row(**{**row.__dict__, "server": {"command": ["llama-server"]}}), baseline_row())
    assert plain["drafts"] == "full"
    # a minimum draft length: smaller k are not predicted
    floor = Row(**{**row.__dict__, "server": {"command": ["llama-server", "--spec-draft-p-min", "0.5",
                                                          "--spec-draft-n-min", "3"]}})
    assert [p["k"] for p in kpredict.predict(floor, baseline_row())["per_k"]] == list(range(3, k_max + 1))


def test_no_prediction_without_what_it_needs():
    row = linear_world_row([9, 7], 10, 2, draft_max=2)
    assert kpredict.predict(row, None) is None                                      # no baseline
    assert kpredict.predict(Row(target="7B", draft="good", role="speculative"), baseline_row()) is None
    ngram = Row(**{**row.__dict__, "draft_path": None})
    assert kpredict.predict(ngram, baseline_row()) is None                          # model-free method
    hybrid = Row(**{**row.__dict__, "candidate": {"method": ["draft-simple", "ngram-mod"]}})
    assert kpredict.predict(hybrid, baseline_row()) is None
    for method in (["draft-simple"], ["draft_model"], []):                         # llama.cpp, vLLM, a plain draft
        assert kpredict.drafts_greedily(Row(**{**row.__dict__, "candidate": {"method": method}}))


def test_when_no_k_pays_the_prediction_says_so():
    slow = Row(**{**baseline_row().__dict__, "mean_tps": 10_000.0})
    pred = kpredict.predict(linear_world_row([36, 28], 40, 2, draft_max=2), slow)
    assert pred["recommended_k"] is None and "no k is predicted to beat the target alone" in kpredict.describe(pred)


# --------------------------------------------------------------------------- ceiling runs: planning

def test_ceiling_runs_are_planned_after_the_drafts_they_read_and_before_the_control(tmp_path):
    cfg = config(tmp_path, ceiling=True, draft_max=[2, 4], control_baseline=True)
    titles = [c.title(True) for c in plan(cfg)]
    assert titles == ["7B (baseline)", "7B + good (k=2)", "7B + good (k=4)", "7B + bad (k=2)", "7B + bad (k=4)",
                      "7B + good (k=2) [synthetic: its measured acceptance]",
                      "7B + good (k=2) [synthetic: full acceptance]",
                      "7B + good (k=4) [synthetic: its measured acceptance]",
                      "7B + good (k=4) [synthetic: full acceptance]",
                      "7B + bad (k=2) [synthetic: its measured acceptance]",
                      "7B + bad (k=2) [synthetic: full acceptance]",
                      "7B + bad (k=4) [synthetic: its measured acceptance]",
                      "7B + bad (k=4) [synthetic: full acceptance]",
                      "7B (baseline again, drift check)"]
    keys = [c.key for c in plan(cfg)]
    assert len(set(keys)) == len(keys) and keys[5] == ("ceiling", "7B", "good", 2, "measured")
    assert len(plan(config(tmp_path))) == 3                         # off by default


def test_ceiling_needs_a_backend_that_fakes_acceptance(tmp_path):
    with pytest.raises(ConfigError, match=r"settings\.ceiling: vllm cannot run drafts at synthetic acceptance"):
        config(tmp_path, backend="vllm", ceiling=True)


def test_synthetic_acceptance_is_never_a_candidate():
    caps = {"flags": ["--spec-type", "--spec-synth-len", "--spec-synth-rates"], "spec_types": ["draft-simple"]}
    spec = CandidateSpec(label="fake", params={"synth_len": 3.0}, where="$.candidates[0]")
    problems = candidate_problems((spec,), caps, "llama-server")
    assert [p.path for p in problems] == ["$.candidates[0].params.synth_len"]
    assert "settings.ceiling" in problems[0].fix


# --------------------------------------------------------------------------- ceiling runs: the sweep

def test_ceiling_runs_read_the_measured_length_and_are_never_candidates(tmp_path):
    backend = FakeBackend(script())
    out = io.StringIO()
    # upstream's order (each combination on one server), so the launches below are one per ceiling run
    code, path = run_sweep(tmp_path, backend, config(tmp_path, ceiling=True, draft_max=4, design="sequential"),
                           Console(out))
    assert code == 0
    saved = load_results(path)
    good = saved.row(("speculative", "7B", "good", 4))
    assert good.mean_accepted_len == 1 + 32 / 10                 # the fake accepts 80% of 40 drafted over 10 steps
    measured = saved.row(("ceiling", "7B", "good", 4, "measured"))
    full = saved.row(("ceiling", "7B", "good", 4, "full"))
    assert measured.role == Role.CEILING and measured.ok
    # the ceiling run records its settings: the level, the length asked for, and the flag the server got
    assert measured.synthetic == {"level": "measured", "synth_len": 4.2, "k": 4, "from_mean_accepted_len": 4.2}
    assert full.synthetic["synth_len"] == 5.0 and full.candidate["params"] == {"draft_max": 4, "synth_len": 5.0}
    launched = [spec.params for spec in (s.spec for s in backend.servers) if "synth_len" in spec.params]
    assert launched == [{"synth_len": 4.2}, {"synth_len": 5.0}, {"synth_len": 1.1}, {"synth_len": 5.0}]
    # never compared for output, never ranked
    assert measured.equivalence is None and full.speedup.ratio > 1.5
    stored = saved.summary.to_dict()["targets"][0]          # as the file holds it
    assert stored["recommended_draft"] == "good" and not stored["no_draft_can_pay"]
    assert good.ceiling["reach"] == round(good.mean_tps / full.mean_tps, 4)
    assert "this draft reaches 79% of what its cost allows" in good.ceiling["text"]
    assert "a perfect draft of this size would give +90.0%" in good.ceiling["text"]
    text = out.getvalue()
    # measured on their own after the stages, in plan order
    assert re.search(r"\[\d/4\] 7B \+ good \[synthetic: its measured acceptance\]", text)
    assert "Synthetic speed-up vs baseline (not a candidate): +" in text and "Ceiling of 7B + good (k=4): this draft reaches 79%" in text


def test_the_verdict_says_when_no_draft_can_pay(tmp_path):
    backend = FakeBackend(script(speedup={GOOD: 0.8, BAD: 0.5}, full_speedup={GOOD: 0.9, BAD: 0.7}))
    _code, path = run_sweep(tmp_path, backend, config(tmp_path, ceiling=True, draft_max=4))
    entry = load_results(path).summary.to_dict()["targets"][0]      # as the file holds it
    assert entry["no_draft_can_pay"] and entry["recommended_draft"] is None
    assert "No draft can pay on this hardware: even the draft with the highest ceiling (good, k=4)" in entry["verdict"]


def test_a_ceiling_is_skipped_when_its_draft_has_no_measurement(tmp_path):
    backend = FakeBackend(script(inactive={BAD}))
    _code, path = run_sweep(tmp_path, backend, config(tmp_path, ceiling=True, draft_max=4, design="sequential"))
    saved = load_results(path)
    for level in ("measured", "full"):
        row = saved.row(("ceiling", "7B", "bad", 4, level))
        assert row.status == "skipped" and "never speculated in its real run" in row.reason
    assert [s.spec.draft for s in backend.servers].count(BAD) == 1         # no server for the skipped ceilings


def test_a_schema_2_file_resumes_into_schema_3_with_ceiling_runs(tmp_path):
    """A sweep saved by the previous version (no per-position counts, no ceiling rows) resumed with
    --ceiling: only the ceiling runs start, their k comes from the config, and the file becomes schema 3."""
    cfg = config(tmp_path, draft_max=4, design="sequential")
    _code, path = run_sweep(tmp_path, FakeBackend(script()), cfg)
    data = json.loads(path.read_text())
    data["schema_version"] = 2
    for row in data["results"]:
        for key in ("accepted_per_pos", "diagnosis", "k_prediction", "synthetic", "ceiling"):
            row.pop(key, None)
        for r in row["requests"]:
            r.pop("accepted_per_pos", None)
    path.write_text(json.dumps(data))
    again = FakeBackend(script())
    code, _path = run_sweep(tmp_path, again, config(tmp_path, draft_max=4, ceiling=True, design="sequential"))
    assert code == 0 and [s.spec.params for s in again.servers] == [{"synth_len": 4.2}, {"synth_len": 5.0},
                                                                     {"synth_len": 1.1}, {"synth_len": 5.0}]
    saved = load_results(path)
    assert saved.schema_version == SCHEMA_VERSION
    full = saved.row(("ceiling", "7B", "good", 4, "full"))
    assert full.synthetic["k"] == 4 and full.accepted_per_pos == [40, 40, 40, 40]   # 4 requests, all accepted
    old = saved.row(("speculative", "7B", "good", 4))
    assert old.accepted_per_pos is None and old.diagnosis is None and old.ceiling["full_tps"] == full.mean_tps


def test_ceiling_rows_resume_by_level(tmp_path):
    cfg = config(tmp_path, ceiling=True, draft_max=4)
    run_sweep(tmp_path, FakeBackend(script(fail_launch={})), cfg)
    again = FakeBackend(script())
    code, _path = run_sweep(tmp_path, again, cfg)
    assert code == 0 and again.servers == []


# --------------------------------------------------------------------------- the report

def test_report_draws_positions_ceiling_and_prediction(tmp_path):
    # four prompts: a stage drafts enough for every row's positions to be drawn (fewer are a diagnosis' "too few")
    cfg = config(tmp_path, ceiling=True, draft_max=[2, 4], prompts=["code", "json", "prose", "list"])
    _code, path = run_sweep(tmp_path, FakeBackend(script()), cfg)
    results = load_results(path)
    figures = build_figures(results)
    positions = figures["chart-positions"]["data"]
    # one target: the legend names the candidates only
    assert [t["name"] for t in positions] == ["good (k=2)", "good (k=4)", "bad (k=2)", "bad (k=4)"]
    assert positions[1]["y"] == [100.0, 100.0, 100.0, 20.0]        # 32 of 40 accepted, front-loaded, 10 steps each
    assert [t["name"] for t in figures["chart-ceiling"]["data"]] == [
        "real draft (measured)", "synthetic, at its measured acceptance", "synthetic, every drafted token accepted"]
    kp = figures["chart-kpredict"]["data"]
    assert kp[0]["name"] == "7B + good: predicted from k=4" and kp[0]["x"] == [0, 1, 2, 3, 4]
    assert kp[1]["x"] == [2, 4]                                     # measured at k=2, and the row it predicts from
    page = render_report(results)
    assert 'id="inside-table"' in page and "Each draft against its ceiling" in page
    good4 = next(r for r in results.results if r.draft == "good" and r.draft_max == 4 and r.ceiling is not None)
    # the server's own counts beside the shares (totals and by position, as the row sums them)
    assert (f"{good4.draft_n_accepted} accepted of {good4.draft_n} drafted in {good4.verify_steps} verify steps; "
            f"by position {', '.join(map(str, good4.accepted_per_pos))}") in page
    assert "Synthetic bars are not candidates" in page
    for key, title in (("chart-positions", "Acceptance by draft position"), ("chart-kpredict", "Best k")):
        assert title in page and key in page


def test_report_says_not_reported_by_this_server(tmp_path):
    _code, path = run_sweep(tmp_path, FakeBackend(script()), config(tmp_path))
    data = json.loads(path.read_text())
    for row in data["results"]:
        row["accepted_per_pos"] = None
        for r in row["requests"]:
            r["accepted_per_pos"] = None
    data["backend"] = "lmstudio"
    results = analyze(ResultsFile.from_dict(data))
    assert all(r.diagnosis is None and r.k_prediction is None for r in results.results)
    page = render_report(results)
    assert "Acceptance by draft position: not reported by this server (lmstudio)." in page
    assert "chart-positions" not in build_figures(results)       # said, not drawn as empty axes


# --------------------------------------------------------------------------- the results file (schema 3)

def test_schema_3_fields_are_declared_and_checked_on_load(tmp_path):
    _code, path = run_sweep(tmp_path, FakeBackend(script()), config(tmp_path, ceiling=True, draft_max=[2, 4]))
    data = json.loads(path.read_text())
    assert data["schema_version"] == SCHEMA_VERSION and first_problem(data) is None
    spec = next(r for r in data["results"] if r["role"] == "speculative" and r["draft_max"] == 4)
    assert spec["k_prediction"]["per_k"] and spec["ceiling"]["full_tps"] and spec["diagnosis"]["code"]
    assert data["summary"]["targets"][0]["no_draft_can_pay"] is False
    index = data["results"].index(spec)
    for key, bad, words in (("accepted_per_pos", ["3", 1], "accepted_per_pos[0] must be an integer"),
                            ("k_prediction", {"from_k": "eight", "per_k": []}, "k_prediction.from_k must be an integer"),
                            ("k_prediction", {"from_k": 4}, "k_prediction.per_k is missing"),
                            ("synthetic", {"level": "half"}, "synthetic.level must be one of 'measured', 'full'"),
                            ("ceiling", {"reach": "most"}, "ceiling.reach must be a finite number"),
                            ("diagnosis", {"code": "x"}, "diagnosis.message is missing")):
        broken = json.loads(json.dumps(data))
        broken["results"][index][key] = bad
        path.write_text(json.dumps(broken))
        with pytest.raises(ResultsFileError, match=re.escape(f"$.results[{index}].{words}")):
            load_results(path)
