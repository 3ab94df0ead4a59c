"""A cap on combinations, counted without expanding them; concurrency within what can be in flight;
a --dry-run plan that fits on a screen. No server is started here (the llama_bin is a tripwire)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from draftbench.common.errors import ConfigError
from draftbench.config import candidates
from draftbench.sweep import plan
from draftbench.sweep.cap import count
from draftbench.sweep.config_file import load_config, validate_config

from helpers import run_cli, tiny_gguf


def config(tmp_path: Path, *, params: dict | None = None, name: str = "c.json", drafts: int = 0,
           **settings) -> Path:
    data = {"name": "cap", "hardware": "h", "targets": [{"label": "T", "path": "t.gguf"}],
            "drafts": [{"label": f"D{i}", "path": f"d{i}.gguf"} for i in range(drafts)],
            "candidates": [{"label": "ng", "method": "ngram-mod", "params": params}] if params else [],
            "settings": {"llama_bin": str(tmp_path / "no-such-llama-server")} | settings}
    for model in ["t.gguf"] + [f"d{i}.gguf" for i in range(drafts)]:     # the dry run checks them
        tiny_gguf(tmp_path / model)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def lists(n: int, values: int = 10) -> dict:
    return {f"ngram_mod_p{i}": list(range(1, values + 1)) for i in range(n)}


def test_a_million_combinations_are_refused_without_being_expanded(tmp_path, monkeypatch):
    def expand_nothing(spec):
        raise AssertionError("the candidates were expanded")
    monkeypatch.setattr(candidates, "expand", expand_nothing)
    monkeypatch.setattr("draftbench.sweep.config_file.expanded_label_problems", lambda specs: expand_nothing(None))
    with pytest.raises(ConfigError) as err:
        load_config(config(tmp_path, params=lists(6)))
    text = str(err.value)
    assert "$.settings.max_combinations" in text and "1,000,001 combinations" in text
    assert "ngram_mod_p0 (10 values) × ngram_mod_p1 (10 values)" in text and "= 1,000,000 candidates" in text
    assert "settings.max_combinations goes up to 1,000,000 at most, so split the sweep" in text


def test_eight_lists_are_one_clear_error_not_a_memory_error(tmp_path):
    proc = run_cli("sweep.py", "--config", str(config(tmp_path, params=lists(8))), "--dry-run", timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "100,000,001 combinations" in proc.stderr and "split the sweep into several configs" in proc.stderr
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr and proc.stdout == ""


def test_the_cap_is_a_setting(tmp_path):
    path = config(tmp_path, params=lists(3), max_combinations=500)
    with pytest.raises(ConfigError, match=r"1,001 combinations .* more than settings.max_combinations \(500\)"):
        load_config(path)
    assert len(plan(load_config(config(tmp_path, params=lists(3), name="ok.json")))) == 1001   # default 2000
    with pytest.raises(ConfigError, match=r"10,001 combinations .* raise settings.max_combinations to at least 10001"):
        load_config(config(tmp_path, params=lists(4), name="more.json"))
    with pytest.raises(ConfigError, match=r"max_combinations: is 0; must be ≥ 1"):
        load_config(config(tmp_path, max_combinations=0, name="zero.json"))


@pytest.mark.parametrize("settings", [
    {}, {"draft_max": [2, 4, 8]}, {"ceiling": True, "draft_max": [4, 8]}, {"control_baseline": True},
    {"draft_alone": True}, {"concurrency": [1, 2, 4]}, {"concurrency": [2, 4], "ceiling": True},
    {"concurrency": [1, 2], "ceiling": True, "control_baseline": True, "draft_alone": True, "draft_max": [3, 5]},
])
def test_the_count_is_the_plan(tmp_path, settings):
    data = json.loads(config(tmp_path, params={"ngram_mod_n_match": [16, 24], "ngram_mod_n_min": [1, 2, 3]},
                             drafts=2, **settings).read_text())
    data["targets"].append({"label": "T2", "path": "t2.gguf"})
    cfg = validate_config(data, base_dir=str(tmp_path))
    assert count(len(cfg.targets), cfg.specs(), cfg.settings, len(cfg.drafts)).total == len(plan(cfg))


def test_ceiling_from_the_command_line_is_counted_too(tmp_path):
    path = config(tmp_path, drafts=1, draft_max=list(range(1, 257)), concurrency=list(range(1, 8)),
                  prompts=["code"], runs=10)
    assert len(plan(load_config(path))) == 7 * 257          # within the cap; --ceiling adds 2 × 256
    proc = run_cli("sweep.py", "--config", str(path), "--dry-run", "--ceiling", timeout=120)
    assert proc.returncode == 2 and "2,311 combinations" in proc.stderr, proc.stderr


def test_the_dry_run_plan_fits_on_a_screen(tmp_path, llama_bin):
    path = config(tmp_path, drafts=1, draft_max=list(range(1, 257)), llama_bin=llama_bin)   # only its --help is read
    proc = run_cli("sweep.py", "--config", str(path), "--dry-run", timeout=120)
    assert proc.returncode == 0, proc.stderr
    plan_lines = [line for line in proc.stdout.splitlines() if line.startswith("  [")]
    assert len(plan_lines) == 30 and "… and 227 more (add --full-plan to list every combination)" in proc.stdout
    assert "257 combinations" in proc.stdout
    full = run_cli("sweep.py", "--config", str(path), "--dry-run", "--full-plan", timeout=120)
    assert len([line for line in full.stdout.splitlines() if line.startswith("  [")]) == 257
    alone = run_cli("sweep.py", "--config", str(path), "--full-plan", timeout=120)
    assert alone.returncode == 2 and "--full-plan lists the plan of --dry-run" in alone.stderr


def test_more_streams_than_requests_are_refused(tmp_path):
    proc = run_cli("sweep.py", "--config", str(config(tmp_path, concurrency=[1000], prompts=["code"])), "--dry-run",
                   timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "$.settings.concurrency: asks for 1000 requests at once, but each level sends only 1" in proc.stderr
    ok = load_config(config(tmp_path, concurrency=[1, 4], prompts=["code", "json"], runs=2, name="ok.json"))
    assert ok.settings.concurrency == [1, 4]


def test_llama_server_context_for_all_slots_is_bounded(tmp_path):
    path = config(tmp_path, concurrency=[1, 1000], runs=1000, ctx_size=40960)
    with pytest.raises(ConfigError, match=r"would start llama-server with -c 40960000 .* use at most 244 streams"):
        load_config(path)


def test_bench_refuses_more_streams_than_requests(tmp_path):
    proc = run_cli("bench.py", "--url", "http://127.0.0.1:9", "--concurrency", "50", "--prompt", "hi", timeout=120)
    assert proc.returncode == 2 and "--concurrency 50 asks for more requests at once than the 1 it sends" in proc.stderr


def test_a_long_list_is_checked_for_duplicates_in_linear_time(tmp_path):
    with pytest.raises(ConfigError, match=r"draft_max: lists 7 more than once"):
        load_config(config(tmp_path, draft_max=[7] * 200_000, drafts=1))
