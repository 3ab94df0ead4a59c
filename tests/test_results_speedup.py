"""Speedup and Theory: frozen, self-validating values whose JSON is the results format's (unchanged)."""

from __future__ import annotations

import io
import json
import math
import re

import pytest
from draftbench.analysis.stats import describe_speedup, speedup
from draftbench.analysis.summary import verdicts_of
from draftbench.analysis.verdict import analyze
from draftbench.common.errors import ResultsFileError
from draftbench.results.bounds import MAX_RATIO
from draftbench.results.file import RequestRecord, ResultsFile, Row, load_results, save_results
from draftbench.results.speedup import UNBOUNDED_WHY, Speedup, interval_ends, plain, rank
from draftbench.results.theory import Theory, evaluate

PAIRED_KEYS = ["ratio", "ci95_low", "ci95_high", "significant", "method", "n_pairs", "percent", "noise_floor",
               "question", "se_log", "df", "prompts", "sessions"]
SINGLE_KEYS = ["ratio", "ci95_low", "ci95_high", "significant", "method", "n_pairs", "percent"]
THEORY_KEYS = ["formula", "alpha", "k_mean", "tokens_per_step", "tokens_per_step_source", "cost_ratio", "cost_source",
               "predicted_speedup", "best_k", "predicted_at_best_k", "measured_speedup"]


def paired(n: int = 4) -> Speedup:
    base = {(f"p{i}", 0): 10.0 + i for i in range(n)}
    cand = {k: v * (1.3 + 0.01 * i) for i, (k, v) in enumerate(base.items())}
    out = speedup(base, cand)
    assert out is not None
    return out


def test_the_keys_and_their_order_are_the_files():
    assert list(paired().to_dict()) == PAIRED_KEYS
    single = speedup({("a", 0): 10.0}, {("b", 0): 12.0})
    assert single is not None and list(single.to_dict()) == SINGLE_KEYS        # never had a noise floor
    assert single.to_dict() == {"ratio": 1.2, "ci95_low": None, "ci95_high": None, "significant": None,
                                "method": "single-sample", "n_pairs": 0, "percent": 20.0}
    noted = Speedup.from_dict({**single.to_dict(), "significant": False, "note": "why"})
    assert list(noted.to_dict()) == [*SINGLE_KEYS, "note"] and noted.significant is False
    theory = evaluate(acceptance_rate=0.6, mean_accepted_len=3.0, k_mean=4.0, cost_ratio=0.05, cost_source="x",
                      measured_ratio=1.8)
    assert theory is not None and list(theory.to_dict()) == THEORY_KEYS


def test_a_round_trip_through_json_is_exact():
    for speed in (paired(), speedup({("a", 0): 10.0}, {("b", 0): 12.0})):
        assert speed is not None
        text = json.dumps(speed.to_dict())
        assert Speedup.from_dict(json.loads(text)) == speed
        assert json.dumps(Speedup.from_dict(json.loads(text)).to_dict()) == text
    theory = evaluate(acceptance_rate=0.6, mean_accepted_len=None, k_mean=4.0, cost_ratio=None, cost_source=None,
                      measured_ratio=None)
    assert theory is not None and Theory.from_dict(json.loads(json.dumps(theory.to_dict()))) == theory


@pytest.mark.parametrize("bad, message", [
    ({"ratio": None}, "ratio None"), ({"ratio": "1.2"}, "ratio '1.2'"), ({"ratio": float("nan")}, "ratio nan"),
    ({"ratio": -1.0}, "ratio -1.0"), ({"ratio": 1.2, "ci95_low": 1.1}, "both ci95_low and ci95_high"),
    ({"ratio": 1.2, "significant": "yes"}, "significant 'yes'"), ({"ratio": 1.2, "n_pairs": 1.5}, "n_pairs 1.5"),
    ({"ratio": 1.2, "note": 3}, "note 3"), ({"percent": 20.0}, "needs a 'ratio'"),
])
def test_a_speedup_refuses_what_is_not_one(bad, message):
    with pytest.raises(ValueError, match=message):
        Speedup.from_dict(bad)


@pytest.mark.parametrize("bad, message", [({"alpha": "high"}, "alpha 'high'"), ({"best_k": 0}, "best_k 0"),
                                          ({"cost_source": 1}, "cost_source 1"), ([], "must be an object")])
def test_a_theory_refuses_what_is_not_one(bad, message):
    with pytest.raises(ValueError, match=message):
        Theory.from_dict(bad)


