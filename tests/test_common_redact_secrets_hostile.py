"""Issue 36, secrets: a key that starts with '-' is masked like any other; a command printed to be run never holds
a literal `***` (a reference the shell insists on instead); a server that echoes its key leaves none in its log,
masked as the log is written; bench.py --target --json never stores a key passed after --."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from draftbench.common.redact_secrets import MASK, redact_command, secret_values, shell_line
from draftbench.lifetime.process import ManagedProcess
from draftbench.lifetime.supervisor import COPY_CHUNK, copy_masked

DASH_KEY = "-Xk3_9dQp0r7vLm2Zs8aBc4Ty6Wn1Hj5Gf0Ue2Ri9Oq"      # as secrets.token_urlsafe(32) makes 1.5% of keys


@pytest.mark.parametrize("cmd, expected", [
    (["srv", "--api-key", DASH_KEY, "--port", "1"], ["srv", "--api-key", MASK, "--port", "1"]),
    (["srv", "--api-key=" + DASH_KEY], ["srv", "--api-key=" + MASK]),
    (["srv", "--hf-token", "-hf_x", "-hft", "-y"], ["srv", "--hf-token", MASK, "-hft", MASK]),
    (["srv", "--skip-token-check", "--threads", "4"], ["srv", "--skip-token-check", "--threads", "4"]),   # a switch
])
def test_a_key_starting_with_a_dash_is_masked(cmd, expected):
    assert redact_command(cmd) == expected
    assert DASH_KEY not in " ".join(redact_command(cmd))


def test_the_printed_command_refuses_to_run_until_the_key_is_set(tmp_path):
    line = shell_line(["true", "--api-key", MASK, "--hf-token=" + MASK, "-c", "{\"a\": 1}"])
    assert "'***'" not in line and "***" not in line
    assert '"${DRAFTBENCH_API_KEY:?set DRAFTBENCH_API_KEY to the value of --api-key first}"' in line
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRAFTBENCH_")}
    refused = subprocess.run(["sh", "-c", line], env=env, capture_output=True, text=True)
    assert refused.returncode != 0 and "set DRAFTBENCH_API_KEY" in refused.stderr
    ran = subprocess.run(["sh", "-c", line.replace("true", "printf '%s\\n'", 1)], capture_output=True, text=True,
                         env=dict(env, DRAFTBENCH_API_KEY="k1", DRAFTBENCH_HF_TOKEN="t1"))
    assert ran.stdout.split("\n")[:4] == ["--api-key", "k1", "--hf-token=t1", "-c"]
    assert shell_line(["srv", "--api-key", DASH_KEY]) == shell_line(["srv", "--api-key", MASK])


def test_a_server_that_echoes_its_key_leaves_none_in_its_log(tmp_path):
    log = tmp_path / "server.log"
    echo = "import sys; print('args:', sys.argv[1:]); print('x' * 200000 + sys.argv[2])"
    proc = ManagedProcess([sys.executable, "-c", echo, "--api-key", DASH_KEY], log)
    try:
        proc.popen.wait(timeout=60)
    finally:
        proc.stop()
    text = log.read_text()
    assert DASH_KEY not in text and text.count(MASK) >= 3 and "args:" in text     # header, argv echo, long line


def test_the_masking_copy_catches_a_key_split_across_reads():
    key = b"sekrit-0123456789"
    data = b"a" * (COPY_CHUNK - 5) + key + b"\n" + b"b" * (3 * COPY_CHUNK) + key
    read_fd, write_fd = os.pipe()
    out_r, out_w = os.pipe()
    import threading
    threading.Thread(target=lambda: (os.write(write_fd, data), os.close(write_fd)), daemon=True).start()
    got = []
    reader = threading.Thread(target=lambda: got.append(b"".join(iter(lambda: os.read(out_r, 1 << 16), b""))))
    reader.start()
    copy_masked(read_fd, out_w, [key])
    os.close(out_w)
    reader.join(10)
    assert key not in got[0] and got[0].count(MASK.encode()) == 2
    assert secret_values(["x", "--api-key", key.decode()]) == [key.decode()]


def test_ab_results_never_store_a_key_passed_after_the_double_dash(tmp_path):
    from dataclasses import replace

    from draftbench.results.file import save_results
    from draftbench.sweep import Reporter
    from draftbench.sweep.ab import run_ab

    from fakes.inprocess import FakeBackend, Script
    from test_sweep_ab import DRAFT, TARGET, plan
    ab_plan = plan()
    ab_plan = replace(ab_plan, settings=ab_plan.settings.with_values(extra_args=["--api-key", DASH_KEY]))
    results = run_ab(ab_plan, FakeBackend(Script(tps={TARGET: 50.0}, speedup={DRAFT: 1.5})), "llamacpp",
                     tmp_path / "logs", Reporter())
    save_results(results, tmp_path / "r.json")
    text = (tmp_path / "r.json").read_text()
    assert DASH_KEY not in text and json.loads(text)["settings"]["extra_args"] == ["--api-key", MASK]
