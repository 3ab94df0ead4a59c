"""Small hostile inputs: terminal escapes, invisible labels, secrets in commands, exposed servers.

Unit tests of the small modules that handle them (text_safety, redact, server_args,
output_paths, results_lock) and of how config validation uses them. No server is needed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from draftbench.common.errors import ConfigError, UsageError
from draftbench.common.redact_secrets import MASK, redact_command
from draftbench.common.text_safety import safe_text, text_problem
from draftbench.config.extra_args import api_key_from_args, check_server_args, is_loopback
from draftbench.results.lock import ResultsInUseError, results_lock
from draftbench.results.output_paths import check_output_paths, lock_paths_for, logs_dir_for
from draftbench.sweep.config_file import validate_config

from helpers import REPO

# ---------------------------------------------------------------------------- safe_text

HOSTILE = [
    "\x1b[31mred\x1b[0m",                   # CSI: colours
    "\x1b]0;pwned\x07",                     # OSC: window title
    "\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\",   # OSC 8 hyperlink
    "\x9b2J",                               # CSI as one C1 byte: clear screen
    "\x9d0;title\x9c",                      # OSC as C1
    "line\rover",                           # carriage return overwrites the line
    "bell\x07", "nul\x00", "del\x7f",
    "abc\u202edcba",                        # right-to-left override
    "\u2066iso\u2069",                      # isolates
    "lone \ud800 surrogate",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_safe_text_leaves_no_control_character(text):
    out = safe_text(text)
    assert not any((ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f for c in out), repr(out)
    assert "\u202e" not in out and "\u2066" not in out
    out.encode("utf-8")                     # printable on any UTF-8 terminal (no lone surrogate)
    assert "\\x" in out or "\\u" in out     # shown, not dropped: a person can see something was there


def test_safe_text_keeps_plain_and_international_text():
    for text in ("7B Q4_K_M", "Qwen2.5 – 72B (ß, 日本語, emoji 🙂)", "two\nlines\tand tab"):
        assert safe_text(text) == text
    assert safe_text("a\nb", keep_newlines=False) == "a\\x0ab"


@pytest.mark.parametrize("label, expected", [
    ("\u200b", "invisible"),                # zero-width space
    ("\u200b\u200c\u200d\u2060", "invisible"),
    ("\u202e\u202d", "invisible"),          # only direction controls
    ("\u3164", "invisible"),                # Hangul filler
    ("\u00a0\u3000", "invisible"),          # no-break and ideographic spaces
    ("a\x85b", "control character"),        # C1 NEL
    ("x\ud800", "lone surrogate"),
])
def test_text_problem_refuses_invisible_controls_and_surrogates(label, expected):
    assert expected in (text_problem(label) or "")


def test_text_problem_accepts_ordinary_labels():
    for label in ("7B Q4_K_M", "Llama 3.1 8B (imatrix)", "模型 7B", "a\u200db"):
        assert text_problem(label) is None


# ---------------------------------------------------------------------------- config validation

def config(**changes) -> dict:
    base = {"name": "x", "hardware": "h", "backend": "llamacpp", "targets": [{"label": "T", "path": "/t.gguf"}],
            "drafts": [], "settings": {}}
    base.update(changes)
    return base


def problems(data: dict) -> list:
    with pytest.raises(ConfigError) as info:
        validate_config(data)
    return info.value.problems


def test_a_300_character_name_is_a_config_error():
    [p] = problems(config(name="n" * 300))
    assert p.path == "$.name" and "300 characters" in p.message and "at most 100" in p.fix


@pytest.mark.parametrize("label", ["\u200b\u200b", "\u202e", "\x9b31m"])
def test_invisible_or_control_labels_are_config_errors(label):
    [p] = problems(config(targets=[{"label": label, "path": "/t.gguf"}]))
    assert p.path == "$.targets[0].label"
    assert "\u202e" not in str(p) and "\x9b" not in str(p)


def test_lone_surrogates_anywhere_are_config_errors_with_their_path():
    data = json.loads('{"name": "x", "targets": [{"label": "T\\ud800", "path": "/t.gguf"}], '
                      '"settings": {"extra_args": ["--x", "\\udfff"]}}')
    found = problems(data)
    assert [p.path for p in found] == ["$.targets[0].label", "$.settings.extra_args[1]"]
    str(found[0]).encode("utf-8")


@pytest.mark.parametrize("extra, path, cause", [
    (["--port", "9000"], "$.settings.extra_args[0]", "sets --port"),
    (["-t", "4", "--port=9000"], "$.settings.extra_args[2]", "sets --port"),
    (["--host", "0.0.0.0"], "$.settings.extra_args[0]", "reachable from other machines"),
    (["--host=192.168.1.5"], "$.settings.extra_args[0]", "reachable from other machines"),
    (["--host", "127.0.0.1,0.0.0.0"], "$.settings.extra_args[0]", "0.0.0.0"),
    (["--host", "/tmp/llama.sock"], "$.settings.extra_args[0]", "UNIX socket"),
])
def test_extra_args_may_not_take_the_port_or_expose_the_server(extra, path, cause):
    [p] = problems(config(settings={"extra_args": extra}))
    assert p.path == path and cause in p.message


def test_per_model_extra_args_are_checked_too():
    [p] = problems(config(targets=[{"label": "T", "path": "/t.gguf", "extra_args": ["--threads", "2", "--port",
                                                                                     "1"]}]))
    assert p.path == "$.targets[0].extra_args[2]"


def test_a_remote_host_needs_allow_remote_and_then_warns():
    [p] = problems(config(settings={"host": "0.0.0.0"}))
    assert p.path == "$.settings.host" and "settings.allow_remote" in p.fix
    cfg = validate_config(config(settings={"host": "0.0.0.0", "allow_remote": True,
                                           "extra_args": ["--host", "::"]}))
    assert len([w for w in cfg.warnings if "reachable from other machines" in str(w)]) == 2
    # loopback needs nothing
    validate_config(config(settings={"extra_args": ["--host", "localhost"], "host": "127.0.0.2"}))


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.9.9.9", True), ("::1", True),
                                            ("[::1]", True), ("localhost", True), ("0.0.0.0", False),
                                            ("::", False), ("10.0.0.1", False), ("example.com", False)])
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_server_args_names_arguments_as_told():
    found, _ = check_server_args("--", ["--port", "1"], allow_remote=False, where=lambda i: f"argument {i + 1}")
    assert found[0].path == "argument 1"


# ---------------------------------------------------------------------------- redact

@pytest.mark.parametrize("cmd, expected", [
    (["srv", "--api-key", "s3cret", "-c", "4"], ["srv", "--api-key", MASK, "-c", "4"]),
    (["srv", "--api-key=s3cret"], ["srv", "--api-key=" + MASK]),
    (["srv", "--api-key-file", "/k"], ["srv", "--api-key-file", MASK]),
    (["srv", "--hf-token", "hf_x", "-hft", "hf_y"], ["srv", "--hf-token", MASK, "-hft", MASK]),
    (["srv", "--ssl-key-file", "k.pem", "--client_secret", "x", "--AUTH-TOKEN", "y"],
     ["srv", "--ssl-key-file", MASK, "--client_secret", MASK, "--AUTH-TOKEN", MASK]),
    # not secrets: plural "tokens", "tokenizer", "keep"; a secret flag used as a switch
    (["srv", "--max-num-batched-tokens", "512", "--tokenizer", "t", "--keep", "4"],
     ["srv", "--max-num-batched-tokens", "512", "--tokenizer", "t", "--keep", "4"]),
    (["srv", "--skip-token-check", "--threads", "4"], ["srv", "--skip-token-check", "--threads", "4"]),
])
def test_redact_command(cmd, expected):
    assert redact_command(cmd) == expected


def test_secret_values_echoed_by_a_server_are_masked_in_its_log_lines():
    from draftbench.common.redact_secrets import redact_text
    cmd = ["vllm", "serve", "m", "--api-key", "k-123,k-456", "--hf-token=hf_abcdef", "--port", "8000"]
    log = "non-default args: {'api_key': ['k-123,k-456'], 'hf_token': 'hf_abcdef', 'port': 8000}\nk-456 again"
    assert redact_text(log, cmd) == "non-default args: {'api_key': ['***'], 'hf_token': '***', 'port': 8000}\n" \
        "*** again"


def test_api_key_is_found_for_our_own_requests(tmp_path):
    assert api_key_from_args(["--api-key", "a,b"]) == "a"
    keys = tmp_path / "keys"
    keys.write_text("# comment\n\nk1\nk2\n")
    assert api_key_from_args(["--api-key-file", str(keys)]) == "k1"
    assert api_key_from_args(["--threads", "2"]) is None


# ---------------------------------------------------------------------------- output paths

def test_output_paths_resolve_symlinks_and_hard_links(tmp_path):
    results = tmp_path / "r.json"
    results.write_text("{}")
    (tmp_path / "link.html").symlink_to(results)
    with pytest.raises(UsageError, match=r"same file \(.*r\.json\)"):
        check_output_paths(results, tmp_path / "link.html")
    os.link(results, tmp_path / "hard.htm")
    with pytest.raises(UsageError, match="same file"):
        check_output_paths(results, tmp_path / "hard.htm")
    config = tmp_path / "c.cfg"
    config.write_text("{}")
    with pytest.raises(UsageError, match="would destroy the config"):
        check_output_paths(results, config, [config])
    check_output_paths(results, tmp_path / "r.html", [config])         # distinct: fine
    assert logs_dir_for(results).name == "r.logs" and [p.name for p in lock_paths_for(results)] == ["r.lock"]


def test_output_paths_that_cannot_work(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="is a file, not a folder"):
        check_output_paths(tmp_path / "file" / "r.json", None)
    with pytest.raises(UsageError, match="bytes long"):
        check_output_paths(tmp_path / ("r" * 251 + ".json"), None)


def test_a_symlinked_results_file_is_locked_through_its_target(tmp_path):
    real = tmp_path / "store" / "real.json"
    (tmp_path / "link.json").symlink_to(real)
    assert lock_paths_for(tmp_path / "link.json") == [tmp_path / "link.lock", tmp_path / "store" / "real.lock"]
    assert lock_paths_for(real) == [tmp_path / "store" / "real.lock"]


def test_results_files_sharing_a_logs_folder_share_a_lock(tmp_path):
    with results_lock(tmp_path / "x.json"), pytest.raises(ResultsInUseError, match="its logs folder"), \
            results_lock(tmp_path / "x.dat"):
        pass
    with results_lock(tmp_path / "store" / "real.json"):
        (tmp_path / "link.json").symlink_to(tmp_path / "store" / "real.json")
        with pytest.raises(ResultsInUseError), results_lock(tmp_path / "link.json"):
            pass


# ---------------------------------------------------------------------------- the lock

def test_the_lock_is_exclusive_names_its_holder_and_dies_with_it(tmp_path):
    results = tmp_path / "r.json"
    with results_lock(results) as [lock]:
        assert lock.read_text().strip() == str(os.getpid())
        with pytest.raises(ResultsInUseError, match=f"in use by process {os.getpid()}"), results_lock(results):
            pass
    with results_lock(results):        # released on exit
        pass
    # A holder killed with SIGKILL leaves no stale lock: the OS releases it.
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; sys.path.insert(0, sys.argv[1]);"
                               "from pathlib import Path; from draftbench.results.lock import results_lock;"
                               "cm = results_lock(Path(sys.argv[2])); cm.__enter__(); print('held', flush=True);"
                               "time.sleep(60)", str(REPO), str(results)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ResultsInUseError, match=f"process {holder.pid}"), results_lock(results):
            pass
    finally:
        holder.kill()
        holder.wait(timeout=10)
    deadline = time.monotonic() + 5
    while True:
        try:
            with results_lock(results):
                break
        except ResultsInUseError:
            assert time.monotonic() < deadline, "the lock outlived its killed holder"
            time.sleep(0.05)
