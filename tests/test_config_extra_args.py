"""draftbench.config.extra_args: arguments passed through to a server may not take its port or
expose it, and our own requests find the key it was given.
"""

from __future__ import annotations

import pytest
from draftbench.common.errors import ConfigError
from draftbench.config.extra_args import api_key_from_args, check_server_args, is_loopback
from draftbench.sweep.config_file import validate_config


def config(**changes) -> dict:
    base = {"name": "x", "hardware": "h", "backend": "llamacpp", "targets": [{"label": "T", "path": "/t.gguf"}],
            "drafts": [], "settings": {}}
    base.update(changes)
    return base


def problems(data: dict) -> list:
    with pytest.raises(ConfigError) as info:
        validate_config(data)
    return info.value.problems


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


def test_api_key_is_found_for_our_own_requests(tmp_path):
    assert api_key_from_args(["--api-key", "a,b"]) == "a"
    keys = tmp_path / "keys"
    keys.write_text("# comment\n\nk1\nk2\n")
    assert api_key_from_args(["--api-key-file", str(keys)]) == "k1"
    assert api_key_from_args(["--threads", "2"]) is None


