"""``sweep.py --init MODELS_DIR --config-dir OUT``: configs written from a folder of GGUF files.

Every file is read once (its GGUF header, bounded by what the file holds; the token list digested, never
kept). Models are grouped into
families by vocabulary with llama.cpp's own compatibility rule (the check the run makes before a
draft is tried), so no config ever pairs models across families. In each family the largest models
(by parameter count) are the targets and every strictly smaller model is a draft for them; the
n-gram methods the llama-server binary offers are candidates for every target, and so are the heads
the files declare: multi-token prediction layers in the target (``<arch>.nextn_predict_layers``) and
EAGLE heads (a GGUF whose architecture names EAGLE). Every file left out is named with the reason, and so
is everything that is not a regular file (a FIFO, a device, a dangling or looping link, a folder that
cannot be read). Each config is checked by the same loader a sweep uses before it is written.
See docs/init.md.
"""

from __future__ import annotations

import errno
import json
import os
import re
import socket
import stat
import tempfile
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from ..common.errors import ConfigError, ModelFileError, UsageError
from ..common.files import describe_write_error
from ..common.gguf import GGUFInfo, read_info, vocab_mismatch_of
from ..common.reading import kind_of
from ..common.text_safety import text_problem
from ..config.labels import MAX_LABEL
from ..config.settings import DEFAULTS

SPLIT_PART = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)
NOT_LANGUAGE_MODELS = ("clip", "mmproj")            # vision projectors and the like
# The keys a person most often edits, written at their declared defaults so they are in view (and never draw a
# warning: precision comes from stages of fresh prompts, not from repeating them with settings.runs).
EDITABLE_SETTINGS = ("max_tokens", "stages", "prompts_per_stage", "budget_s")
LISTED_FILES = 5                                    # files of a family named in a message; the rest counted


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


def _entries(folder: Path, left_out: list[tuple[Path, str]]) -> list[Path]:
    """Every regular file under ``folder`` (a link to one counts; linked folders are not followed, so a link
    loop cannot make the walk endless), sorted. Everything else is named in ``left_out`` with what it is:
    a FIFO, a device, a dangling or looping link, a folder that cannot be read. Nothing is opened here.
    Iterative: a folder nested thousands deep is walked, not a RecursionError."""
    files: list[Path] = []
    pending = [folder]
    while pending:
        current = pending.pop()
        try:
            with os.scandir(current) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            left_out.append((current, f"is a folder that cannot be read ({exc.strerror or exc}); its files were "
                                      "not looked at"))
            continue
        for entry in entries:
            path = Path(entry.path)
            try:
                linked = entry.is_symlink()
                st = os.stat(path)      # follows a link: what it points at
            except OSError as exc:
                left_out.append((path, "is a symbolic link that loops (it points, directly or through other "
                                       "links, back to itself)" if exc.errno == errno.ELOOP else
                                       "is a symbolic link to nothing (its target does not exist)" if linked else
                                       f"cannot be looked at ({exc.strerror or exc})"))
                continue
            if stat.S_ISDIR(st.st_mode):
                if linked:
                    left_out.append((path, "is a link to a folder, which --init does not follow (a link can lead "
                                           "back to where it started); give that folder to --init itself"))
                else:
                    pending.append(path)
                continue
            kind = kind_of(st.st_mode)
            if kind is not None:
                left_out.append((path, f"is {kind}, not a model file" + (" (it is a link to one)" if linked else "")))
                continue
            files.append(path)
    return sorted(files, key=str)


def scan(folder: Path) -> Scan:
    """Read every file under ``folder`` (sorted); group the usable models into families."""
    left_out: list[tuple[Path, str]] = []
    models: list[Model] = []
    for path in _entries(folder, left_out):
        if path.suffix.lower() != ".gguf":
            left_out.append((path, "not a model (not a .gguf file)"))
            continue
        if _has_lone_surrogate(str(path)):
            left_out.append((path, "has a name that is not valid UTF-8 text, which a config (JSON) cannot hold; "
                                   "rename it"))
            continue
        split = SPLIT_PART.search(path.name)
        if split and int(split.group(1)) > 1:
            left_out.append((path, f"part {int(split.group(1))} of {int(split.group(2))} of a split model "
                                   "(llama-server loads it through part 1)"))
            continue
        try:
            info = read_info(path)
        except ModelFileError as exc:
            left_out.append((path, exc.problem))
            continue
        arch = info.architecture or ""
        if arch.lower() in NOT_LANGUAGE_MODELS or not info.n_tensors:
            left_out.append((path, f"not a language model (architecture {_plain(arch) or 'unknown'}"
                                   f"{', no tensors' if not info.n_tensors else ''})"))
            continue
        if info.vocab is None:
            left_out.append((path, "has no vocabulary (tokenizer.ggml.tokens), so its family cannot be told; "
                                   "add it to a config by hand"))
            continue
        models.append(Model(path, info))
    return Scan(_families(models), sorted(left_out, key=lambda item: str(item[0])))


def _has_lone_surrogate(text: str) -> bool:
    return any(0xd800 <= ord(ch) <= 0xdfff for ch in text)


