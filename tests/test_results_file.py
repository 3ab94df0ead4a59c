"""draftbench.results.file: the results-file schema, round trips, upstream files and atomic saves."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from dataclasses import fields
from pathlib import Path

import pytest
from draftbench.common.errors import ResultsFileError
from draftbench.results import file as results_mod
from draftbench.results.file import (
    SCHEMA_VERSION,
    UPSTREAM_ROW_KEYS,
    RequestRecord,
    ResultsFile,
    Row,
    StoredSummary,
    load_results,
    save_results,
)
from draftbench.results.findings import Code, Finding
from draftbench.results.json_types import INT, declarations, declare
from draftbench.results.kinds import Role, Status
from draftbench.results.schema import format_snapshot
from draftbench.results.speedup import Speedup
from draftbench.results.theory import Theory

GOLDEN = Path(__file__).parent / "golden" / "results_keys.json"
from helpers import REFERENCE  # noqa: E402

REFERENCE_FILES = sorted(REFERENCE.glob("*.json")) if REFERENCE.is_dir() else []


def full_row() -> Row:
    req = RequestRecord(prompt_id="code-bst", category="code", run=0, ttft_s=0.12, total_s=3.4, decode_tps=55.5,
                        server_decode_tps=56.0, prompt_tokens=40, completion_tokens=180, draft_n=120,
                        draft_n_accepted=90, verify_steps=40, finish_reason="length", text="class BST:", error=None)
    return Row(target="7B Q4_K_M", draft="0.5B Q8_0", mean_tps=55.5, median_tps=55.5, mean_ttft=0.12,
               mean_total_time=3.4, wall_time=12.0, acceptance_rate=0.75, status="ok", role="speculative",
               draft_max=8, target_path="/m/t.gguf", draft_path="/m/d.gguf", speculation_active=True, draft_n=120,
               draft_n_accepted=90, verify_steps=40, mean_accepted_len=3.25, tps={"n": 1, "mean": 55.5},
               server_tps={"n": 1, "mean": 56.0}, ttft_s={"n": 1}, total_s={"n": 1}, load_time_s=2.5,
               run_to_run_cv=0.03, by_category={"code": {"n": 1, "mean_tps": 55.5, "acceptance_rate": 0.75}},
               speedup={"ratio": 1.4, "significant": True}, equivalence={"checked": True},
               theory={"alpha": 0.8}, warnings=("w1", "w2"), server={"backend": "llamacpp", "port": 8080},
               started_at="2025-01-01T00:00:00+00:00", requests=(req,), extra={"future_field": [1, 2]})


def full_file() -> ResultsFile:
    baseline = Row(target="7B Q4_K_M", mean_tps=40.0, role="baseline")
    return ResultsFile(name="demo", hardware="box", backend="llamacpp", model_family="Qwen2.5",
                       settings={"runs": 3, "max_tokens": 128}, results=(baseline, full_row()),
                       timestamp="2025-01-01T00:00:00+00:00", tool_version="0.1.0", config={"targets": []},
                       host={"os": "linux"}, summary=StoredSummary({"targets": []}), extra={"note": "kept"})


# --------------------------------------------------------------------------- schema lock

def parent(path: str) -> str:
    return path[:max(path.rfind("."), path.rfind("[]"))]


def test_the_format_of_this_schema_version_is_locked_by_the_golden_snapshot():
    """The snapshot is derived from the declarations. Within a schema version a key may be added,
    optional, but none removed, renamed, moved, retyped or given another unit: a file written before
    must read the same. A deliberate change bumps SCHEMA_VERSION (where old files would be read
    wrongly, handled in from_dict) and writes a new snapshot with DRAFTBENCH_UPDATE_GOLDEN=1."""
    now = format_snapshot()
    if os.environ.get("DRAFTBENCH_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(now, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert golden["schema_version"] == SCHEMA_VERSION, \
        "a new schema version: rerun with DRAFTBENCH_UPDATE_GOLDEN=1 and review the diff of " + str(GOLDEN)
    assert now["upstream_row_keys"] == golden["upstream_row_keys"] == now["row_keys"][:len(UPSTREAM_ROW_KEYS)]
    for keys in ("row_keys", "request_keys", "file_keys", "upstream_file_keys"):
        assert [k for k in now[keys] if k in golden[keys]] == golden[keys], f"{keys}: a key was removed or moved"
    changed = {path: (was, now["types"].get(path, "removed")) for path, was in golden["types"].items()
               if now["types"].get(path) != was}
    assert not changed, f"keys whose type or unit changed (was, now): {changed}"
    added = set(now["types"]) - set(golden["types"])
    required = [path for path in added if ", required" in now["types"][path] and parent(path) in golden["types"]]
    assert not required, f"new keys in objects that files already hold must be optional: {required}"


def test_every_field_of_a_stored_class_is_declared():
    """An undeclared field would never reach the file; declarations() refuses such a class."""
    for cls in (Row, RequestRecord, ResultsFile, Speedup, Theory, Finding):
        assert set(declarations(cls)) == {f.name for f in fields(cls)} - {"extra"}

    @dataclasses.dataclass(frozen=True)
    class Forgotten:
        kept: int | None = declare(INT)
        lost: int | None = None

    with pytest.raises(TypeError, match="declare lost"):
        declarations(Forgotten)


# --------------------------------------------------------------------------- round trips

def test_row_round_trip():
    row = full_row()
    data = row.to_dict()
    assert data["future_field"] == [1, 2] and "extra" not in data
    assert [w["message"] for w in data["warnings"]] == ["w1", "w2"] and isinstance(data["requests"], list)
    back = Row.from_dict(json.loads(json.dumps(data)))
    assert back == row
    assert back.requests[0] == row.requests[0]


def test_schema_1_warnings_are_read_as_text_findings():
    data = full_row().to_dict()
    data["warnings"] = ["only one run per prompt", {"code": "one_run", "message": "typed", "setting": "settings.runs"}]
    row = Row.from_dict(data)
    assert [(w.code, w.message, w.setting) for w in row.warnings] == [
        (Code.LEGACY, "only one run per prompt", None), (Code.ONE_RUN, "typed", "settings.runs")]


def test_rows_validate_role_and_status():
    with pytest.raises(ValueError, match="role 'draft'"):
        Row(target="t", role="draft")
    with pytest.raises(ValueError, match="status 'done'"):
        Row(target="t", status="done")


def test_role_and_status_are_members_that_read_and_print_as_the_files_text():
    row = Row.from_dict({"target": "t", "draft": "d", "role": "speculative", "status": "eliminated"})
    assert row.role is Role.SPECULATIVE and row.status is Status.ELIMINATED
    assert Row(target="t").role is Role.BASELINE and Row(target="t", status="error").status is Status.ERROR
    assert Row.from_dict({"target": "t", "error": "server_failed"}).status is Status.ERROR   # upstream's marker
    # shown as the file's text everywhere (Python 3.11 would print a plain str-Enum as "Role.SPECULATIVE")
    assert (f"{row.role}: {row.status:>12}", str(row.role)) == ("speculative:   eliminated", "speculative")
    data = json.loads(json.dumps(row.to_dict()))
    assert (data["role"], data["status"]) == ("speculative", "eliminated") and Row.from_dict(data) == row


def test_request_record_round_trip_ignores_unknown_keys():
    rec = full_row().requests[0]
    assert RequestRecord.from_dict(rec.to_dict()) == rec
    assert RequestRecord.from_dict({**rec.to_dict(), "new": 1}) == rec


def test_results_file_round_trip(tmp_path):
    rf = full_file()
    assert ResultsFile.from_dict(json.loads(json.dumps(rf.to_dict()))) == rf
    path = tmp_path / "r.json"
    save_results(rf, path)
    loaded = load_results(path)
    assert loaded == rf
    assert loaded.extra == {"note": "kept"} and not loaded.is_upstream
    # saving what was loaded writes the same bytes
    first = path.read_bytes()
    save_results(loaded, path)
    assert path.read_bytes() == first


def test_unknown_row_keys_survive_a_save(tmp_path):
    data = full_file().to_dict()
    data["results"][0]["from_a_newer_minor_version"] = {"x": 1}
    path = tmp_path / "r.json"
    save_results(ResultsFile.from_dict(data), path)
    assert json.loads(path.read_text())["results"][0]["from_a_newer_minor_version"] == {"x": 1}


def test_row_identity_and_flags():
    row = full_row()
    assert row.key == ("speculative", "7B Q4_K_M", "0.5B Q8_0", 8)
    assert row.ok and row.is_speculative and row.counts_as_speedup()
    assert not dataclasses.replace(row, speculation_active=False).counts_as_speedup()
    assert not dataclasses.replace(row, status="error").counts_as_speedup()
    assert not Row(target="t").counts_as_speedup()
    assert dataclasses.replace(row, speculation_active=None).counts_as_speedup()   # unknown (upstream) is not "inactive"


def test_with_row_replaces_by_key_and_keeps_order():
    rf = full_file()
    new = dataclasses.replace(full_row(), mean_tps=99.0)
    rf2 = rf.with_row(new)
    assert len(rf2.results) == 2 and rf2.results[1].mean_tps == 99.0
    rf3 = rf2.with_row(Row(target="other"))
    assert [r.target for r in rf3.results] == ["7B Q4_K_M", "7B Q4_K_M", "other"]
    assert rf3.baseline_for("7B Q4_K_M").role == "baseline"
    assert rf3.row(("baseline", "other", None, None)).target == "other"
    assert rf.results[1].mean_tps == 55.5   # frozen: the original is unchanged


def checked_sources() -> list[dict]:
    """Parsed results files of every kind: this tool's (analysed: speed-ups by category, theory, diagnoses),
    upstream's (failure markers, no roles), schema 1 (warnings as text), unknown keys."""
    from share_data import box_a
    analysed = json.loads(json.dumps(box_a().to_dict()))
    legacy = {"results": [{"target": "T", "draft": "D", "error": "server_failed", "warnings": ["text"]},
                          {"target": "T", "draft": "D", "status": "error", "error": "kept", "role": "speculative"},
                          {"target": "T", "draft": None, "mean_tps": 10.0, "speedup": None, "future": {"a": 1}},
                          {"target": "T", "draft": "E", "diagnosis": {"code": "early_rejections", "message": "m"},
                           "speedup_by_category": {"code": {"ratio": 1.1, "ci95_low": 1.0, "ci95_high": 1.2}},
                           "speedup_in_session": {"ratio": 0.9}, "theory": {"alpha": 0.5, "unknown": 1},
                           "requests": [{"prompt_id": "p", "category": "c", "run": 0, "new_key": 2}]}]}
    files = [analysed, json.loads(json.dumps(full_file().to_dict())), legacy]
    return files + [json.loads(path.read_text()) for path in REFERENCE_FILES]


