"""``sweep.py --init MODELS_DIR --config-dir OUT``: configs written from a folder of GGUF files.

Every file is read once (its GGUF header, the token list kept whole). Models are grouped into
families by vocabulary with llama.cpp's own compatibility rule (the check the run makes before a
draft is tried), so no config ever pairs models across families. In each family the largest models
(by parameter count) are the targets and every strictly smaller model is a draft for them; the
n-gram methods the llama-server binary offers are candidates for every target, and so are the heads
the files declare: multi-token prediction layers in the target (``<arch>.nextn_predict_layers``) and
EAGLE heads (a GGUF whose architecture names EAGLE). Every file left out is named with the reason.
See docs/init.md.
"""

from __future__ import annotations

import json
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path

from ..common.errors import ModelFileError, UsageError
from ..common.files import atomic_write_text
from ..common.gguf import GGUFInfo, read_with_vocab, vocab_mismatch_of
from ..config.labels import MAX_LABEL

SPLIT_PART = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)
NOT_LANGUAGE_MODELS = ("clip", "mmproj")            # vision projectors and the like
DEFAULT_SETTINGS = {"runs": 2}                      # intervals need repetitions; the rest: the defaults


@dataclass(frozen=True)
class Model:
    path: Path
    info: GGUFInfo
    label: str = ""

    @property
    def params(self) -> int:
        return self.info.n_params

    @property
    def mtp_layers(self) -> int:
        arch = self.info.architecture or ""
        value = self.info.get(f"{arch}.nextn_predict_layers")
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    @property
    def is_eagle_head(self) -> bool:
        return "eagle" in (self.info.architecture or "").lower()


@dataclass
class Family:
    models: list[Model] = field(default_factory=list)

    @property
    def heads(self) -> list[Model]:
        return [m for m in self.models if m.is_eagle_head]

    @property
    def language_models(self) -> list[Model]:
        return [m for m in self.models if not m.is_eagle_head]

    def targets(self) -> list[Model]:
        models = self.language_models
        largest = max((m.params for m in models), default=0)
        return [m for m in models if m.params == largest]

    def drafts(self) -> list[Model]:
        largest = max((m.params for m in self.language_models), default=0)
        return sorted((m for m in self.language_models if m.params < largest), key=lambda m: -m.params)


@dataclass(frozen=True)
class Scan:
    families: list[Family]
    left_out: list[tuple[Path, str]]       # (file, why)


def scan(folder: Path) -> Scan:
    """Read every file under ``folder`` (sorted); group the usable models into families."""
    left_out: list[tuple[Path, str]] = []
    models: list[Model] = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.suffix.lower() != ".gguf":
            left_out.append((path, "not a model (not a .gguf file)"))
            continue
        split = SPLIT_PART.search(path.name)
        if split and int(split.group(1)) > 1:
            left_out.append((path, f"part {int(split.group(1))} of {int(split.group(2))} of a split model "
                                   "(llama-server loads it through part 1)"))
            continue
        try:
            info = read_with_vocab(path)
        except ModelFileError as exc:
            left_out.append((path, exc.problem))
            continue
        arch = info.architecture or ""
        if arch.lower() in NOT_LANGUAGE_MODELS or not info.n_tensors:
            left_out.append((path, f"not a language model (architecture {arch or 'unknown'}"
                                   f"{', no tensors' if not info.n_tensors else ''})"))
            continue
        if not isinstance(info.get("tokenizer.ggml.tokens"), list):
            left_out.append((path, "has no vocabulary (tokenizer.ggml.tokens), so its family cannot be told; "
                                   "add it to a config by hand"))
            continue
        models.append(Model(path, info))
    return Scan(_families(models), left_out)


def _families(models: list[Model]) -> list[Family]:
    """Group by llama.cpp's vocabulary rule against each family's first member (largest first)."""
    families: list[Family] = []
    for model in sorted(models, key=lambda m: (-m.params, str(m.path))):
        home = next((f for f in families if vocab_mismatch_of(f.models[0].info, model.info) is None
                     and vocab_mismatch_of(model.info, f.models[0].info) is None), None)
        if home is None:
            families.append(Family([model]))
        else:
            home.models.append(model)
    return families


def _slug(text: str, limit: int = 60) -> str:
    slug = re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-._+")[:limit]
    return slug or "models"


