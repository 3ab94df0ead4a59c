"""Issue 36, --init: every odd entry of the models folder named (a FIFO, /dev/zero and /dev/stdin links, link
loops, an unreadable folder); no config written that the loader would refuse (a name with a newline, a label with
control characters, more combinations than max_combinations); nothing written through a symlink; an output
folder that cannot be made is a named error (exit 2), never "This is a bug"."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from draftbench.cli import init_cli
from draftbench.cli.sweep_cli import main as sweep_main
from draftbench.common.errors import UsageError
from draftbench.sweep import init_configs
from draftbench.sweep.config_file import load_config

from helpers import run_cli
from test_common_gguf import STRING, U32, forge, vocab_kv

TOKENS = [f"t{i}" for i in range(80)]


def model(folder: Path, name: str, params: int, **kv) -> Path:
    extra = [(k, STRING, v) if isinstance(v, str) else (k, U32, v) for k, v in kv.items()]
    return forge(folder, name, kv=[("general.architecture", STRING, "llama")] + extra + vocab_kv(TOKENS),
                 tensors=[("w", (params,))])


def init(tmp_path: Path, models: Path, out: Path | None = None) -> tuple[int, str]:
    """--init in this process (no llama-server here: drafts only), returning its exit code and output."""
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = sweep_main(["--init", str(models), "--config-dir", str(out or tmp_path / "out")])
    return code, buf.getvalue()


@pytest.fixture(autouse=True)
def no_llama_server(monkeypatch):
    from draftbench.common.errors import BinaryNotFoundError

    def missing(*_a, **_k):
        raise BinaryNotFoundError("llama-server was not found (a test)")
    monkeypatch.setattr(init_cli, "find_llama_server", missing)


def test_every_odd_entry_is_named(tmp_path, monkeypatch):
    models = tmp_path / "models"
    models.mkdir()
    model(models, "big.gguf", 64)
    model(models, "small.gguf", 8)
    os.mkfifo(models / "pipe.gguf")
    os.symlink("/dev/zero", models / "zero.gguf")
    os.symlink("/dev/stdin", models / "stdin.gguf")
    os.symlink("loop-b.gguf", models / "loop-a.gguf")
    os.symlink("loop-a.gguf", models / "loop-b.gguf")
    os.symlink("nowhere.gguf", models / "dangling.gguf")
    os.symlink(str(models), models / "itself")             # a linked folder: not followed
    (models / "locked").mkdir()
    real_scandir = os.scandir

    def scandir(path):          # as root, chmod 000 does not stop reading: what another user sees
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)
    monkeypatch.setattr(init_configs.os, "scandir", scandir)
    code, out = init(tmp_path, models)
    assert code == 0
    left_out = out.split("Left out:")[1]
    for name, why in (("pipe.gguf", "is a named pipe (FIFO), not a model file"),
                      ("zero.gguf", "is a character device, not a model file (it is a link to one)"),
                      ("loop-a.gguf", "is a symbolic link that loops"), ("loop-b.gguf", "is a symbolic link that loops"),
                      ("dangling.gguf", "is a symbolic link to nothing"), ("itself", "is a link to a folder"),
                      ("locked", "is a folder that cannot be read (Permission denied)")):
        assert f"{models / name}: {why}" in left_out, name
    assert f"{models / 'stdin.gguf'}: is " in left_out      # whatever standard input is here, it is named
    assert json.loads((tmp_path / "out" / "llama.json").read_text())["drafts"][0]["label"] == "small"


def test_text_from_headers_and_file_names_is_made_valid_before_it_is_written(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    model(models, "big\x1b[31m.gguf", 64, **{"general.basename": "Evil\nName\x07"})
    model(models, "sm\u202eall\x07.gguf", 8)
    code, out = init(tmp_path, models)
    assert code == 0 and "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    [written] = list((tmp_path / "out").glob("*.json"))
    load_config(written)                               # the loader a sweep uses accepts it
    data = json.loads(written.read_text())
    assert data["model_family"] == "Evil Name"
    assert [t["label"] for t in data["targets"]] == ["big [31m"] and data["drafts"][0]["label"] == "sm all"


def test_a_family_over_max_combinations_is_skipped_with_why(tmp_path, capsys):
    models = tmp_path / "models"
    models.mkdir()
    for i in range(2100):
        model(models, f"m{i:04d}.gguf", 10 + i)
    with pytest.raises(UsageError, match=r"no config written: the config of 1 model family in .* would be refused") \
            as refused:     # it has 2,100 models to compare: not "nothing to compare" (issue 45)
        sweep_main(["--init", str(models), "--config-dir", str(tmp_path / "out")])
    assert "has anything to compare" not in str(refused.value) and "split the models" in refused.value.fix
    out = capsys.readouterr().out
    assert "No config for m2099.gguf, m2098.gguf" in out and "and 2095 more: the config written for them would " \
        "be refused: $.settings.max_combinations: the config makes 2,100 combinations" in out
    assert not list((tmp_path / "out").glob("*.json"))


def test_a_dangling_symlink_in_the_output_folder_is_never_written_through(tmp_path):
    models, out = tmp_path / "models", tmp_path / "out"
    models.mkdir()
    out.mkdir()
    model(models, "big.gguf", 64)
    model(models, "small.gguf", 8)
    os.symlink(tmp_path / "elsewhere.json", out / "llama.json")
    with pytest.raises(UsageError, match="would overwrite"):
        init(tmp_path, models, out)
    assert not (tmp_path / "elsewhere.json").exists() and os.path.islink(out / "llama.json")


@pytest.mark.parametrize("make,cause", [
    (lambda t: (os.symlink(t / "gone", t / "o"), t / "o")[1], "is a symbolic link to"),
    (lambda t: ((t / "f").write_text("x"), t / "f" / "o")[1], "is a file, not a folder"),
    (lambda t: t / ("x" * 300), "300 bytes long"),
])
def test_output_folders_that_cannot_be_made_are_named(tmp_path, make, cause):
    models = tmp_path / "models"
    models.mkdir()
    with pytest.raises(UsageError, match=cause) as info:
        init(tmp_path, models, make(tmp_path))
    assert info.value.exit_code == 2


def test_a_read_only_parent_is_named(tmp_path, monkeypatch):
    models = tmp_path / "models"
    models.mkdir()
    model(models, "big.gguf", 64)
    model(models, "small.gguf", 8)

    def refuse(self, *a, **k):
        raise PermissionError(13, "Permission denied", str(self))
    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(UsageError, match="cannot be created: Permission denied") as info:
        init(tmp_path, models, tmp_path / "ro" / "out")
    assert info.value.exit_code == 2


def test_the_command_itself_exits_2_without_a_traceback(tmp_path):
    os.symlink(tmp_path / "gone", tmp_path / "o")
    proc = run_cli("sweep.py", "--init", str(tmp_path), "--config-dir", str(tmp_path / "o"), timeout=60, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("Error: --config-dir") and "bug" not in proc.stderr


def test_a_folder_nested_deeper_than_the_recursion_limit_is_walked(tmp_path):
    models = deep = tmp_path / "models"
    models.mkdir()
    for _ in range(300):
        deep = deep / "d"
        deep.mkdir()
    (deep / "notes.txt").write_text("x")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(250)       # a walk that recursed would fail here (a tree deeper than the real limit
    try:                             # would also break pytest's own clean-up, which recurses)
        found = init_configs.scan(models)
    finally:
        sys.setrecursionlimit(limit)
    assert found.families == [] and found.left_out == [(deep / "notes.txt", "not a model (not a .gguf file)")]
