"""draftbench.common.redact_secrets: secrets in server commands and in the log lines that echo them
are masked before anything is recorded or printed.
"""

from __future__ import annotations

import pytest
from draftbench.common.redact_secrets import MASK, redact_command


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