def _labels(models: list[Model]) -> list[Model]:
    """Each model labelled by its file name (unique, safe in file names)."""
    seen: set[str] = set()
    out = []
    for m in models:
        base = m.path.name[:-5] if m.path.name.lower().endswith(".gguf") else m.path.name
        base = base[:MAX_LABEL - 4] or "model"
        label, n = base, 2
        while label in seen:
            label, n = f"{base} {n}", n + 1
        seen.add(label)
        out.append(Model(m.path, m.info, label))
    return out


def family_name(family: Family) -> str:
    first = family.targets()[0].info
    for key in ("general.basename", "general.name"):
        value = first.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return first.architecture or family.targets()[0].path.stem


def config_for(family: Family, *, spec_types: list[str], hardware: str, name: str) -> tuple[dict, list[str]]:
    """One sweep config for a family, and notes on what it holds."""
    labelled = {m.path: m for m in _labels(family.models)}
    targets = [labelled[m.path] for m in family.targets()]
    drafts = [labelled[m.path] for m in family.drafts()]
    candidates: list[dict] = [{"label": t, "method": t} for t in spec_types if t.startswith("ngram-")]
    notes = []
    if any(m.mtp_layers for m in targets):
        if "draft-mtp" in spec_types:
            candidates.append({"label": "mtp", "method": "draft-mtp"})
            notes.append("the target declares multi-token prediction layers: candidate 'mtp' (draft-mtp)")
        else:
            notes.append("the target declares multi-token prediction layers, but this llama-server offers no "
                         "draft-mtp")
    for head in (labelled[m.path] for m in family.heads):
        if "draft-eagle3" in spec_types:
            candidates.append({"label": head.label, "method": "draft-eagle3",
                               "draft": {"label": head.label + " (head)", "path": str(head.path.absolute())}})
            notes.append(f"{head.path.name} is an EAGLE head: candidate {head.label!r} (draft-eagle3)")
        else:
            notes.append(f"{head.path.name} is an EAGLE head, but this llama-server offers no draft-eagle3")
    config = {"name": name, "hardware": hardware, "backend": "llamacpp", "model_family": family_name(family),
              "targets": [{"label": m.label, "path": str(m.path.absolute())} for m in targets],
              "drafts": [{"label": m.label, "path": str(m.path.absolute())} for m in drafts],
              "candidates": candidates, "settings": dict(DEFAULT_SETTINGS)}
    return config, notes


def this_hardware() -> str:
    """A name for this machine that can be part of file names (the config's ``hardware``): its host name.
    The one rule wherever draftbench names the machine itself (``--init``, the A/B's results file), so
    their files compare, and estimate each other's durations, under one name (docs/init.md)."""
    return _slug(socket.gethostname().split(".")[0], 40) if socket.gethostname() else "this-machine"


@dataclass(frozen=True)
class Written:
    path: Path
    config: dict
    notes: list[str]


def plan_configs(found: Scan, out: Path, *, spec_types: list[str], hardware: str) -> tuple[list[Written], list[str]]:
    """The configs to write (one per family that has something to compare) and the families skipped."""
    planned, skipped, names = [], [], set()
    for family in found.families:
        base = _slug(family_name(family))
        name, n = base, 2
        while name.lower() in names:
            name, n = f"{base}-{n}", n + 1
        names.add(name.lower())
        config, notes = config_for(family, spec_types=spec_types, hardware=hardware, name=name)
        if not config["drafts"] and not config["candidates"]:
            skipped.append(f"{', '.join(m.path.name for m in family.models)}: nothing to compare with (no smaller "
                           "model of the same vocabulary, and no n-gram method or head this llama-server offers)")
            continue
        planned.append(Written(out / f"{name}.json", config, notes))
    return planned, skipped


def write_configs(planned: list[Written]) -> None:
    """Write every config, or none: an existing file in the folder is never overwritten."""
    existing = [w.path for w in planned if w.path.exists()]
    if existing:
        raise UsageError(f"--init would overwrite {', '.join(str(p) for p in existing)}",
                         "move those files away, or give --config-dir an empty folder")
    for w in planned:
        atomic_write_text(w.path, json.dumps(w.config, indent=2, ensure_ascii=False) + "\n")
