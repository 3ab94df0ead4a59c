"""A busy machine, made visible: what the recorded load (``lifetime/machine_load.py``) says about a run.

The sweep reads the machine's load before it starts (the file's ``load_before``, one entry per run)
and while each row is measured (the row's ``machine_load``). A sweep on a busy machine says so up
front, each row measured under load carries a warning, and the report, ``--compare`` and the
estimates learned from a file say how busy it was — as typed findings naming what to do.
"""

from __future__ import annotations

from ..lifetime.machine_load import BUSY_SHARE, Load
from ..results.file import ResultsFile, Row
from ..results.findings import Code, Finding

THREADS = 'settings.extra_args ["--threads", "N"] (bench.py: -- --threads N)'
WHAT_TO_DO = ("close the other programs (or wait for them) and rerun; on a CPU, leave them a core with "
              "--threads N below your core count")


def load_of(entry: dict | None) -> Load | None:
    """A recorded entry (``load_before[i]``, or a row's ``machine_load``) as a :class:`Load`."""
    if not isinstance(entry, dict):
        return None
    share = entry.get("other_cpu_share")
    load = entry.get("load_avg_1m", entry.get("load_avg_1m_max"))
    return Load(share if isinstance(share, (int, float)) else None, load if isinstance(load, (int, float)) else None,
                entry.get("cpu_count") if isinstance(entry.get("cpu_count"), int) else None,
                float(entry.get("seconds") or 0.0))


def busy_before(load: Load, when: str = "before the sweep started") -> Finding | None:
    """The finding a sweep prints before it starts on a busy machine (None: quiet enough); ``--dry-run``
    says it of the machine right now."""
    if not load.busy:
        return None
    return Finding(Code.BUSY_MACHINE, f"the machine is busy: {when}, {load.describe()}. Every "
                   "figure it measures — and how long it takes — is the busy machine's (a target can run several "
                   f"times slower than on a quiet one): {WHAT_TO_DO}", THREADS)


def busy_row(row: Row) -> Finding | None:
    """The warning of a row measured while other programs kept the machine busy (None: quiet enough)."""
    info = row.machine_load or {}
    mean, highest = info.get("other_cpu_share"), info.get("other_cpu_share_max")
    if not isinstance(mean, (int, float)) or not isinstance(highest, (int, float)) or highest < BUSY_SHARE:
        return None
    worst = f" (up to {highest:.0%} in one block)" if info.get("windows", 1) > 1 and highest > mean + 0.005 else ""
    return Finding(Code.BUSY_MACHINE, f"other programs used {mean:.0%} of the CPU on average while this row was "
                   f"measured{worst}: its tok/s are the busy machine's; {WHAT_TO_DO}", THREADS)


def during(results: ResultsFile) -> Load | None:
    """Other programs' CPU share over every measured row (weighted by seconds), the highest load average."""
    rows = [r.machine_load for r in results.results if isinstance(r.machine_load, dict)]
    known = [(m["other_cpu_share"], m.get("seconds") or 0.0) for m in rows
             if isinstance(m.get("other_cpu_share"), (int, float))]
    weight = sum(s for _, s in known)
    loads = [m["load_avg_1m_max"] for m in rows if isinstance(m.get("load_avg_1m_max"), (int, float))]
    if not rows:
        return None
    cpus = next((m["cpu_count"] for m in rows if isinstance(m.get("cpu_count"), int)), None)
    return Load(sum(v * s for v, s in known) / weight if weight else None, max(loads) if loads else None, cpus,
                sum(float(m.get("seconds") or 0.0) for m in rows))


def describe(results: ResultsFile) -> str | None:
    """'before it: other programs used 85% of the CPU (…); while measuring: 62% on average' — or None
    for a file that recorded no load (older files, upstream's)."""
    parts = []
    before = [load for entry in results.load_before or () if (load := load_of(entry)) is not None]
    if before:
        runs = f" (the last of {len(before)} runs)" if len(before) > 1 else ""
        parts.append(f"before it{runs}: {before[-1].describe()}")
    measuring = during(results)
    if measuring is not None and measuring.other_cpu_share is not None:
        parts.append(f"while measuring: other programs used {measuring.other_cpu_share:.0%} of the CPU on average")
    elif measuring is not None and measuring.load_avg_1m is not None:
        parts.append(f"while measuring: load average up to {measuring.load_avg_1m:.1f} (ours included)")
    return "; ".join(parts) or None


def busy(results: ResultsFile) -> bool:
    """Whether the file was measured on a busy machine (before it started, or while measuring)."""
    before = [load for entry in results.load_before or () if (load := load_of(entry)) is not None]
    measuring = during(results)
    return any(load.busy for load in before) or bool(
        measuring is not None and measuring.other_cpu_share is not None and measuring.other_cpu_share >= BUSY_SHARE)
