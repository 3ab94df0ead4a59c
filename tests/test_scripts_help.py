"""Every script we ship (sweep.py, bench.py, server.py, benchmarks/, tools/) prints its usage on --help and exits 0,
and a bad argument (an unknown flag, a non-number where a number goes, a missing file) is a usage error or one
Error line naming it, never a traceback. The scripts are found by globbing, so a new one is covered without being
listed here. Each runs in a folder of its own, not the repository: its imports must not depend on the current
folder (benchmarks/kill_loop.py's --help was a ModuleNotFoundError). No server starts: every case fails, or
prints its help, before any work."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import pytest

from helpers import REPO

TIMEOUT_S = 90          # an import of the package takes a second or two; this is for a busy shared machine


def scripts() -> list[str]:
    """Every Python file with a ``__main__`` block at the top level, under benchmarks/ and tools/, and every shell
    script there: the repository-relative paths."""
    python = [*REPO.glob("*.py"), *REPO.glob("benchmarks/**/*.py"), *REPO.glob("tools/**/*.py")]
    found = [p for p in python if 'if __name__ == "__main__":' in p.read_text(encoding="utf-8")]
    found += [*REPO.glob("benchmarks/**/*.sh"), *REPO.glob("tools/**/*.sh")]
    return sorted(str(p.relative_to(REPO)) for p in found)


def run(script: str, *args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    command = ["bash"] if script.endswith(".sh") else [sys.executable]
    with tempfile.TemporaryDirectory(prefix="draftbench-help-") as tmp:
        return subprocess.run([*command, str(REPO / script), *args], capture_output=True, text=True,
                              timeout=TIMEOUT_S, cwd=cwd or tmp, stdin=subprocess.DEVNULL)


@cache
def all_at_once(*args: str) -> dict[str, subprocess.CompletedProcess]:
    """Each script run with ``args``, four at a time (most of the time is Python's start-up and imports)."""
    names = scripts()
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(names, pool.map(lambda name: run(name, *args), names)))


def test_the_glob_finds_the_scripts_we_ship():
    found = set(scripts())
    assert {"sweep.py", "bench.py", "server.py", "benchmarks/forecast.py", "benchmarks/kill_loop.py",
            "benchmarks/simulation/power_svg.py", "tools/forge.py", "tools/get-llama-server.sh"} <= found, found
    assert "benchmarks/simulation/world.py" not in found            # a module, not a script


@pytest.mark.parametrize("script", scripts())
def test_help_prints_the_usage_and_exits_0(script):
    proc = all_at_once("--help")[script]
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{script} --help exited {proc.returncode}:\n{output[-2000:]}"
    assert "Traceback" not in output and "usage" in output.lower(), output[-2000:]


@pytest.mark.parametrize("script", scripts())
def test_an_unknown_flag_is_a_usage_error(script):
    proc = all_at_once("--no-such-flag")[script]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, f"{script}: {proc.returncode}\n{proc.stderr}"
    assert "--no-such-flag" in proc.stderr or "required" in proc.stderr, proc.stderr


MISSING = "/nonexistent-draftbench/missing"

# (script, its arguments, what its error must name). Each fails before anything starts: the checks come first.
BAD_ARGUMENTS = [
    ("benchmarks/forecast.py", ["--trials", "many"], "invalid int value: 'many'"),
    ("benchmarks/forecast.py", ["--markdown", f"{MISSING}.json"], f"{MISSING}.json"),
    ("benchmarks/forecast.py", ["--json", f"{MISSING}/figures.json"], "/nonexistent-draftbench/missing"),
    ("benchmarks/verdicts.py", ["--trials", "many"], "invalid int value: 'many'"),
    ("benchmarks/results_load.py", ["many"], "invalid int value: 'many'"),
    ("benchmarks/results_load.py", ["0"], "at least 1"),
    ("benchmarks/best_k.py", [MISSING], MISSING),
    ("benchmarks/estimate.py", ["--hardware", "h", MISSING], MISSING),
    ("benchmarks/ratios.py", [f"{MISSING}.json"], f"{MISSING}.json"),
    ("benchmarks/kill_loop.py", ["--tries", "many"], "invalid int value: 'many'"),
    ("benchmarks/kill_loop.py", ["--tries", "0"], "--tries"),
    ("benchmarks/drift.py", ["--runs", "many"], "invalid int value: 'many'"),
    ("benchmarks/drift.py", ["--json", f"{MISSING}/figures.json"], "/nonexistent-draftbench/missing"),
    ("benchmarks/rpc_latency.py", ["--delays", "0,slow"], "0,slow"),
    ("benchmarks/rpc_latency.py", ["--target", f"{MISSING}.gguf"], f"{MISSING}.gguf"),
    ("benchmarks/trace_verbosity.py", ["--pairs", "0"], "--pairs"),
    ("benchmarks/trace_verbosity.py", ["--model", f"{MISSING}.gguf"], f"{MISSING}.gguf"),
    ("benchmarks/scale.py", ["--rows", "many"], "invalid int value: 'many'"),
    ("benchmarks/sweep_cost.py", ["--rows", "many"], "invalid int value: 'many'"),
    ("benchmarks/simulation/power_svg.py", ["--today", "many", "42", "out.svg", "run.json"], "'many'"),
    ("benchmarks/simulation/power_svg.py", ["out.svg", f"{MISSING}.json"], f"{MISSING}.json"),
    ("benchmarks/simulation/power_svg.py", [f"{MISSING}/out.svg", f"{MISSING}.json"], f"{MISSING}/out.svg"),
    ("tools/llama_build.py", ["smoke", MISSING], MISSING),
    ("tools/llama_build.py", ["stamp", MISSING, "--llama-cpp", "b1", "--source", "s", "--flavour", "native"], MISSING),
    ("tools/callgraph.py", ["--package", MISSING], MISSING),
    ("tools/hf_checkpoints.py", ["--models", MISSING, "--out", f"{MISSING}-out"], MISSING),
    ("tools/forge.py", ["--set", "everything"], "'everything'"),
    ("sweep.py", ["--config", f"{MISSING}.json"], f"{MISSING}.json"),
    ("bench.py", ["--runs", "many"], "'many'"),
]


@pytest.mark.parametrize("script, args, names", BAD_ARGUMENTS, ids=[f"{s} {' '.join(a)}" for s, a, _ in BAD_ARGUMENTS])
def test_a_bad_argument_is_named_in_a_line_not_a_traceback(script, args, names):
    proc = run(script, *args)
    assert proc.returncode in (1, 2) and "Traceback" not in proc.stderr, f"{proc.returncode}\n{proc.stderr}"
    last = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith(" ")]
    assert last and names in "\n".join(last[-2:]), proc.stderr
    assert proc.stdout.strip() == "", proc.stdout       # nothing ran: no header, no table


def test_the_help_works_from_inside_benchmarks_too():
    """sys.path holds the script's folder first: forge, simulation and the package must all still import."""
    for script in ("benchmarks/kill_loop.py", "benchmarks/forecast.py", "benchmarks/drift.py"):
        proc = run(script, "--help", cwd=str(REPO / "benchmarks"))
        assert proc.returncode == 0 and "usage" in proc.stdout, proc.stderr
