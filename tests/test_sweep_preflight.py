"""--dry-run checks every model file and every pair the way the run does (issue 25): a mistyped path, a
file that is not a model and a draft from another family are errors before anything starts (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import run_cli


def write(tmp_path: Path, targets: list, drafts: list) -> Path:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({
        "name": "pre", "hardware": "box", "backend": "llamacpp",
        "targets": [{"label": label, "path": p} for label, p in targets],
        "drafts": [{"label": label, "path": p} for label, p in drafts],
        "settings": {"runs": 1, "max_tokens": 16, "prompts": ["code"], "gpu_layers": 0}}))
    return path


def dry_run(path: Path, tmp_path: Path):
    return run_cli("sweep.py", "--config", str(path), "--results", str(tmp_path / "r.json"), "--dry-run",
                   timeout=120)


def test_a_mistyped_path_and_a_cross_family_pair_are_config_errors(models, tmp_path):
    path = write(tmp_path, [("241M", models["target-2x"])],
                 [("135M", models["base"]), ("typo", str(Path(models["base"]).with_name("SmolLM2-135M.gguf"))),
                  ("other family", models["draft-badvocab"]), ("broken", models["corrupt"]),
                  ("text", models["not-gguf"])])
    proc = dry_run(path, tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr
    assert err.startswith("Error: ") and "Traceback" not in err and "valid." not in proc.stdout
    assert "4 problems in the config (nothing was started)" in err
    assert "$.drafts[1].path: model file" in err and "SmolLM2-135M.gguf does not exist" in err
    assert ("$.drafts[2].path: draft 'other family' with target '241M': the draft cannot speculate for this target "
            "(its vocabulary differs: token 100 differs") in err
    assert "$.drafts[3].path: model file" in err and "is truncated" in err
    assert "$.drafts[4].path: model file" in err and "is not a GGUF file" in err
    assert not (tmp_path / "r.json").exists()


def test_a_config_the_dry_run_accepts_has_no_model_problem(models, tmp_path):
    path = write(tmp_path, [("241M", models["target-2x"])], [("135M", models["base"])])
    proc = dry_run(path, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "valid. 2 combinations" in proc.stdout and "Models (each checked" in proc.stdout
