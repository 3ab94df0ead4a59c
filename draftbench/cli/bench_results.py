"""``python bench.py --url … --json FILE``: the measurements as a results file, the one format that
``sweep.py --chart-only``, ``--compare`` and ``--export`` read (docs/results-format.md).

Each server measured is a target with one baseline row (bench.py cannot know what a running server
does, so it claims no candidate); the paired comparison of ``--compare-url``, the servers' addresses
and the prompts sent are kept beside the rows under ``comparison``, ``servers`` and ``prompts``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..backends.base import Server
from ..common.errors import DraftbenchError, ResultsFileError
from ..config.prompts import Prompt
from ..config.settings import Settings
from ..results.file import SCHEMA_VERSION, ResultsFile, Row, now_iso, save_results
from ..results.host import host_info
from ..sweep.init_configs import this_hardware

NAME = "bench"


@dataclass(frozen=True)
class Measured:
    """One server bench.py measured: its label, the backend it was taken for, and its row."""

    label: str
    backend: str
    server: Server
    row: Row


def results_file(measured: Sequence[Measured], settings: Settings, prompts: Sequence[Prompt],
                 comparison: dict | None) -> ResultsFile:
    backends = sorted({m.backend for m in measured})
    return ResultsFile(name=NAME, hardware=this_hardware(), backend=", ".join(backends), model_family="",
                       settings=settings.to_dict(), results=tuple(m.row for m in measured), timestamp=now_iso(),
                       schema_version=SCHEMA_VERSION, tool_version=__version__, host=host_info(), made_by="bench.py",
                       prompt_set={"ids": [p.id for p in prompts], "categories": sorted({p.category for p in prompts})},
                       extra={"servers": [{"label": m.label, "url": m.server.base_url, "version": m.server.version}
                                          for m in measured],
                              "comparison": comparison, "prompts": [p.to_dict() for p in prompts]})


def write(results: ResultsFile, path: Path, flag: str = "--json") -> None:
    try:
        save_results(results, path)
    except ResultsFileError as exc:
        raise DraftbenchError(f"{flag}: {exc.message}", "the measurements above are all there is; choose another "
                              "path") from None