def test_rows_hold_the_classes_whatever_they_were_given():
    row = Row(target="t", draft="d", role="speculative", speedup={"ratio": 1.5, "significant": True},
              speedup_by_category={"code": {"ratio": 2.0}}, theory={"alpha": 0.7})
    assert isinstance(row.speedup, Speedup) and row.speedup.ratio == 1.5
    assert isinstance(row.speedup_by_category["code"], Speedup) and isinstance(row.theory, Theory)
    assert Row.from_dict(json.loads(json.dumps(row.to_dict()))) == row
    with pytest.raises(ValueError, match="ratio"):
        Row(target="t", speedup={"ratio": "fast"})


def _file(tmp_path) -> ResultsFile:
    def requests(tps: float) -> tuple[RequestRecord, ...]:
        return tuple(RequestRecord(f"p{i}", "code" if i % 2 else "chat", run, decode_tps=tps * (1 + 0.01 * i),
                                   completion_tokens=64, text=f"answer {i}")
                     for i in range(4) for run in range(2))
    base = Row(target="T", mean_tps=10.0, role="baseline", requests=requests(10.0))
    spec = Row(target="T", draft="D", mean_tps=15.0, role="speculative", draft_max=4, acceptance_rate=0.7,
               speculation_active=True, draft_n=80, verify_steps=20, mean_accepted_len=3.0, requests=requests(15.0),
               draft_path=str(tmp_path / "d.gguf"), target_path=str(tmp_path / "t.gguf"))
    (tmp_path / "d.gguf").write_bytes(b"x" * 10)
    (tmp_path / "t.gguf").write_bytes(b"x" * 100)
    return analyze(ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="f", settings={"runs": 2},
                               results=(base, spec), timestamp="2025-01-01T00:00:00+00:00"))


def test_an_analysed_file_saves_loads_and_saves_the_same_bytes(tmp_path):
    results = _file(tmp_path)
    spec = results.results[1]
    assert isinstance(spec.speedup, Speedup) and isinstance(spec.theory, Theory)
    assert set(spec.speedup_by_category or {}) == {"code", "chat"}
    entry = verdicts_of(results)[0]          # typed; written as the speed-up's object
    assert entry.speedup == spec.speedup and entry.to_dict()["speedup"] == spec.speedup.to_dict()
    path = tmp_path / "r.json"
    save_results(results, path)
    first = path.read_bytes()
    saved = json.loads(first)["results"][1]
    assert list(saved["speedup"]) == PAIRED_KEYS and list(saved["theory"]) == THEORY_KEYS
    loaded = load_results(path)
    assert loaded.results[1] == spec
    save_results(loaded, path)
    assert path.read_bytes() == first
    save_results(analyze(loaded), path)                  # analysing again changes nothing either
    assert path.read_bytes() == first


@pytest.mark.parametrize("field, value, where", [
    ("speedup", {"percent": 5.0}, "results[1].speedup.ratio is missing"),
    ("speedup", {"ratio": None}, "results[1].speedup.ratio must be a finite number of at least 0, not null"),
    ("speedup", {"ratio": -1.0}, "results[1].speedup.ratio must be a finite number of at least 0, not number -1.0"),
    ("speedup_by_category", {"code": {"ratio": None}}, "results[1].speedup_by_category.code.ratio"),
    ("speedup", {"ratio": 1.2, "ci95_low": 1.1}, "results[1] is not a valid row (a speed-up's interval needs both"),
    ("theory", {"best_k": 0}, "results[1].theory.best_k must be an integer of at least 1 or null, not integer 0"),
])
def test_a_bad_speedup_or_theory_in_a_file_is_one_clear_error(tmp_path, field, value, where):
    path = tmp_path / "r.json"
    save_results(_file(tmp_path), path)
    data = json.loads(path.read_text())
    data["results"][1][field] = value
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsFileError, match=re.escape(where)):
        load_results(path)


def test_plain_writes_speedups_inside_json_values():
    speed = paired()
    assert plain({"a": [speed, {"b": speed}], "c": None}) == {"a": [speed.to_dict(), {"b": speed.to_dict()}],
                                                              "c": None}
    assert Speedup.from_value(None) is None and Speedup.from_value(speed) is speed


