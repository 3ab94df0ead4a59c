"""Issue 45, ``--redact-paths`` (the copy meant for posting) masks secrets wherever a string holds them: inside
the stored summary's "Run it:" line, a row's reason, under a key the format does not know (top-level or not),
an ``Authorization: Bearer`` header, a bare ``hf_…`` token; paths there were redacted, secrets were not."""

from __future__ import annotations

import json

import pytest
from draftbench.common.redact_secrets import redact_secret_text
from draftbench.results.file import load_results, save_results
from draftbench.share.redact_paths import redact_paths

from helpers import run_cli
from share_data import box_a

SECRETS = ("SECRETKEY1", "SECRETKEY2", "SECRETKEY3", "hf_abcdefghijklmnopqrstuvwx", "sk-abcdefghijklmnopqrstuvwxyz")


def test_a_posted_copy_holds_no_secret_wherever_it_was_written(tmp_path):
    source = tmp_path / "a.json"
    save_results(box_a(), source)
    data = json.loads(source.read_text())
    data["summary"]["targets"][0]["verdict"] += (" Run it: llama-server -m /home/alex/x.gguf --api-key SECRETKEY1 "
                                                 "--hf-token hf_abcdefghijklmnopqrstuvwx")
    data["notes"] = {"mine": "curl -H 'Authorization: Bearer sk-abcdefghijklmnopqrstuvwxyz'", "api_key": "SECRETKEY2"}
    data["results"][0]["reason"] = "it failed with --api-key=SECRETKEY3 on /home/alex/models"
    source.write_text(json.dumps(data))
    shared = tmp_path / "shared.json"
    proc = run_cli("sweep.py", "--results", str(source), "--redact-paths", "--output", str(shared))
    assert proc.returncode == 0, proc.stderr
    text = shared.read_text()
    assert not [s for s in SECRETS if s in text] and "/home/alex" not in text
    load_results(shared)                             # and it loads like the original


@pytest.mark.parametrize("text, expected", [
    ("Run it: llama-server -m x.gguf --api-key KEY123 -ngl 99", "Run it: llama-server -m x.gguf --api-key *** -ngl 99"),
    ("--api_key=\"a b\" --threads 2", "--api_key=*** --threads 2"),
    ("--api-key -Xy12 next", "--api-key *** next"),           # a key may start with '-'
    ("Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic ***"),
    ("the token hf_AAAAAAAAAAAAAAAAAAAAAAAA leaked", "the token *** leaked"),
    # left alone: flags that hold no secret, prose about tokens
    ("--max-tokens 512 --skip-token-check --threads 2", "--max-tokens 512 --skip-token-check --threads 2"),
    ("Token acceptance was 80%; Basic statistics follow", "Token acceptance was 80%; Basic statistics follow"),
])
def test_secrets_in_prose_are_masked_and_prose_is_not(text, expected):
    assert redact_secret_text(text) == expected


def test_a_string_under_a_secret_key_is_masked_and_numbers_are_kept():
    data = {"unknown": {"hf_token": "whatever-it-is", "time_to_first_token": 0.5, "prompt_tokens": 7},
            "extra_args": ["--api-key", "k"], "requests": [{"text": "--api-key SECRETKEY in generated text"}]}
    assert redact_paths(data) == {"unknown": {"hf_token": "***", "time_to_first_token": 0.5, "prompt_tokens": 7},
                                  "extra_args": ["--api-key", "***"],
                                  "requests": [{"text": "--api-key SECRETKEY in generated text"}]}   # model output