def _plain(text: str) -> str:
    """``text`` from a model file as a config may hold it: control, format and unpaired characters become
    spaces (a newline in a GGUF name would make the config invalid), runs of spaces one."""
    cleaned = "".join(" " if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp") else ch for ch in text)
    cleaned = " ".join(cleaned.split())
    return "" if text_problem(cleaned) else cleaned


def _families(models: list[Model]) -> list[Family]:
    """Group by llama.cpp's vocabulary rule against each family's first member (largest first)."""
    families: list[Family] = []
    for model in sorted(models, key=lambda m: (-m.params, str(m.path))):
        home = next((f for f in families if vocab_mismatch_of(f.models[0].info, model.info, name_token=False) is None
                     and vocab_mismatch_of(model.info, f.models[0].info, name_token=False) is None), None)
        if home is None:
            families.append(Family([model]))
        else:
            home.models.append(model)
    return families


def _slug(text: str, limit: int = 60) -> str:
    slug = re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-._+")[:limit]
    return slug or "models"


def _labels(models: list[Model]) -> list[Model]:
    """Each model labelled by its file name (unique, safe in file names and on a terminal)."""
    seen: set[str] = set()
    out = []
    for m in models:
        base = m.path.name[:-5] if m.path.name.lower().endswith(".gguf") else m.path.name
        base = _plain(base.replace("/", " ").replace("\\", " ")).strip(" .")[:MAX_LABEL - 4].strip() or "model"
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
        if isinstance(value, str) and _plain(value):
            return _plain(value)[:MAX_LABEL]
    return _plain(first.architecture or "") or _plain(family.targets()[0].path.stem) or "models"


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
              "candidates": candidates, "settings": DEFAULTS.values_of(EDITABLE_SETTINGS)}
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


@dataclass(frozen=True)
class Skipped:
    """A family no config is written for, and why: nothing to compare, or a config a sweep would refuse."""

    why: str
    refused: bool = False

    def __str__(self) -> str:
        return self.why


def plan_configs(found: Scan, out: Path, *, spec_types: list[str],
                 hardware: str) -> tuple[list[Written], list[Skipped]]:
    """The configs to write (one per family that has something to compare, each accepted by the loader a
    sweep uses) and the families skipped, each with why."""
    from .config_file import validate_config

    planned: list[Written] = []
    skipped: list[Skipped] = []
    names: set[str] = set()
    for family in found.families:
        base = _slug(family_name(family))
        name, n = base, 2
        while name.lower() in names:
            name, n = f"{base}-{n}", n + 1
        names.add(name.lower())
        config, notes = config_for(family, spec_types=spec_types, hardware=hardware, name=name)
        files = ", ".join(m.path.name for m in family.models[:LISTED_FILES])
        files += f" and {len(family.models) - LISTED_FILES} more" if len(family.models) > LISTED_FILES else ""
        if not config["drafts"] and not config["candidates"]:
            skipped.append(Skipped(f"{files}: nothing to compare with (no smaller model of the same vocabulary, and "
                                   "no n-gram method or head this llama-server offers)"))
            continue
        path = out / f"{name}.json"
        try:     # never write a config that a sweep would refuse
            validate_config(json.loads(json.dumps(config)), source=str(path), base_dir=str(out))
        except ConfigError as exc:
            first = exc.problems[0] if exc.problems else None
            skipped.append(Skipped(f"{files}: the config written for them would be refused: {first}"
                                   + (f" (and {len(exc.problems) - 1} more problems)" if len(exc.problems) > 1 else "")
                                   + "; split the models over several folders, or write the config by hand",
                                   refused=True))
            continue
        planned.append(Written(path, config, notes))
    return planned, skipped


def write_configs(planned: list[Written]) -> None:
    """Write every config, or none: nothing already in the folder is overwritten or written through (a
    symbolic link there, even a dangling one, is refused)."""
    existing = [w.path for w in planned if os.path.lexists(w.path)]
    if existing:
        raise UsageError(f"--init would overwrite {', '.join(str(p) for p in existing)}",
                         "move those files away, or give --config-dir an empty folder")
    written: list[Path] = []
    try:
        for w in planned:
            _write_new(w.path, json.dumps(w.config, indent=2, ensure_ascii=False) + "\n")
            written.append(w.path)
    except OSError as exc:
        for path in written:     # all or none
            try:
                path.unlink()
            except OSError:
                pass
        raise UsageError(f"cannot write {exc.filename or 'a config'}: {describe_write_error(exc)}",
                              "give --config-dir a folder you can write to, with room on its disk") from None


def _write_new(path: Path, text: str) -> None:
    """Write a new file (a temporary file, then a hard link to the final name: it fails if anything, a
    symlink included, appeared there meanwhile, and never follows one)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:40]}.", suffix=".tmp", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise UsageError(f"--init would overwrite {path}", "move it away, or give --config-dir an empty "
                             "folder") from None
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINKS or os.path.lexists(path):
                raise
            os.replace(tmp, path)     # a file system without hard links (FAT, some network shares)
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


_NO_HARD_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
