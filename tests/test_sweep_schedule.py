"""The measurement design (sweep/schedule.py): blocks, sessions, ABBA order, brackets, the warm-up
outside the measured set, and what every request records. In-process servers (no processes); the
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
from draftbench.sweep.schedule import Design, Kind, abba, blocks, cost, is_stateful, pass_steps, sweep_steps

from fakes.inprocess import FakeBackend, FakeServer, Script

TARGET, GOOD, NGRAM = "/m/target.gguf", "/m/good.gguf", "ngram-mod"


def config(tmp_path: Path, **settings):
    data = {"name": "design", "hardware": "box", "backend": "llamacpp", "targets": [{"label": "7B", "path": TARGET}],
            "drafts": [{"label": "good", "path": GOOD}],
            "candidates": [{"label": NGRAM, "method": NGRAM}],
            "settings": {"runs": 3, "max_tokens": 64, "prompts": ["code", "json", "prose"], "port": 0, **settings}}
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

def test_blocks_are_repetitions_or_halves_and_never_repeat_a_prompt():
    categories = ["code", "json", "prose", "code"]
    three = blocks(categories, runs=3)
    assert [sorted(i for _, i in b) for b in three] == [[0, 1, 2, 3]] * 3 and {r for r, _ in three[2]} == {2}
    halves = blocks(categories, runs=1)
    assert len(halves) == 2 and sorted(i for b in halves for _, i in b) == [0, 1, 2, 3]
    assert all(len({i for _, i in b}) == len(b) for b in three + halves)      # a prompt once per block
    assert blocks(["code"], runs=1) == [[(0, 0)]]


def test_abba_alternates_who_goes_first_and_pairs_every_prompt():
    order = abba([(0, 0), (0, 1), (0, 2), (0, 3)])
    assert [(r.side.value[0], r.prompt) for r in order] == [("b", 0), ("c", 0), ("c", 1), ("b", 1),
                                                           ("b", 2), ("c", 2), ("c", 3), ("b", 3)]


def test_passes_reverse_the_candidates_and_brackets_share_their_baselines():
    pairs = [(0, 0), (0, 1)]
    interleaved = pass_steps(Design.INTERLEAVED, 1, pairs, ["a", "b", "c"])
    assert [s.candidate for s in interleaved] == ["c", "b", "a"] and all(s.kind is Kind.PAIRED for s in interleaved)
    bracketed = pass_steps(Design.BRACKETED, 0, pairs, ["a", "b"])
    assert [(s.kind.value, s.candidate) for s in bracketed] == [("baseline", None), ("candidate", "a"),
                                                                ("baseline", None), ("candidate", "b"),
                                                                ("baseline", None)]


def test_what_each_design_costs_against_the_sequential_order():
    block_pairs = blocks(["code", "json", "prose"], runs=3)
    names = ["a", "b"]
    seq = cost(sweep_steps(Design.SEQUENTIAL, block_pairs, names), warmup=1)
    assert (seq.loads, seq.requests) == (3, 27)
    stateful = cost(sweep_steps(Design.SEQUENTIAL, block_pairs, names, frozenset({"b"})), warmup=1)
    assert (stateful.loads, stateful.requests) == (5, 27)         # a stateful method: a server per block
    inter = cost(sweep_steps(Design.INTERLEAVED, block_pairs, names), warmup=1)
    assert (inter.loads, inter.requests, inter.warmups) == (12, 36, 12)
    brack = cost(sweep_steps(Design.BRACKETED, block_pairs, names), warmup=1)
    assert (brack.loads, brack.requests) == (15, 45)
    assert is_stateful(("ngram-mod",)) and is_stateful(("draft-simple", "ngram-cache"))
    assert not is_stateful(("ngram-simple",)) and not is_stateful(("draft-simple",))


# --------------------------------------------------------------------------- the sweep runs it

def test_interleaved_requests_alternate_between_two_servers_up_together(tmp_path):
    backend, results = run(tmp_path)
    baseline = results.baseline_for("7B")
    good = next(r for r in results.results if r.draft == "good")
    assert good.design["name"] == "interleaved" and good.design["blocks"] == 3 and good.design["sessions"] == 4
    # three blocks, then (the best estimate) a confirmation block on fresh servers: block 3, repetition 3
    assert [r.block for r in good.requests] == [0] * 3 + [1] * 3 + [2] * 3 + [3] * 3
    assert {r.run for r in good.requests if r.block == 3} == {3} and good.design["confirmation_block"] == 3
    assert good.confirmed.significant and good.confirmed.n_pairs == 3 and good.speedup.n_pairs == 9
    for r in good.requests:
        partner = [b for b in baseline.requests if b.session in r.compared_with and (b.prompt_id, b.run) == (r.prompt_id, r.run)]
        assert len(partner) == 1                      # one baseline request, measured beside it
    # ABBA on the wire: per pair of servers, measured requests alternate (warm-ups first)
    first_pair = [(n, who) for n, who, _text, seed in backend.sent if seed >= 0 and n in (1, 2)
                  and seed != request_seed(42, -1, 0)]
    assert [who for _, who in first_pair] == [None, GOOD, GOOD, None, None, GOOD]
    assert results.summary["server_loads"] == 12 + 2
    entry = results.summary["targets"][0]
    assert entry["recommended_draft"] == "good" and entry["speedup"] == good.confirmed.to_dict()
    assert "confirmed on fresh requests" in entry["verdict"]


def test_the_warm_up_never_shares_a_prompt_with_the_measured_set(tmp_path):
    backend, _results = run(tmp_path)
    measured = {p.text for p in BUILTIN_PROMPTS if p.category in ("code", "json", "prose")}
    warmups = [text for _n, _who, text, seed in backend.sent if seed == request_seed(42, -1, 0)]
    assert warmups and len(warmups) == len(backend.servers) and not set(warmups) & measured
    assert not {w.text for w in warmup_prompts(BUILTIN_PROMPTS, 3)} & {p.text for p in BUILTIN_PROMPTS}
    # one prompt per block per server: no measured prompt reaches a server twice
    per_server: dict[int, list[str]] = {}
    for n, _who, text, seed in backend.sent:
        if seed != request_seed(42, -1, 0):
            per_server.setdefault(n, []).append(text)
    assert all(len(texts) == len(set(texts)) for texts in per_server.values())


def test_a_stateful_method_never_sees_a_prompt_twice_and_says_so_per_request(tmp_path):
    _backend, results = run(tmp_path, design="sequential")
    ngram = next(r for r in results.results if r.draft == NGRAM)
    good = next(r for r in results.results if r.draft == "good")
    assert ngram.design["stateful"] is True and len({r.session for r in ngram.requests}) == 3
    assert all(r.seen_before is False for r in ngram.requests)
    stage = [r for r in good.requests if r.block != good.design["confirmation_block"]]
    assert len({r.session for r in stage}) == 1                   # upstream's order: one server for the draft
    assert good.design["drift_prone"] is True and good.requests[0].compared_with is None
    confirming = [r for r in good.requests if r.block == good.design["confirmation_block"]]
    assert len({r.session for r in confirming}) == 1 and len(confirming) == 3   # its own fresh baseline first


def test_bracketed_candidates_compare_with_the_baselines_before_and_after(tmp_path):
    backend, results = run(tmp_path, design="bracketed")
    good = next(r for r in results.results if r.draft == "good")
    ngram = next(r for r in results.results if r.draft == NGRAM)
    assert all(len(r.compared_with) == 2 for r in good.requests + ngram.requests)
    # neighbours share the baseline between them: block 1 is B good B ngram B
    first = {tuple(r.compared_with) for r in good.requests if r.block == 0}
    second = {tuple(r.compared_with) for r in ngram.requests if r.block == 0}
    assert len(first) == len(second) == 1 and next(iter(first))[1] == next(iter(second))[0]
    assert results.summary["server_loads"] == 3 * 5 + 3 and all(s.stopped for s in backend.servers)  # + B C B
    assert good.speedup.ratio == pytest.approx(1.5, abs=0.01)


def test_dry_run_says_which_design_runs_and_what_it_costs(tmp_path):
    from helpers import run_cli, tiny_gguf
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"name": "d", "hardware": "box", "backend": "llamacpp",
                                "targets": [{"label": "7B", "path": str(tiny_gguf(tmp_path / "t.gguf"))}],
                                "candidates": [{"label": NGRAM, "method": NGRAM}],
                                "settings": {"runs": 3, "prompts": ["code", "json"], "gpu_layers": 0,
                                             "design": "bracketed"}}))
    proc = run_cli("sweep.py", "--config", str(path), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "Design for 7B: bracketed (a baseline block before and after every candidate block)" in proc.stdout
    assert "3 block(s) per candidate" in proc.stdout and "9 server loads, 18 requests" in proc.stdout
    assert "(+5 loads, +6 requests against the sequential order, which is drift-prone)" in proc.stdout
    proc = run_cli("sweep.py", "--config", str(path), "--dry-run", "--design", "sequential")
    assert "Design for 7B: sequential" in proc.stdout and "drift-prone" in proc.stdout
