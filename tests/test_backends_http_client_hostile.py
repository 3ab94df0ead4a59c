"""The client against a hostile server (tests/fakes/hostile_server.py): every request ends within
its limits, and malformed data is a named measurement error — never a crash, never a hang.

Time assertions allow ≤ 2× the configured limit plus an absolute slack for a busy CI machine;
they bound the mechanism (the old client hung for the whole request time-out or for ever), not
the machine's speed.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time

import pytest
import requests
from draftbench.backends import get_backend
from draftbench.backends.base import CountsSource, DraftCounts
from draftbench.backends.http.client import RedirectRefused, new_session, stream_chat
from draftbench.backends.http.server_values import counter_difference, server_count, server_rate
from draftbench.backends.lmstudio import rest as lmstudio_rest
from draftbench.backends.lmstudio import sdk as lmstudio_sdk
from draftbench.common.errors import RequestError
from draftbench.config.prompts import BUILTIN_PROMPTS
from draftbench.measure.sequential import MeasurementFailed, MeasureOptions, check_draft_counts, run_prompts

from fakes import make_exe, reap
from fakes.hostile_server import HostileServer
from helpers import run_cli

SLACK_S = 1.5          # scheduling on a loaded 2-core machine; far below what a hang would take
CHAT = "/v1/chat/completions"


def timed_stream(server: HostileServer, *, request_timeout_s: float = 30.0, stall_timeout_s: float = 30.0):
    start = time.perf_counter()
    try:
        return stream_chat(new_session(), server.url + CHAT, {"messages": []}, request_timeout_s=request_timeout_s,
                           stall_timeout_s=stall_timeout_s), time.perf_counter() - start
    except RequestError as exc:
        return exc, time.perf_counter() - start


# --------------------------------------------------------------------------- bounded time

@pytest.mark.parametrize("mode, limits, limit_s, words", [
    ("pings", {"stall_timeout_s": 1.0}, 1.0, "stalled"),                 # keep-alives are not progress
    ("endless-line", {"stall_timeout_s": 1.0}, 1.0, "stalled"),          # bytes of a line that never ends
    ("silent", {"stall_timeout_s": 1.0}, 1.0, "stalled"),                # headers, then nothing
    ("no-response", {"stall_timeout_s": 1.0}, 1.0, "sent no response within 1 s"),
    ("trickle-events", {"request_timeout_s": 1.5}, 1.5, "longer than 1.5 s"),  # progress for ever
    ("pings", {"request_timeout_s": 1.5}, 1.5, "longer than 1.5 s"),     # the deadline holds while bytes trickle
    ("endless-line", {"request_timeout_s": 1.5}, 1.5, "longer than 1.5 s"),
])
def test_every_request_ends_within_its_limits(mode, limits, limit_s, words):
    with HostileServer(mode) as server:
        error, elapsed = timed_stream(server, **limits)
    assert isinstance(error, RequestError), error
    assert words in error.message
    assert elapsed <= 2 * limit_s + SLACK_S, f"{mode} took {elapsed:.1f} s with a {limit_s} s limit"
    assert elapsed >= limit_s * 0.9        # and not cut short either


def test_a_huge_line_is_refused_at_16_mb_not_read_to_the_end():
    with HostileServer("huge-line") as server:
        error, elapsed = timed_stream(server)
    assert isinstance(error, RequestError) and "exceeded 16 MB" in error.message
    assert elapsed < 15


def test_an_endless_error_page_is_read_only_in_part():
    with HostileServer("error-endless") as server:
        error, elapsed = timed_stream(server)
    assert isinstance(error, RequestError) and "answered HTTP 500: Internal error" in error.message
    assert len(error.message) < 500 and elapsed < 5 + SLACK_S


@pytest.mark.parametrize("value", [0, -5, math.inf, math.nan, True, "10"])
def test_stream_chat_refuses_a_limit_that_bounds_nothing(value):
    with pytest.raises(RequestError, match="stall_timeout_s"):
        stream_chat(new_session(), "http://127.0.0.1:9/v1/chat/completions", {}, stall_timeout_s=value)


# --------------------------------------------------------------------------- TTFT is not inflated

def test_ttft_and_rate_match_what_the_server_sent_without_chunked_encoding():
    """Events 100 ms apart in a close-delimited body must each be seen when they arrive: reading
    fixed 512-byte blocks saw them several at a time (TTFT 20% and tok/s 5% late), every time.

    Compared with the server's own send times (same clock), so only delivery counts; a second
    and third try absorb a moment when a loaded machine did not schedule the reader at once."""
    misses = []
    for _ in range(3):
        with HostileServer("ok-close", tokens=12, first_delay_s=1.0, interval_s=0.1) as server:
            response = stream_chat(requests.Session(), server.url + CHAT, {"messages": []})
            sent = [t for _, t in server.sent]
        assert response.completion_tokens == 12
        sent_ttft = sent[0] - response.t_start
        sent_tps = (len(sent) - 1) / (sent[-1] - sent[0])
        ttft_error = abs(response.ttft_s / sent_ttft - 1)
        tps_error = abs(response.decode_tps / sent_tps - 1)
        if ttft_error <= 0.02 and tps_error <= 0.02:
            return
        misses.append(f"TTFT {ttft_error:.1%} off, tok/s {tps_error:.1%} off")
    pytest.fail("; ".join(misses))


# --------------------------------------------------------------------------- malformed data

MALFORMED = [
    ("not-utf8", "not UTF-8 text (byte 0xff"),
    ("not-json", "is not valid JSON"),
    ("deep-json", "is not valid JSON"),
    ("choices-dict", "choices = "),
    ("delta-list", "choices[0].delta = [\"a\"] (list)"),
    ("content-number", "choices[0].delta.content = 5 (int)"),
    ("usage-list", "usage = [12, 8] (list)"),
    ("tokens-string", "usage.completion_tokens = '8' (str)"),
    ("tokens-huge", "usage.completion_tokens = 1000000000000000019884624838656"),
    ("draft-string", "timings.draft_n = '30' (str)"),
    ("draft-negative", "timings.draft_n = -10"),
    ("pps-nan", "timings.predicted_per_second = nan"),
    ("accepted-gt-drafted", "50 accepted of 10 drafted tokens"),
    ("truncated", "without a finish reason or [DONE]"),
    ("cut", "the connection broke mid-stream"),
    ("redirect", "a redirect to http://127.0.0.1:"),
    ("redirect-away", "a redirect to http://elsewhere.invalid/v1/chat on another host"),
]


@pytest.mark.parametrize("mode, words", MALFORMED)
def test_malformed_data_is_a_named_measurement_error(mode, words):
    """Through the backend a sweep uses: run_prompts raises MeasurementFailed (→ an `error` row)."""
    with HostileServer(mode) as server:
        backend_server = get_backend("llamacpp").attach(server.url)
        with pytest.raises(MeasurementFailed) as failure:
            run_prompts(backend_server, list(BUILTIN_PROMPTS[:1]), MeasureOptions(runs=1, warmup=0, max_tokens=8,
                                                                                   stall_timeout_s=5))
    assert isinstance(failure.value.error, RequestError)
    assert words in failure.value.error.message


def test_good_streams_are_still_measured():
    for mode in ("ok", "ok-close", "no-done"):   # no [DONE] after a finish reason is a complete answer
        with HostileServer(mode) as server:
            backend_server = get_backend("llamacpp").attach(server.url)
            records = run_prompts(backend_server, list(BUILTIN_PROMPTS[:1]), MeasureOptions(runs=1, warmup=0))
        (record,) = records
        assert (record.completion_tokens, record.draft_n, record.draft_n_accepted) == (8, 32, 16), mode
        assert record.server_decode_tps == 100.0 and record.finish_reason == "length"


def test_text_split_inside_a_character_is_joined_and_lone_surrogates_replaced():
    with HostileServer("split-surrogates") as server:
        response, _ = timed_stream(server)
    assert response.text.startswith("\U0001F600a\ufffd w0")
    json.dumps(response.text, ensure_ascii=False).encode("utf-8")   # can be saved


def test_probes_refuse_redirects_too():
    with HostileServer("redirect-away") as server:
        with pytest.raises(RedirectRefused, match=r"elsewhere\.invalid/props on another host"):
            new_session().get(server.url + "/props", timeout=5)
        llama = get_backend("llamacpp").attach(server.url)
    assert llama.props == {} and llama.version is None       # nothing read from elsewhere


@pytest.mark.parametrize("backend", ["llamacpp", "vllm"])
def test_probes_of_a_running_server_end_on_their_own_deadline(backend):
    """/props, /slots, /v1/models and /version answering a body that never ends: attaching still
    returns (each probe reads at most its own deadline, here 0.2 s instead of the usual 5–10 s), with
    nothing read from it."""
    with HostileServer("endless-probe") as server:
        start = time.perf_counter()
        attached = get_backend(backend).attach(server.url, probe_timeout_s=0.2)
        elapsed = time.perf_counter() - start
    assert attached.probe_s(10) == 0.2
    assert elapsed < 60          # bounded; unbounded would be FOREVER_S
    if backend == "llamacpp":
        assert attached.props == {} and attached.version is None


def test_lm_studio_probes_and_unstreamed_answers_end_on_their_own_deadline():
    """LM Studio's REST probe, SDK greeting and unstreamed (native-blocking) answer, from a server whose
    bodies never end: each gives up on its own deadline (here 0.2 s) instead of waiting for the server."""
    with HostileServer("endless-probe") as server:
        base = server.url.rstrip("/")
        start = time.perf_counter()
        assert lmstudio_rest.probe(new_session(), base, {}, timeout_s=0.2) == ("foreign", None)
        assert lmstudio_sdk.probe(base.removeprefix("http://"), timeout_s=0.2) == "foreign"
        probes = time.perf_counter() - start
        start = time.perf_counter()
        with pytest.raises(RequestError, match=r"did not answer within 0\.3 s"):
            lmstudio_rest.blocking_chat(new_session(), base + "/api/v0/chat/completions", {"messages": []},
                                        headers={}, request_timeout_s=0.3)
        answer = time.perf_counter() - start
    assert probes < 60 and answer < 60       # bounded; unbounded would be FOREVER_S


@pytest.mark.parametrize("value, ok", [(None, None), (0, 0), (30, 30), (30.0, 30), (10**8, 10**8), ("30", "error"),
                                       (-10, "error"), (math.nan, "error"), (1e30, "error"), (2.5, "error"),
                                       (True, "error"), ([1], "error")])
def test_server_count(value, ok):
    if ok == "error":
        with pytest.raises(RequestError, match=r"timings\.draft_n"):
            server_count(value, "timings.draft_n")
    else:
        assert server_count(value, "timings.draft_n") == ok


def test_rates_counters_and_draft_counts_are_checked():
    assert server_rate(12.5, "x") == 12.5 and server_rate(None, "x") is None
    for bad in (math.nan, math.inf, -1.0, "12", 1e30):
        with pytest.raises(RequestError):
            server_rate(bad, "x")
    assert counter_difference(15.0, 10.0, "c") == 5 and counter_difference(None, 10.0, "c") is None
    for after, before in ((5.0, 10.0), (math.nan, 1.0), (math.inf, 0.0)):
        with pytest.raises(RequestError, match="counter c"):
            counter_difference(after, before, "c")
    assert check_draft_counts(DraftCounts(drafted=10.0, accepted=10, steps=None)).drafted == 10
    assert isinstance(check_draft_counts(DraftCounts(drafted=10.0)).drafted, int)
    with pytest.raises(RequestError, match="acceptance cannot exceed 100%"):
        check_draft_counts(DraftCounts(drafted=10, accepted=11, source=CountsSource.STATS))


# --------------------------------------------------------------------------- bench.py end to end

def bench(url: str, *args: str) -> tuple[object, float]:
    start = time.perf_counter()
    proc = run_cli("bench.py", "--url", url, "--requests", "1", "--warmup", "0", "--max-tokens", "8", *args,
                   timeout=60)
    return proc, time.perf_counter() - start


def one_error_line(proc) -> str:
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize("mode, args, limit_s, words", [
    ("pings", ("--stall-timeout", "1"), 1.0, "the stream stalled"),
    ("trickle-events", ("--request-timeout", "2"), 2.0, "longer than 2 s"),
    ("huge-line", (), None, "exceeded 16 MB"),
    ("content-number", (), None, "choices[0].delta.content = 5 (int)"),
    ("usage-list", (), None, "usage = [12, 8] (list)"),
    ("accepted-gt-drafted", (), None, "acceptance cannot exceed 100%"),
    ("not-utf8", (), None, "not UTF-8"),
    ("redirect-away", (), None, "a redirect to http://elsewhere.invalid/props on another host"),
])
def test_bench_ends_with_one_error_line(mode, args, limit_s, words):
    with HostileServer(mode) as server:
        proc, elapsed = bench(server.url, *args)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert words in one_error_line(proc)
    if limit_s:   # Python's start-up is part of `elapsed` (slow on a loaded machine); unbounded would be 900 s
        assert elapsed <= 2 * limit_s + SLACK_S + 5.0


@pytest.mark.parametrize("flag, value", [("--stall-timeout", "0"), ("--stall-timeout", "nan"),
                                         ("--request-timeout", "-5"), ("--request-timeout", "inf")])
def test_bench_refuses_time_outs_that_bound_nothing(flag, value):
    proc, _ = bench("http://127.0.0.1:9", flag, value)       # nothing listens there: refused before any request
    assert proc.returncode == 2, proc.stdout + proc.stderr
    # checked as a config's settings.request_timeout_s / stall_timeout_s are (one route), naming the flag as given
    assert one_error_line(proc).startswith(f"Error: {flag} {value}: "), proc.stderr


def _read_only_file(tmp_path):
    path = tmp_path / "protected.json"
    path.write_text("{}")
    path.chmod(0o444)
    return path


def _sys_is_read_only() -> bool:
    try:
        tempfile.TemporaryFile(dir="/sys").close()
    except OSError:
        return os.path.isdir("/sys")
    return False


@pytest.mark.parametrize("where, words", [
    ("folder", "is a folder"),
    ("under-a-file", "is a file, not a folder"),
    ("prompt-file", "is also an input"),
    pytest.param("read-only-fs", "no new file can be made in /sys", marks=pytest.mark.skipif(
        not _sys_is_read_only(), reason="needs a read-only /sys (Linux containers and non-root users have one)")),
    pytest.param("read-only-file", "cannot be written (Permission denied)", marks=pytest.mark.skipif(
        os.geteuid() == 0, reason="root may write a read-only file")),
])
def test_bench_checks_the_json_path_before_measuring(tmp_path, where, words):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Say hi.\n")
    path = {"folder": tmp_path, "under-a-file": prompts / "out.json", "prompt-file": prompts,
            "read-only-fs": "/sys/draftbench-test/out.json",
            "read-only-file": _read_only_file(tmp_path) if where == "read-only-file" else None}[where]
    with HostileServer("ok") as server:
        proc, _ = bench(server.url, "--prompt-file", str(prompts), "--json", str(path))
        requests_seen = server.requests
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert words in one_error_line(proc)
    assert requests_seen == 0                      # refused before measuring
    assert prompts.read_text() == "Say hi.\n"


def test_bench_json_is_strict_and_written_through_a_symlink(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with HostileServer("ok") as server:
        proc, _ = bench(server.url, "--json", str(link))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert link.is_symlink()
    data = json.loads(real.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert data["results"][0]["requests"][0]["completion_tokens"] == 8


# --------------------------------------------------------------------------- a sweep goes on

def test_sweep_records_malformed_data_as_error_rows_and_goes_on(tmp_path, monkeypatch):
    """sweep.py with backend vllm, `vllm` being the hostile server: two drafts send impossible data."""
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("HOSTILE_PIDS", str(pids))
    monkeypatch.setenv("HOSTILE_DRAFT_MODES", json.dumps({"org/bad-json": "content-number",
                                                          "org/liar": "accepted-gt-drafted"}))
    vllm = make_exe(tmp_path / "bin", "vllm", "hostile_server.py")
    config = {"name": "hostile", "hardware": "test", "backend": "vllm", "model_family": "fake",
              "targets": [{"label": "T", "path": "org/target"}],
              "drafts": [{"label": "bad json", "path": "org/bad-json"}, {"label": "liar", "path": "org/liar"},
                         {"label": "good", "path": "org/good"}],
              "settings": {"vllm_bin": str(vllm), "runs": 1, "warmup": 0, "max_tokens": 8, "draft_max": 4,
                           "port": 0, "prompts": ["code"], "startup_timeout_s": 30, "stall_timeout_s": 5}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    results = tmp_path / "r.json"
    try:
        proc = run_cli("sweep.py", "--config", str(path), "--results", str(results), "--no-chart", timeout=120)
    finally:
        leaked = reap(pids)
    assert not leaked, f"stand-in servers left running: {leaked}"
    assert proc.returncode == 3, proc.stdout + proc.stderr            # finished; some combinations failed
    assert "Traceback" not in proc.stdout + proc.stderr
    data = json.loads(results.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the results"))
    rows = {r["draft"]: r for r in data["results"]}
    assert rows[None]["status"] == "ok" and rows["good"]["status"] == "ok"
    assert rows["good"]["acceptance_rate"] == 0.5
    assert rows["bad json"]["status"] == "error" and "delta.content = 5 (int)" in rows["bad json"]["reason"]
    assert rows["liar"]["status"] == "error" and "acceptance cannot exceed 100%" in rows["liar"]["reason"]
