"""bench.py --url --json writes the project's one results format (issue 33), so the sweep's readers
(--chart-only, --export, --compare) take it; against a local stand-in server (tests/fakes/hostile_server.py,
mode "ok"), not a real one: the real-server checks are in test_cli_bench_server_llama.py."""

from __future__ import annotations

import json

from draftbench.results.file import load_results
from draftbench.results.kinds import Role

from fakes.hostile_server import HostileServer
from helpers import run_cli


def test_bench_json_is_a_results_file_the_sweeps_readers_take(tmp_path):
    out = tmp_path / "bench.json"
    with HostileServer("ok") as server:
        proc = run_cli("bench.py", "--url", server.url, "--compare-url", server.url, "--label", "alone",
                       "--compare-label", "with draft", "--requests", "2", "--warmup", "0", "--max-tokens", "8",
                       "--json", str(out), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = load_results(out)        # the format's own checks: types, units, one row per combination
    assert results.made_by == "bench.py" and results.schema_version is not None
    assert [(r.target, r.role) for r in results.results] == [("alone", Role.BASELINE), ("with draft", Role.BASELINE)]
    assert results.read_settings().max_tokens == 8 and results.read_settings().runs == 1
    assert all(len(r.requests) == 2 and r.server and r.server["backend"] for r in results.results)
    data = json.loads(out.read_text())
    assert data["comparison"]["equivalence"]["compared"] == 2          # kept beside the rows
    assert [s["label"] for s in data["servers"]] == ["alone", "with draft"]
    assert [p["id"] for p in data["prompts"]] == results.prompt_set["ids"]
    export = run_cli("sweep.py", "--results", str(out), "--export", "md", timeout=120)
    assert export.returncode == 0, export.stderr
    assert "`alone (baseline)`" in export.stdout and "`with draft (baseline)`" in export.stdout
    # each server is a row of its own: the verdict says it is a measurement, never "no draft produced a valid one"
    assert "one server measured by bench.py — a measurement, not a verdict" in export.stdout
    assert "no draft produced a valid measurement" not in export.stdout


def test_two_servers_with_one_label_are_refused_before_anything_is_sent(tmp_path):
    with HostileServer("ok") as server:
        proc = run_cli("bench.py", "--url", server.url, "--compare-url", server.url, "--label", "x",
                       "--compare-label", "x", "--json", str(tmp_path / "b.json"), timeout=120)
        seen = server.requests
    assert proc.returncode == 2 and "--label and --compare-label are both 'x'" in proc.stderr
    assert seen == 0 and not (tmp_path / "b.json").exists()


def test_an_ab_whose_candidate_failed_is_not_called_a_measurement_of_one_server():
    """bench.py --target writes made_by "bench.py" too, with a candidate: when that candidate failed, the verdict
    says no draft produced a valid measurement, not that the file holds one server's measurement."""
    from draftbench.analysis.summary import verdicts_of
    from draftbench.analysis.verdict import analyze
    from draftbench.results.file import RequestRecord, ResultsFile, Row

    base = Row(target="T", role="baseline", mean_tps=30.0,
               requests=(RequestRecord("p", "code", 0, decode_tps=30.0, completion_tokens=16, text="t"),))
    failed = Row(target="T", draft="d", role="speculative", status="error", reason="the server died")
    results = ResultsFile(name="ab", hardware="h", backend="llamacpp", model_family="f",
                          settings={"noise_floor": 0.02}, results=(base, failed), schema_version=4, made_by="bench.py")
    (verdict,) = verdicts_of(analyze(results))
    assert "no draft produced a valid measurement" in verdict.verdict
    assert "one server measured by bench.py" not in verdict.verdict