def test_every_verdict_ranks_speedups_by_how_surely_they_are_faster():
    sure = Speedup(ratio=1.20, ci95_low=1.15, ci95_high=1.25, significant=True)
    bigger_but_noisy = Speedup(ratio=1.40, ci95_low=1.05, ci95_high=1.80, significant=True)
    same_low_higher_ratio = Speedup(ratio=1.30, ci95_low=1.15, ci95_high=1.45, significant=True)
    no_interval = Speedup(ratio=1.10)                       # ranks by its ratio
    slower = Speedup(ratio=0.5, ci95_low=0.45, ci95_high=0.55, significant=True)
    ordered = sorted([no_interval, None, sure, slower, bigger_but_noisy, same_low_higher_ratio], key=rank,
                     reverse=True)
    assert ordered == [same_low_higher_ratio, sure, no_interval, bigger_but_noisy, slower, None]
    # a row without a speed-up ranks below any measured one, even a slow-down (it was 0.0 in one verdict,
    # 1.0 in another)
    assert rank(None) < rank(Speedup(ratio=0.01))


@pytest.mark.parametrize("high", [math.inf, 4.5e10, MAX_RATIO * 1.01])
def test_an_interval_with_no_finite_upper_end_is_kept_as_unbounded_with_why(high):
    ends = interval_ends(0.2, high)
    assert ends["ci95_low"] == 0.2 and ends["ci95_high"] is None and ends["unbounded"] == UNBOUNDED_WHY
    speed = Speedup(ratio=1.1, **ends, significant=False, method="staged")
    assert speed.has_interval and speed.high == math.inf
    text = json.dumps(speed.to_dict(), allow_nan=False)                   # strict JSON: null, and why
    assert Speedup.from_dict(json.loads(text)) == speed
    assert describe_speedup(speed) == "+10.0% [-80.0%, unbounded] (not significant)"
    assert interval_ends(0.2, 3.0) == {"ci95_low": 0.2, "ci95_high": 3.0, "unbounded": None}
    with pytest.raises(ValueError, match="unbounded above has a ci95_low and a null ci95_high"):
        Speedup(ratio=1.1, ci95_low=0.2, ci95_high=3.0, unbounded="why")


def test_a_stage_whose_interval_is_unbounded_is_stored_printed_exported_and_reported_so(tmp_path):
    """Issue 42: one prompt per stage, three stages, a candidate whose speed swings by 10⁵× and whose server has no
    draft counters to bound it: the verdict's interval has no finite upper end (it aborted the sweep, "speed-up
    ci95_high inf is not a finite number", or printed "your next prompt: −100.0% to +4508722254505.3%")."""
    from draftbench.sweep import Sweep
    from draftbench.sweep.config_file import validate_config
    from draftbench.sweep.console import Console
    from draftbench.sweep.session import RunOptions

    from fakes.inprocess import FakeBackend, Script
    from helpers import run_cli

    (tmp_path / "p.txt").write_text("Question about code.\n")
    data = {"name": "u", "hardware": "box", "backend": "llamacpp", "targets": [{"label": "T", "path": "/m/t.gguf"}],
            "drafts": [{"label": "wild", "path": "/m/d.gguf"}],
            "settings": {"max_tokens": 64, "prompts": str(tmp_path / "p.txt"), "port": 0, "stages": 3,
                         "prompts_per_stage": 1}}
    config = validate_config(data, source=str(tmp_path / "c.json"), base_dir=str(tmp_path))
    backend = FakeBackend(Script(tps={"/m/t.gguf": 50.0}, speedup={"/m/d.gguf": 1.2}, noise={"/m/d.gguf": 0.99999},
                                 no_counters={"/m/d.gguf"}))
    out = io.StringIO()
    path = tmp_path / "r.json"
    Sweep(config, path, None, reporter=Console(out), backend=backend, options=RunOptions()).run()
    text = out.getvalue()
    assert "unbounded]" in text and "with no upper bound at 95%" in text, text
    assert not re.search(r"\+\d{9,}", text), text      # no end past 10⁶× (+10⁸ %), the most a speed-up can be
    data = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the results file"))
    quoted = data["summary"]["targets"][0]["speedup"]
    assert quoted["ci95_high"] is None and quoted["ci95_low"] is not None and quoted["unbounded"] == UNBOUNDED_WHY
    assert data["summary"]["targets"][0]["stages"]["quote"]["high"] is None
    for fmt in ("md", "csv", "json"):
        proc = run_cli("sweep.py", "--export", fmt, "--results", str(path), "--output", str(tmp_path / f"e.{fmt}"))
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "unbounded" in (tmp_path / "e.md").read_text()
    json.loads((tmp_path / "e.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the export"))
    proc = run_cli("sweep.py", "--chart-only", "--results", str(path), "--chart", str(tmp_path / "r.html"))
    assert proc.returncode == 0 and "unbounded" in proc.stdout, proc.stdout + proc.stderr
    assert "unbounded]" in (tmp_path / "r.html").read_text()
