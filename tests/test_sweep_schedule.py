"""The measurement design (sweep/schedule.py): a stage's steps in each design, ABBA order, brackets, the
warm-up outside the measured set, and what every request records. In-process servers (no processes); the
real-server checks are in test_sweep_schedule_llama.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from draftbench.config.prompt_sets import warmup_prompts
from draftbench.config.prompts import BUILTIN_PROMPTS
from draftbench.measure.sequential import request_seed
from draftbench.results.file import load_results
from draftbench.sweep import Sweep
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.console import Reporter
from draftbench.sweep.schedule import Design, Side, abba, is_stateful, stage_cost, stage_steps

from fakes.inprocess import FakeBackend, FakeServer, Script

TARGET, GOOD, NGRAM = "/m/target.gguf", "/m/good.gguf", "ngram-mod"


def config(tmp_path: Path, **settings):
    data = {"name": "design", "hardware": "box", "backend": "llamacpp", "targets": [{"label": "7B", "path": TARGET}],
            "drafts": [{"label": "good", "path": GOOD}],
            "candidates": [{"label": NGRAM, "method": NGRAM}],
            "settings": {"max_tokens": 64, "prompts": ["code", "json", "prose"], "port": 0, "stages": 3,
                         "search": "exhaustive", **settings}}
    return validate_config(data, source=str(tmp_path / "c.json"), base_dir=str(tmp_path))


class Recording(FakeBackend):
    """Remembers every request a server was sent: (server number, candidate, prompt text, seed)."""

    def __init__(self, script: Script):
        super().__init__(script)
        self.sent: list[tuple[int, str | None, str, int]] = []

    def launch(self, spec):
        server = super().launch(spec)
        number, backend = len(self.servers), self

        class Recorded(FakeServer):
            def send(self, body, **kw):
                backend.sent.append((number, spec.draft or (spec.method[0] if spec.method else None),
                                     body["messages"][-1]["content"], body["seed"]))
                return super().send(body, **kw)

        server.__class__ = Recorded
        return server


def script() -> Script:
    return Script(tps={TARGET: 50.0}, speedup={GOOD: 1.5}, acceptance={GOOD: 0.8})


def run(tmp_path: Path, **settings):
    backend = Recording(script())
    path = tmp_path / "r.json"
    Sweep(config(tmp_path, **settings), path, None, reporter=Reporter(), backend=backend).run()
    return backend, load_results(path)


# --------------------------------------------------------------------------- the pure schedule

def test_abba_alternates_who_goes_first_and_pairs_every_prompt():
    order = abba([(0, 0), (0, 1), (0, 2), (0, 3)])
    assert [(r.side.value[0], r.prompt) for r in order] == [("b", 0), ("c", 0), ("c", 1), ("b", 1),
                                                           ("b", 2), ("c", 2), ("c", 3), ("b", 3)]


def test_a_stage_in_each_design_and_what_it_costs():
    interleaved = stage_steps(Design.INTERLEAVED, 1, [4, 7], 0, ["a", "b", "c"])
    assert [s.candidate for s in interleaved] == ["c", "b", "a"]            # reversed on odd stages
    assert {s.baseline for s in interleaved} == {0}                         # one baseline server for the stage
    assert [(r.side, r.prompt) for r in interleaved[0].requests] == [(Side.BASELINE, 4), (Side.CANDIDATE, 4),
                                                                      (Side.CANDIDATE, 7), (Side.BASELINE, 7)]
    bracketed = stage_steps(Design.BRACKETED, 0, [4, 7], 0, ["a", "b"])
    assert [(s.candidate, s.baseline, s.compared_with) for s in bracketed] == [
        (None, 0, ()), ("a", None, (0, 1)), (None, 1, ()), ("b", None, (1, 2)), (None, 2, ())]
    sequential = stage_steps(Design.SEQUENTIAL, 0, [4, 7], 0, ["a", "b"])
    assert [(s.candidate, s.compared_with) for s in sequential] == [(None, ()), ("a", (0,)), ("b", (0,))]
    assert (stage_cost(interleaved).loads, stage_cost(interleaved).requests) == (4, 12)
    assert (stage_cost(bracketed).loads, stage_cost(bracketed).requests) == (5, 10)
    assert (stage_cost(sequential).loads, stage_cost(sequential).requests) == (3, 6)
    assert is_stateful(("ngram-mod",)) and is_stateful(("draft-simple", "ngram-cache"))
    assert not is_stateful(("ngram-simple",)) and not is_stateful(("draft-simple",))


# --------------------------------------------------------------------------- the sweep runs it

def test_interleaved_candidates_run_beside_the_stages_baseline_server_in_abba_order(tmp_path):
    backend, results = run(tmp_path)
    baseline = results.baseline_for("7B")
    good = next(r for r in results.results if r.draft == "good")
    assert good.design["name"] == "interleaved" and good.design["horizon"] == 3 and good.design["fixed_prompts"]
    for r in good.requests:
        partner = [b for b in baseline.requests if b.session in r.compared_with and b.beside == r.session
                   and (b.prompt_id, b.run) == (r.prompt_id, r.run)]
        assert len(partner) == 1                      # one baseline request, measured beside it
    # ABBA on the wire: the baseline server (1) and the first candidate's (2) alternate (warm-ups first)
    first_pair = [who for n, who, _text, seed in backend.sent if n in (1, 2) and seed != request_seed(42, -1, 0)]
    assert first_pair[:6] == [None, GOOD, GOOD, None, None, GOOD] or first_pair[:6] == [None, NGRAM, NGRAM, None,
                                                                                          None, NGRAM]
    stages = {r.block for r in good.requests}
    assert results.summary.to_dict()["server_loads"] == len(stages) * 3     # per stage: its baseline and two candidates


def test_the_warm_up_never_shares_a_prompt_with_the_measured_set(tmp_path):
    backend, _results = run(tmp_path)
    measured = {p.text for p in BUILTIN_PROMPTS if p.category in ("code", "json", "prose")}
    warmups = [text for _n, _who, text, seed in backend.sent if seed == request_seed(42, -1, 0)]
    assert warmups and len(warmups) == len(backend.servers) and not set(warmups) & measured
    assert not {w.text for w in warmup_prompts(BUILTIN_PROMPTS, 3)} & {p.text for p in BUILTIN_PROMPTS}
    # a candidate's server answers each measured prompt once (the stage's baseline server once per candidate)
    candidates = {n for n, who, _t, _s in backend.sent if who is not None}
    per_server: dict[int, list[str]] = {}
    for n, _who, text, seed in backend.sent:
        if seed != request_seed(42, -1, 0) and n in candidates:
            per_server.setdefault(n, []).append(text)
    assert all(len(texts) == len(set(texts)) for texts in per_server.values())


def test_a_stateful_method_never_sees_a_prompt_twice_and_says_so_per_request(tmp_path):
    _backend, results = run(tmp_path, design="sequential")
    ngram = next(r for r in results.results if r.draft == NGRAM)
    good = next(r for r in results.results if r.draft == "good")
    assert ngram.design["stateful"] is True and all(r.seen_before is False for r in ngram.requests)
    for row in (ngram, good):
        for stage in {r.block for r in row.requests}:
            assert len({r.session for r in row.requests if r.block == stage}) == 1    # a fresh server per stage
    assert good.design["drift_prone"] is True and all(r.compared_with for r in good.requests)


def test_bracketed_candidates_compare_with_the_baselines_before_and_after(tmp_path):
    backend, results = run(tmp_path, design="bracketed")
    good = next(r for r in results.results if r.draft == "good")
    ngram = next(r for r in results.results if r.draft == NGRAM)
    assert all(len(r.compared_with) == 2 for r in good.requests + ngram.requests)
    # neighbours share the baseline between them: stage 1 is B good B ngram B
    first = {tuple(r.compared_with) for r in good.requests if r.block == 0}
    second = {tuple(r.compared_with) for r in ngram.requests if r.block == 0}
    assert len(first) == len(second) == 1 and next(iter(first))[1] == next(iter(second))[0]
    assert all(s.stopped for s in backend.servers)
    assert good.speedup.ratio == pytest.approx(1.5, abs=0.01)


def test_dry_run_says_which_design_runs_and_what_it_costs(tmp_path):
    from helpers import run_cli, tiny_gguf
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"name": "d", "hardware": "box", "backend": "llamacpp",
                                "targets": [{"label": "7B", "path": str(tiny_gguf(tmp_path / "t.gguf"))}],
                                "candidates": [{"label": NGRAM, "method": NGRAM}],
                                "settings": {"prompts": ["code", "json"], "gpu_layers": 0, "design": "bracketed"}}))
    proc = run_cli("sweep.py", "--config", str(path), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "Design for 7B: bracketed (a baseline server before and after every candidate's)" in proc.stdout
    assert "up to 6 stage(s), each measuring all 2 prompt(s) on fresh servers" in proc.stdout
    assert "a stage with every candidate: 3 server loads, 6 requests — at most 18 loads and 36 requests" in proc.stdout
    proc = run_cli("sweep.py", "--config", str(path), "--dry-run", "--design", "sequential")
    assert "Design for 7B: sequential" in proc.stdout and "drift-prone" in proc.stdout


def test_a_stage_cut_short_measures_only_what_each_candidate_still_owes():
    from draftbench.sweep.schedule import Design, Side, stage_steps
    owed = {"a": [2, 3], "b": [0, 1, 2, 3]}
    steps = stage_steps(Design.INTERLEAVED, 0, [0, 1, 2, 3], 0, ["a", "b"], owed)
    assert [(s.candidate, sorted({r.prompt for r in s.requests})) for s in steps] == [("a", [2, 3]), ("b", [0, 1, 2, 3])]
    bracketed = stage_steps(Design.BRACKETED, 0, [0, 1, 2, 3], 0, ["a"], {"a": [3]})
    assert [[r.prompt for r in s.requests] for s in bracketed] == [[3], [3], [3]]
    alone = stage_steps(Design.INTERLEAVED, 0, [0, 1], 0, [], {})       # no candidate: the baseline, every prompt
    assert [(r.side, r.prompt) for r in alone[0].requests] == [(Side.BASELINE, 0), (Side.BASELINE, 1)]
