"""A llama-server that crashes says why, shows its log, and a crash that every server would repeat stops the sweep
(issue 42). The AMX crash (llama.cpp#20824) needs a CPU with AMX, which this machine may not have: a stand-in
server prints b11434's start-up lines and dies by SIGSEGV in its warm-up run, and the CPU flags the message reads
are shown from a file (``DRAFTBENCH_CPUINFO``), with AMX and without.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from draftbench.backends.llamacpp.failures import AMX_FIX, AMX_MESSAGE, at_warm_up, explain_exit
from draftbench.common.cpu_flags import cpu_flags, has_amx
from draftbench.common.errors import ServerErrorKind

from fakes import make_exe
from fakes.crashing_llama_server import START_UP
from helpers import run_cli, tiny_gguf

X86 = "fpu sse2 sse4_2 avx avx2 fma f16c bmi2 avx512f avx512_vnni avx512_bf16"
WARM_UP_LOG = "$ llama-server -m t.gguf\n" + START_UP.format(model="t.gguf")


def cpuinfo(folder: Path, amx: bool) -> Path:
    path = folder / ("cpuinfo-amx" if amx else "cpuinfo")
    flags = X86 + (" amx_bf16 amx_tile amx_int8" if amx else "")
    path.write_text(f"processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
    return path


@pytest.fixture
def amx_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTBENCH_CPUINFO", str(cpuinfo(tmp_path, amx=True)))


@pytest.fixture
def plain_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTBENCH_CPUINFO", str(cpuinfo(tmp_path, amx=False)))


def test_the_cpu_flags_come_from_the_file_named(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTBENCH_CPUINFO", str(cpuinfo(tmp_path, amx=True)))
    assert "amx_tile" in cpu_flags() and has_amx()
    monkeypatch.setenv("DRAFTBENCH_CPUINFO", str(cpuinfo(tmp_path, amx=False)))
    assert "avx512f" in cpu_flags() and not has_amx()
    monkeypatch.setenv("DRAFTBENCH_CPUINFO", str(tmp_path / "none"))
    assert cpu_flags() == frozenset()


def test_a_crash_in_the_warm_up_run_is_named_by_the_cpu_it_ran_on(tmp_path, monkeypatch):
    assert at_warm_up(WARM_UP_LOG) and not at_warm_up(WARM_UP_LOG + "0.02.076 I srv  llama_server: model loaded\n")
    monkeypatch.setenv("DRAFTBENCH_CPUINFO", str(cpuinfo(tmp_path, amx=True)))
    amx = explain_exit(-signal.SIGSEGV, WARM_UP_LOG, 8080, "/logs/s1.log")
    assert amx.kind is ServerErrorKind.BINARY
    assert amx.message == f"llama-server crashed (signal 11, SIGSEGV) in its warm-up run: {AMX_MESSAGE}"
    assert amx.fix is not None and amx.fix.startswith(AMX_FIX) and "--no-repack" in amx.fix
    text = str(amx)         # what the one "Error:" line prints: the log's last lines and its path
    assert "Last lines of the server log (/logs/s1.log)" in text and "llama threadpool init" in text
    monkeypatch.setenv("DRAFTBENCH_CPUINFO", str(cpuinfo(tmp_path, amx=False)))
    plain = explain_exit(-signal.SIGSEGV, WARM_UP_LOG, 8080, "/logs/s1.log")
    assert plain.kind is ServerErrorKind.CRASH and "AMX" not in plain.message
    assert plain.message.startswith("llama-server crashed (signal 11, SIGSEGV) in its warm-up run")
    assert plain.fix is not None and plain.fix.startswith("see the log lines below")


def test_other_crashes_are_named_too(plain_cpu):
    illegal = explain_exit(-signal.SIGILL, WARM_UP_LOG, 8080, None)
    assert illegal.kind is ServerErrorKind.BINARY and "built for another CPU" in illegal.message
    assert illegal.fix is not None and "make llama-server" in illegal.fix
    killed = explain_exit(-signal.SIGKILL, "$ llama-server -m t.gguf\nload_tensors: loading model tensors\n", 8080, None)
    assert killed.kind is ServerErrorKind.OOM and "out-of-memory killer" in killed.message
    assert killed.fix is not None and "dmesg" in killed.fix
    other = explain_exit(-signal.SIGABRT, "$ llama-server\nGGML_ASSERT(x) failed\n", 8080, "/l.log")
    assert other.kind is ServerErrorKind.CRASH and other.message == "llama-server crashed (signal 6, SIGABRT)"
    assert other.fix is not None and other.fix.endswith("see the log lines below; a corrupt model or an assertion in "
                                                        "llama.cpp are the usual causes")
    empty = explain_exit(-signal.SIGSEGV, "$ llama-server\n", 8080, "/l.log")
    assert empty.fix is not None and "its log /l.log is empty" in empty.fix


def sweep_config(folder: Path, llama_bin: Path, **settings) -> Path:
    models = {name: str(tiny_gguf(folder / f"{name}.gguf")) for name in ("t", "t2", "d1", "d2")}
    config = {"name": "crash", "hardware": "test", "backend": "llamacpp",
              "targets": [{"label": "T", "path": models["t"]}, {"label": "T2", "path": models["t2"]}],
              "drafts": [{"label": "d1", "path": models["d1"]}, {"label": "d2", "path": models["d2"]}],
              "settings": {"llama_bin": str(llama_bin), "port": 0, "max_tokens": 8, "prompts": ["code"],
                           "startup_timeout_s": 60, **settings}}
    path = folder / "c.json"
    path.write_text(json.dumps(config))
    return path


def test_an_amx_crash_at_the_first_start_stops_the_sweep_with_one_message(tmp_path, amx_cpu):
    fake = make_exe(tmp_path / "bin", "llama-server", "crashing_llama_server.py")
    results = tmp_path / "r.json"
    proc = run_cli("sweep.py", "--config", str(sweep_config(tmp_path, fake)), "--results", str(results),
                   "--no-chart")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert proc.stderr.count(AMX_MESSAGE) == 1 and "--no-repack" in proc.stderr
    assert "every server of this run would fail the same way" in proc.stderr
    assert "Last lines of the server log (" in proc.stderr and "llama threadpool init" in proc.stderr
    assert out.count("Starting server") == 1                            # one start, not one per combination
    rows = json.loads(results.read_text())["results"] if results.exists() else []
    assert not any(r["status"] == "skipped" for r in rows)
    probe = run_cli("sweep.py", "--config", str(sweep_config(tmp_path, fake)), "--dry-run", "--probe")
    assert probe.returncode == 2 and AMX_MESSAGE in probe.stderr, probe.stdout + probe.stderr
    # in a folder of configs the summary names it for what it is: no config was refused
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "one.json").write_text(sweep_config(tmp_path, fake).read_text())
    batch = run_cli("sweep.py", "--config-dir", str(folder), "--no-chart")
    assert batch.returncode == 2 and "one.json: STOPPED (the server cannot run on this machine)" in batch.stdout, \
        batch.stdout + batch.stderr


def test_the_same_crash_on_a_cpu_without_amx_fails_its_target_and_shows_the_log(tmp_path, plain_cpu):
    fake = make_exe(tmp_path / "bin", "llama-server", "crashing_llama_server.py")
    results = tmp_path / "r.json"
    proc = run_cli("sweep.py", "--config", str(sweep_config(tmp_path, fake)), "--results", str(results),
                   "--no-chart")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "AMX" not in proc.stdout
    assert "crashed (signal 11, SIGSEGV) in its warm-up run" in proc.stdout
    # "see the log lines below" is followed by them, and the log's path
    assert "see the log lines below" in proc.stdout and "Last lines of the server log (" in proc.stdout
    assert "| 0.00.423.525 I cmn          init: llama threadpool init, n_threads = 2" in proc.stdout
    rows = json.loads(results.read_text())["results"]
    baselines = [r for r in rows if r["role"] == "baseline"]
    assert len(baselines) == 2 and all(r["status"] == "error" for r in baselines)   # each target tried
    assert all("see its log (" in r["reason"] and r["reason"].count(".log)") == 1 for r in baselines)


@pytest.mark.llama
def test_a_crash_of_one_drafts_server_fails_only_its_row(tmp_path, amx_cpu, models, llama_bin, monkeypatch):
    """The first server (the target alone) runs: a later server's AMX crash is that combination's failure."""
    monkeypatch.setenv("FAKE_CRASH_ONLY_WITH_DRAFT", "1")
    monkeypatch.setenv("FAKE_REAL_LLAMA_SERVER", llama_bin)
    fake = make_exe(tmp_path / "bin", "llama-server", "crashing_llama_server.py")
    config = {"name": "one", "hardware": "test", "backend": "llamacpp",
              "targets": [{"label": "T", "path": models["target-2x"]}],
              "drafts": [{"label": "d", "path": models["base"]}],
              "candidates": [{"label": "ngram", "method": "ngram-simple"}],
              "settings": {"llama_bin": str(fake), "port": 0, "max_tokens": 8, "prompts": ["code"], "stages": 1,
                           "gpu_layers": 0, "ctx_size": 1024}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config))
    results = tmp_path / "r.json"
    proc = run_cli("sweep.py", "--config", str(path), "--results", str(results), "--no-chart")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    rows = {r["draft"]: r for r in json.loads(results.read_text())["results"] if r["role"] != "control"}
    assert rows[None]["status"] == "ok" and rows["ngram"]["status"] == "ok"
    assert rows["d"]["status"] == "error" and AMX_MESSAGE in rows["d"]["reason"]
