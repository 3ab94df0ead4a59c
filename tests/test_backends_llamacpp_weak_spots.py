"""The weak spots of the second adversarial round (issue 28), each with its clear message: a failing
EAGLE3 draft is not called a vocabulary problem; a llama_bin that exits 0 at once says so (and that it
printed nothing); a reason never reads "skipped: skipped:"; a --host in extra_args is where we connect;
a resumed race says which rows it may still measure."""

from __future__ import annotations

import io
import sys

import pytest
from draftbench.backends.base import LaunchSpec
from draftbench.backends.llamacpp.backend import LlamaCppBackend
from draftbench.common.errors import ServerError
from draftbench.config.extra_args import bind_host
from draftbench.lifetime.process import free_port
from draftbench.sweep.console import Console, Reporter

from fakes.inprocess import FakeBackend
from helpers import default_settings
from test_sweep_race import BEST, GOOD, config, script, sweep

# ---------------------------------------------------------------------------- EAGLE3 is not a vocabulary problem


def test_the_vocabulary_precheck_is_for_draft_simple_only(models):
    backend = LlamaCppBackend()
    target, other_vocab = models["target-2x"], models["draft-badvocab"]
    assert backend.pair_problem(target, other_vocab) is not None                       # a plain draft: refused
    assert backend.pair_problem(target, other_vocab, ("draft-simple", "ngram-mod")) is not None
    for method in (("draft-eagle3",), ("draft-mtp",)):     # heads with a draft vocabulary of their own
        assert backend.pair_problem(target, other_vocab, method) is None


@pytest.mark.llama
def test_a_failing_eagle3_draft_says_what_failed(models, tmp_path):
    spec = LaunchSpec(target=models["target-2x"], draft=models["base"], method=("draft-eagle3",), port=free_port(),
                      ctx_size=512, gpu_layers=0, startup_timeout_s=300,
                      settings=default_settings(method_stats=False), log_path=str(tmp_path / "eagle.log"))
    server = LlamaCppBackend().launch(spec)
    try:
        status = server.speculation_status(requested=True)
    finally:
        server.stop()
    assert status.active is False
    assert "draft model is not eagle3" in status.reason and "vocabulary" not in status.reason


# ---------------------------------------------------------------------------- a llama_bin that exits 0 at once

def test_a_llama_bin_that_exits_at_once_says_so_and_that_it_printed_nothing(models, tmp_path):
    exe = tmp_path / "llama-server"
    exe.write_text("#!/bin/sh\ncase \"$1\" in --help) printf '  -m, --model FNAME\\n  --port PORT\\n  --host HOST\\n"
                   "  -c, --ctx-size N\\n  -ngl N\\n  -np, --parallel N\\n'; exit 0;; --version) echo v; exit 0;; esac\n"
                   "exit 0\n")
    exe.chmod(0o755)
    spec = LaunchSpec(target=models["base"], port=free_port(), ctx_size=512, gpu_layers=0, startup_timeout_s=60,
                      settings=default_settings(llama_bin=str(exe), method_stats=False),
                      log_path=str(tmp_path / "s.log"))
    with pytest.raises(ServerError) as err:
        LlamaCppBackend().launch(spec)
    assert "exited with code 0 before it was ready" in err.value.message
    assert "log lines below" not in err.value.fix and "it printed nothing" in err.value.fix
    assert "a wrapper that puts it in the background" in err.value.fix


def test_a_skipped_reason_is_never_doubled(tmp_path):
    from draftbench.common.errors import ServerErrorKind
    out = io.StringIO()
    cfg = config(tmp_path, search="exhaustive")
    backend = FakeBackend(script(fail_launch={"/m/target.gguf": ServerError("boom", kind=ServerErrorKind.SERVER)}))
    sweep(tmp_path, backend, cfg, reporter=Console(out))
    text = out.getvalue()
    assert "skipped: the baseline of 7B failed" in text or "Skipped: the baseline of 7B failed" in text
    assert "skipped: skipped" not in text.lower()


# ---------------------------------------------------------------------------- --host in extra_args

@pytest.mark.parametrize("default, args, host", [
    ("127.0.0.1", [], "127.0.0.1"), ("127.0.0.1", ["--host", "127.0.0.2"], "127.0.0.2"),
    ("127.0.0.1", ["--host=127.0.0.3", "-t", "4"], "127.0.0.3"),
    ("127.0.0.1", ["--host", "127.0.0.2", "--host", "::1"], "::1"),
    ("127.0.0.1", ["--host", "127.0.0.5,127.0.0.6"], "127.0.0.5"), ("127.0.0.1", ["--host"], "127.0.0.1"),
])
def test_the_last_host_argument_is_where_the_server_listens(default, args, host):
    assert bind_host(default, args) == host


@pytest.mark.llama
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="all of 127.0.0.0/8 is loopback on Linux")
def test_a_host_in_extra_args_is_where_we_connect(start_llama, models):
    server = start_llama(models["base"], extra_args=("--host", "127.0.0.2"))
    assert server.base_url.startswith("http://127.0.0.2:")


# ---------------------------------------------------------------------------- a resumed race says what is open

def test_a_resumed_race_does_not_say_nothing_remains_while_it_measures(tmp_path):
    class StopAtExtension(Reporter):
        def combination_started(self, index, total, title, at_most=False):
            if "[stage 2/" in title:          # the race's second stage
                raise KeyboardInterrupt

    cfg = config(tmp_path)
    noisy = dict(speedup={BEST: 1.5, GOOD: 1.45}, noise={BEST: 0.1, GOOD: 0.1})
    sweep(tmp_path, FakeBackend(script(**noisy)), cfg, reporter=StopAtExtension())
    out = io.StringIO()
    backend = FakeBackend(script(**noisy))
    sweep(tmp_path, backend, cfg, reporter=Console(out))
    header = next(line for line in out.getvalue().splitlines() if "Resuming" in line)
    measured_again = {entry[2] for entry in backend.log if entry[0] == "launch"}
    assert measured_again, "the race measured nothing more: this test no longer shows the case"
    assert "0 remaining" not in header and "stages still to measure" in header, header
