"""What differs between the files being compared, as typed values: what was measured (settings,
prompts), the software that measured it (server build, backend, draftbench version), the
hardware, and how much data each file holds. A comparison lists every difference; hiding one
would let a change of ``max_tokens`` pass for a faster machine."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum

from ...analysis import busy
from ...backends import REGISTRY
from ...config.settings import measured_keys
from .match import ComparedFile

NOT_RECORDED = "not recorded"


class DiffKind(str, Enum):
    MEASUREMENT = "measurement"   # changes the numbers themselves: not like for like
    BUILD = "build"               # the software that measured
    HARDWARE = "hardware"         # usually the point of the comparison
    DATA = "data"                 # what the file holds (per-request data or not)


@dataclass(frozen=True)
class Difference:
    """One way the files differ: ``values`` has one entry per file, in file order."""

    kind: DiffKind
    what: str
    values: tuple[str, ...]
    note: str = ""

    def message(self, letters: tuple[str, ...]) -> str:
        vals = "; ".join(f"{letter} {value}" for letter, value in zip(letters, self.values))
        return f"{self.what}: {vals}" + (f" — {self.note}" if self.note else "")


def _show(value) -> str:
    if value is None:
        return NOT_RECORDED
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _versions(f: ComparedFile) -> str | None:
    found = list(dict.fromkeys(str(v) for r in f.results.results if (v := (r.server or {}).get("version"))))
    return ", ".join(found) if found else None


def _prompt_ids(f: ComparedFile) -> str | None:
    ids = list(dict.fromkeys(q.prompt_id for r in f.results.results for q in r.requests))
    return ", ".join(ids) if ids else None


def _differ(values: list) -> bool:
    return len({json.dumps(v, sort_keys=True, default=str) for v in values}) > 1


# Other programs' CPU shares this far apart (or one file busy, the other quiet) make every tok/s differ.
LOAD_APART = 0.15


def _load_difference(files: list[ComparedFile]) -> Difference | None:
    """The machine's load while each file was measured (``analysis/busy.py``), where it differs enough to
    move the numbers — or was recorded in some files only."""
    described = [busy.describe(f.results) for f in files]
    if all(d is None for d in described):
        return None
    states = {busy.busy(f.results) for f in files}
    shares = [m.other_cpu_share for f in files if (m := busy.during(f.results)) is not None
              and m.other_cpu_share is not None]
    apart = len(shares) > 1 and max(shares) - min(shares) >= LOAD_APART
    if None not in described and len(states) == 1 and not apart:
        return None
    return Difference(DiffKind.MEASUREMENT, "machine load",
                      tuple(f"{'busy' if busy.busy(f.results) else 'quiet'} ({d})" if d else NOT_RECORDED
                            for f, d in zip(files, described)),
                      "a busy machine runs every combination slower: compare the speed-ups within each file, "
                      "not the tok/s across them")


def file_differences(files: list[ComparedFile]) -> list[Difference]:
    out: list[Difference] = []

    def add(kind: DiffKind, what: str, values: list, note: str = "") -> None:
        if _differ(values):
            out.append(Difference(kind, what, tuple(_show(v) for v in values), note))

    keys = measured_keys(*(b.settings_class for b in REGISTRY.values()))
    # as each file records them: None (the default) and absent (an upstream file) read the same
    recorded = [f.results.recorded_settings(keys) for f in files]
    for key in keys:
        add(DiffKind.MEASUREMENT, f"settings.{key}", [r.get(key) for r in recorded],
            "max_tokens changes how long each rate is averaged over" if key == "max_tokens" else "")
    if all(f.has_requests for f in files):
        add(DiffKind.MEASUREMENT, "prompts measured", [_prompt_ids(f) for f in files],
            "different prompts accept differently: per-request pairing is off")
    add(DiffKind.BUILD, "backend", [f.results.backend for f in files])
    add(DiffKind.BUILD, "server version", [_versions(f) for f in files],
        "acceptance can change between server builds")
    add(DiffKind.BUILD, "draftbench version", [f.results.tool_version if not f.results.is_upstream
                                               else "upstream draftbench" for f in files])
    add(DiffKind.HARDWARE, "hardware", [f.results.hardware for f in files])
    for key, what in (("cpu", "CPU"), ("cpu_count", "CPU cores"), ("memory_gb", "memory (GB)"), ("os", "OS"),
                      ("machine", "architecture")):
        add(DiffKind.HARDWARE, what, [(f.results.host or {}).get(key) for f in files])
    load = _load_difference(files)
    if load is not None:
        out.append(load)
    add(DiffKind.DATA, "per-request data", ["yes" if f.has_requests else "no" for f in files],
        "rows without it are compared as ratios of means, with no confidence interval")
    return out
