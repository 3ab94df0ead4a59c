"""Hugging Face checkpoints for vLLM, made from the forged SmolLM2 GGUFs (no model hub is reachable here).

Run with the vLLM environment's Python (``make vllm`` does): ``transformers`` reads a GGUF (its GGUF loader
dequantises the weights; needs the ``gguf`` package) and ``save_pretrained`` writes a folder vLLM loads.
The target (the 2x-deep forged SmolLM2) and the draft (the real 135M) come from one GGUF vocabulary, so
they share one tokenizer, as vLLM's draft_model method requires.

Usage: ``python tools/hf_checkpoints.py --models DIR --out DIR`` (prints ``name path`` per checkpoint).
Each checkpoint is written to a temporary folder and renamed when complete, so an interrupted run never
leaves a folder that looks finished; a finished one is kept (delete it to rebuild).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

# checkpoint folder -> the forged GGUF it is made from (tools/forge.py names)
CHECKPOINTS = {
    "smollm2-target-2x": "smollm2-target-2x.Q4_1.gguf",       # target: SmolLM2 + an epsilon-scaled copy (60 blocks)
    "smollm2-135m": "SmolLM2-135M-Instruct.Q4_1.gguf",        # draft: the real SmolLM2-135M-Instruct
}
DTYPE = "float32"   # vLLM's CPU build runs float32 on any x86 CPU; the models are small (0.5 and 1 GB)
DONE = ".draftbench-complete"


def convert(gguf_path: Path, out: Path) -> Path:
    if (out / DONE).is_file():
        return out
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    work = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                     dtype=getattr(torch, DTYPE))
        # The loader has already dequantised every weight; it only still marks the model as GGUF-quantised,
        # which save_pretrained refuses. What is saved is plain float weights.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(str(work), safe_serialization=True)
        tokenizer.save_pretrained(str(work))
        (work / DONE).write_text(f"from {gguf_path.name}\n")
        if out.exists():
            shutil.rmtree(out)
        os.replace(work, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python tools/hf_checkpoints.py", description=__doc__.splitlines()[0])
    p.add_argument("--models", type=Path, required=True, help="folder of the forged GGUFs (make models)")
    p.add_argument("--out", type=Path, required=True, help="folder the checkpoints are written to")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, gguf in CHECKPOINTS.items():
        source = args.models / gguf
        if not source.is_file():
            print(f"Error: {source} is missing; run `make models` first", file=sys.stderr)
            return 1
        print(f"{name} {convert(source, args.out / name)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