def test_rows_built_from_a_checked_file_equal_rows_built_by_the_constructors():
    """Loading checks each value once (the schema walk) and builds rows without their constructors: the rows
    are the same, field by field and type by type (members, Speedup, Theory, Finding, RequestRecord)."""
    from draftbench.results.schema import first_problem

    def typed(row: Row) -> dict:
        return {name: (type(value), value) for name, value in vars(row).items()}

    compared = 0
    for data in checked_sources():
        assert first_problem(data) is None
        for raw in data["results"]:
            checked, built = Row.from_checked(raw), Row.from_dict(raw)
            assert typed(checked) == typed(built)
            assert [type(r) for r in checked.requests] == [RequestRecord] * len(built.requests)
            assert checked.to_dict() == built.to_dict()
            compared += 1
    assert compared >= 9


def test_a_checked_row_still_has_its_rule_between_fields_checked_and_stays_frozen():
    with pytest.raises(ValueError, match="needs both ci95_low and ci95_high"):
        Row.from_checked({"target": "T", "speedup_in_session": {"ratio": 1.1, "ci95_low": 1.0}})
    row = Row.from_checked({"target": "T"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.target = "U"        # type: ignore[misc]
    assert row == Row(target="T") and row.extra == {} and row.extra is not Row.from_checked({"target": "T"}).extra


# --------------------------------------------------------------------------- upstream files

@pytest.mark.skipif(not REFERENCE_FILES, reason="upstream reference files not present")
@pytest.mark.parametrize("path", REFERENCE_FILES, ids=lambda p: p.name)
def test_upstream_reference_files_load_with_every_row(path):
    raw = json.loads(path.read_text())
    assert "schema_version" not in raw
    rf = load_results(path)
    assert rf.is_upstream and rf.schema_version is None and rf.tool is None
    assert len(rf.results) == len(raw["results"])
    for row, src in zip(rf.results, raw["results"]):
        for key in UPSTREAM_ROW_KEYS:
            assert getattr(row, key) == src.get(key), key
        assert row.role == ("baseline" if src["draft"] is None else "speculative")
        if row.role == "speculative":
            assert row.speculation_active is None   # upstream never checked; not claimed either way
    assert (rf.name, rf.hardware, rf.backend, rf.model_family) == (raw["name"], raw["hardware"], raw["backend"],
                                                                   raw["model_family"])
    assert rf.settings == raw["settings"]


@pytest.mark.skipif(not REFERENCE_FILES, reason="upstream reference files not present")
def test_upstream_file_saves_without_claiming_a_schema(tmp_path):
    rf = load_results(REFERENCE_FILES[0])
    out = tmp_path / "copy.json"
    save_results(rf, out)
    data = json.loads(out.read_text())
    assert "schema_version" not in data and "tool" not in data
    again = load_results(out)
    assert again.is_upstream and len(again.results) == len(rf.results)


def test_upstream_error_rows_become_error_status():
    data = {"name": "x", "results": [{"target": "T", "draft": "D", "error": "server_failed"},
                                     {"target": "T", "draft": None, "mean_tps": 10.0}]}
    rf = ResultsFile.from_dict(data)
    err, base = rf.results
    assert err.status == "error" and err.reason == "server_failed" and not err.ok and "error" not in err.extra
    assert err.role == "speculative" and base.role == "baseline" and base.ok
    assert rf.hardware == "unknown" and rf.backend == "unknown"


# --------------------------------------------------------------------------- atomic save

def temp_files(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_save_leaves_no_temp_files_and_creates_folders(tmp_path):
    path = tmp_path / "deep" / "er" / "r.json"
    save_results(full_file(), path)
    assert path.is_file() and temp_files(path.parent) == []
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    save_results(full_file(), path)
    before = path.read_bytes()

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(results_mod.os, "fsync", disk_full)
    with pytest.raises(ResultsFileError) as info:
        save_results(full_file().with_row(Row(target="new")), path)
    assert "no space left on the device" in str(info.value) and "left untouched" in str(info.value)
    assert info.value.fix
    assert path.read_bytes() == before
    assert temp_files(tmp_path) == []


def test_failed_replace_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    save_results(full_file(), path)
    before = path.read_bytes()

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(results_mod.os, "replace", refuse)
    with pytest.raises(ResultsFileError):
        save_results(full_file().with_row(Row(target="new")), path)
    assert path.read_bytes() == before and temp_files(tmp_path) == []


def test_interrupt_during_save_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    save_results(full_file(), path)
    before = path.read_bytes()

    def ctrl_c(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(results_mod.os, "fsync", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        save_results(full_file().with_row(Row(target="new")), path)
    assert path.read_bytes() == before and temp_files(tmp_path) == []


def test_unserialisable_results_do_not_touch_the_old_file(tmp_path):
    path = tmp_path / "r.json"
    save_results(full_file(), path)
    before = path.read_bytes()
    with pytest.raises(TypeError):
        save_results(full_file().with_row(Row(target="bad", tps={"x": object()})), path)
    assert path.read_bytes() == before and temp_files(tmp_path) == []


def test_save_keeps_permissions(tmp_path):
    path = tmp_path / "r.json"
    save_results(full_file(), path)
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask   # not mkstemp's private 0600
    os.chmod(path, 0o640)
    save_results(full_file(), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_save_onto_a_folder_is_a_clear_error(tmp_path):
    (tmp_path / "r.json").mkdir()
    with pytest.raises(ResultsFileError, match="cannot write results file"):
        save_results(full_file(), tmp_path / "r.json")
    assert temp_files(tmp_path) == []


# --------------------------------------------------------------------------- unusable files

def write(tmp_path: Path, text: str | bytes, name: str = "r.json") -> Path:
    p = tmp_path / name
    (p.write_bytes if isinstance(text, bytes) else p.write_text)(text)
    return p


@pytest.mark.parametrize("content,expected", [
    ("", "not valid JSON (line 1, column 1"),
    ('{"results": [}', "not valid JSON (line 1, column 14"),
    ("[1, 2]", 'not a draftbench results file (no "results" list)'),
    ('{"name": "x"}', 'no "results" list'),
    ('{"results": {}}', 'no "results" list'),
    ('{"results": [{"draft": "D"}]}', "$.results[0].target is missing"),
    ('{"results": [{"target": "T"}, 5]}', "$.results[1] must be an object, not integer 5"),
    ('{"results": [{"target": "T", "requests": [{"category": "c"}]}]}', "$.results[0].requests[0].prompt_id is missing"),
    ('{"schema_version": "one", "results": []}', "schema_version 'one' is not a valid version number"),
    ('{"schema_version": true, "results": []}', "is not a valid version number"),
    ('{"schema_version": 999, "results": []}', "written by a newer draftbench (results schema 999"),
    ('{"schema_version": 1, "tool": "other", "results": []}', "written by 'other', not draftbench"),
])
def test_unusable_files_raise_a_clear_error(tmp_path, content, expected):
    path = write(tmp_path, content)
    with pytest.raises(ResultsFileError) as info:
        load_results(path)
    assert expected in info.value.message
    assert str(path) in info.value.message
    assert info.value.fix
    assert path.read_text() == content   # never modified


def test_missing_folder_and_binary_files(tmp_path):
    with pytest.raises(ResultsFileError, match="does not exist"):
        load_results(tmp_path / "nope.json")
    with pytest.raises(ResultsFileError, match="is a folder"):
        load_results(tmp_path)
    with pytest.raises(ResultsFileError, match="is not UTF-8 text"):
        load_results(write(tmp_path, b"\xff\xfe\x00garbage", "bin.json"))


def test_null_header_fields_get_defaults_and_wrong_types_are_refused():
    rf = ResultsFile.from_dict({"name": None, "hardware": None, "settings": None, "results": []})
    assert (rf.name, rf.hardware, rf.settings) == ("unnamed", "unknown", {})
    with pytest.raises(ResultsFileError, match=r"\$\.name must be a string or null, not integer 5"):
        ResultsFile.from_dict({"name": 5, "results": []})
    with pytest.raises(ResultsFileError, match=r"\$\.settings must be an object or null, not a list"):
        ResultsFile.from_dict({"settings": [], "results": []})
