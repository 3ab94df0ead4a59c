"""Issue 45 (round three re-run): an RPC endpoint is plain ASCII in its host as in its port. A fullwidth
"１２７.０.０.１" passed (a resolver reads 127.0.0.1 where llama-server is handed the fullwidth text); every route
refuses it naming the character: a target's "rpc", --rpc after `server.py llama-cpp --`."""

from __future__ import annotations

import pytest
from draftbench.config.extra_args import check_server_args
from draftbench.config.flag_rules import SERVER

from test_config_extra_args import config, problems


@pytest.mark.parametrize("endpoint, char", [("１２７.０.０.１:50052", "FULLWIDTH DIGIT ONE"),
                                            ("127.0.0.1:５００５２", "FULLWIDTH DIGIT FIVE"),
                                            ("local\u200bhost:50052", "ZERO WIDTH SPACE")])
def test_a_non_ascii_endpoint_is_refused_on_every_route(endpoint, char):
    [p] = problems(config(targets=[{"label": "T", "path": "/t.gguf", "rpc": [endpoint]}],
                          settings={"allow_remote": True}))
    assert p.path == "$.targets[0].rpc[0]" and char in p.message, p
    found, _ = check_server_args("--", ["--rpc", endpoint], allow_remote=True, entry=SERVER["llamacpp"])
    assert len(found) == 1 and char in found[0].message
