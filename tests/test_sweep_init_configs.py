"""sweep.py --init MODELS_DIR --config-dir OUT (issue 25): one config per model family, never pairing across
families, every file left out named with why, nothing overwritten; each config accepted by --dry-run."""

from __future__ import annotations

import json
import os
from pathlib import Path

from draftbench.common.gguf import GGUFInfo
from draftbench.config.settings import DEFAULTS
from draftbench.sweep.config_file import load_config, validate_config
from draftbench.sweep.init_configs import EDITABLE_SETTINGS, Family, Model, config_for

from helpers import run_cli

NGRAM = ["draft-simple", "draft-eagle3", "draft-mtp", "ngram-simple", "ngram-mod"]


def info(arch: str, params: int, **metadata) -> GGUFInfo:
    return GGUFInfo("x", 3, {"general.architecture": arch, **metadata}, 10, params, 0, 1)


def test_mtp_layers_and_eagle_heads_become_candidates():
    family = Family([Model(Path("/m/big.gguf"), info("glm4moe", 9_000_000_000, **{"glm4moe.nextn_predict_layers": 1})),
                     Model(Path("/m/small.gguf"), info("glm4moe", 1_000_000_000)),
                     Model(Path("/m/head.gguf"), info("eagle3", 200_000_000))])
    config, notes = config_for(family, spec_types=NGRAM, hardware="box", name="glm")
    assert [t["label"] for t in config["targets"]] == ["big"] and [d["label"] for d in config["drafts"]] == ["small"]
    assert config["candidates"] == [
        {"label": "ngram-simple", "method": "ngram-simple"}, {"label": "ngram-mod", "method": "ngram-mod"},
        {"label": "mtp", "method": "draft-mtp"},
        {"label": "head", "method": "draft-eagle3", "draft": {"label": "head (head)", "path": "/m/head.gguf"}}]
    assert any("multi-token prediction" in n for n in notes)
    # a binary without those types: said, not offered
    config, notes = config_for(family, spec_types=["ngram-mod"], hardware="box", name="glm")
    assert [c["label"] for c in config["candidates"]] == ["ngram-mod"]
    assert any("offers no draft-mtp" in n for n in notes) and any("offers no draft-eagle3" in n for n in notes)


def test_a_written_config_draws_no_warning_and_holds_the_editable_keys_at_their_defaults(tmp_path):
    """What --init writes is what the loader accepts without a word: no settings.runs (precision comes from
    stages), the keys people edit in view at the values a config without them gets."""
    family = Family([Model(tmp_path / "big.gguf", info("qwen2", 7_000_000_000)),
                     Model(tmp_path / "small.gguf", info("qwen2", 500_000_000))])
    config, _ = config_for(family, spec_types=NGRAM, hardware="box", name="qwen")
    checked = validate_config(json.loads(json.dumps(config)), source="qwen.json", base_dir=str(tmp_path))
    assert checked.warnings == ()
    assert "runs" not in config["settings"] and config["settings"] == DEFAULTS.values_of(EDITABLE_SETTINGS)
    assert checked.settings.to_dict().items() >= DEFAULTS.values_of(EDITABLE_SETTINGS).items()


def test_quantisations_of_the_largest_are_all_targets_and_never_each_others_drafts():
    family = Family([Model(Path("/m/7b-q4.gguf"), info("qwen2", 7_000_000_000)),
                     Model(Path("/m/7b-q8.gguf"), info("qwen2", 7_000_000_000)),
                     Model(Path("/m/0.5b.gguf"), info("qwen2", 500_000_000))])
    config, _ = config_for(family, spec_types=[], hardware="box", name="qwen")
    assert {t["label"] for t in config["targets"]} == {"7b-q4", "7b-q8"}
    assert [d["label"] for d in config["drafts"]] == ["0.5b"]


def _folder(tmp_path: Path, models: dict) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    for key in ("target-2x", "base", "draft-trunc", "draft-badvocab", "other-family-trunc", "corrupt"):
        os.symlink(models[key], folder / Path(models[key]).name)
    return folder


def test_two_families_and_a_truncated_file(models, tmp_path):
    folder, out = _folder(tmp_path, models), tmp_path / "configs"
    proc = run_cli("sweep.py", "--init", str(folder), "--config-dir", str(out), timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    configs = {p.name: json.loads(p.read_text()) for p in sorted(out.glob("*.json"))}
    assert len(configs) == 2
    family_a = {Path(models[k]).name for k in ("target-2x", "base", "draft-trunc")}
    family_b = {Path(models[k]).name for k in ("draft-badvocab", "other-family-trunc")}
    for config in configs.values():
        files = {Path(m["path"]).name for m in config["targets"] + config["drafts"]}
        assert files in (family_a, family_b)        # never a pair across families
        assert {c["method"] for c in config["candidates"]} >= {"ngram-mod", "ngram-simple"}
    by_target = {c["targets"][0]["label"]: c for c in configs.values()}
    assert [d["label"] for d in by_target["smollm2-target-2x.Q4_1"]["drafts"]] == [
        "SmolLM2-135M-Instruct.Q4_1", "smollm2-trunc8.Q4_1"]                # smaller, largest first
    assert [d["label"] for d in by_target["smollm2-badvocab.Q4_1"]["drafts"]] == ["otherfamily-trunc8.Q4_1"]
    assert "Left out:" in proc.stdout and "corrupt-truncated.gguf: is truncated" in proc.stdout
    # each one is accepted by --dry-run (the same model checks as the run), and without a warning about itself
    proc = run_cli("sweep.py", "--config-dir", str(out), "--dry-run", timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count(": valid.") == 2 and "Warning: $" not in proc.stdout
    assert all(load_config(str(p)).warnings == () for p in out.glob("*.json"))
    # and nothing is written over
    before = {p: p.read_text() for p in out.glob("*.json")}
    proc = run_cli("sweep.py", "--init", str(folder), "--config-dir", str(out), timeout=300, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("Error: --init would overwrite ")
    assert {p: p.read_text() for p in out.glob("*.json")} == before


def test_init_needs_a_config_dir_and_nothing_else(tmp_path):
    proc = run_cli("sweep.py", "--init", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2 and "--init MODELS_DIR writes configs into --config-dir OUT" in proc.stderr
    proc = run_cli("sweep.py", "--init", str(tmp_path / "nope"), "--config-dir", str(tmp_path / "o"), cwd=tmp_path)
    assert proc.returncode == 2 and "is not a folder" in proc.stderr
