"""How busy other programs keep the machine, read before and during a sweep.

A sweep's figures hold for the machine as it was: a target ran 2.31 tok/s while other programs kept
two shared cores busy and 38.72 tok/s when they were quiet (issue 37). Two readings say how busy:

* **other processes' CPU share** (Linux, ``/proc``): the machine's busy CPU time (``/proc/stat``)
  minus our own — this process and the children it reaped (``os.times``), plus every live process
  below a server's supervisor (``escaped.below``: the server and *its* children — vLLM's engine
  subprocess, a tokenizer worker — and, the supervisor being a child subreaper, any that daemonized;
  ``/proc/PID/stat``, their reaped children included) — over the machine's capacity (every CPU)
  between two readings: 0.0 is a machine to ourselves, 1.0 every core taken by others. A helper
  started outside that tree (a daemon the user started, a local RPC server) reads as another program;
  ``analysis/pairing.py`` tells it from a burst by the side it loads. Elsewhere: None (not measured).
* **the load average** (``os.getloadavg``, POSIX): runnable processes averaged over a minute. Before
  a sweep starts it is the others'; while a server runs, that server's threads are in it too.

:class:`Monitor` reads both every few seconds in a daemon thread, so that the load over any recent
window (a block just measured) is known without the code that measures knowing about it.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from . import escaped
from .process import live_pids

# Other processes keeping a quarter of the machine busy change a sweep's figures (and its duration) by
# more than the effects it measures: the sweep says so up front.
BUSY_SHARE = 0.25
BUSY_LOAD_PER_CPU = 0.5        # without /proc: a one-minute load average above half the CPUs, before any server
READ_EVERY_S = 2.0
BEFORE_WINDOW_S = 0.5          # before a sweep or an A/B starts, the load is read over this long
KEEP_READINGS = 4096           # ~2 h 15 min at one reading every 2 s; older windows use the oldest kept


@dataclass(frozen=True)
class Reading:
    """Cumulative counters at one moment (``at_s``: ``time.perf_counter``); None where not readable."""

    at_s: float
    busy_ticks: int | None       # every CPU's busy time since boot (/proc/stat), in clock ticks
    total_ticks: int | None      # every CPU's time since boot
    own_ticks: int | None        # ours: this process, its reaped children, our live servers and supervisors
    load_avg: tuple[float, float, float] | None


@dataclass(frozen=True)
class Load:
    """The machine's load over a window: other processes' mean CPU share and the load average at its end."""

    other_cpu_share: float | None   # 0..1 of the machine's capacity; None: not measured here
    load_avg_1m: float | None
    cpu_count: int | None
    seconds: float

    @property
    def busy(self) -> bool:
        """Busy enough to change what a sweep measures (see :data:`BUSY_SHARE`)."""
        if self.other_cpu_share is not None:
            return self.other_cpu_share >= BUSY_SHARE
        return (self.load_avg_1m is not None and self.cpu_count is not None
                and self.load_avg_1m >= BUSY_LOAD_PER_CPU * self.cpu_count)

    def describe(self) -> str:
        """'other programs used 85% of the CPU (load average 3.2 on 2 cores)', as much as was measured."""
        parts = []
        if self.other_cpu_share is not None:
            parts.append(f"other programs used {self.other_cpu_share:.0%} of the CPU")
        if self.load_avg_1m is not None:
            cores = f" on {self.cpu_count} core{'s' if self.cpu_count != 1 else ''}" if self.cpu_count else ""
            parts.append(f"load average {self.load_avg_1m:.1f}{cores}")
        if not parts:
            return "the machine's load could not be read here"
        return parts[0] + (f" ({parts[1]})" if len(parts) > 1 else "")

    def to_dict(self) -> dict:
        return {"other_cpu_share": _round(self.other_cpu_share, 3), "load_avg_1m": _round(self.load_avg_1m, 2),
                "cpu_count": self.cpu_count, "seconds": _round(self.seconds, 1)}


def _round(x: float | None, digits: int) -> float | None:
    return None if x is None else round(x, digits)


def _machine_ticks() -> tuple[int | None, int | None]:
    """(busy, total) clock ticks of every CPU since boot, from the first line of /proc/stat."""
    try:
        with open("/proc/stat", "rb") as fh:
            fields = fh.readline().split()
    except OSError:
        return None, None
    if not fields or fields[0] != b"cpu":
        return None, None
    try:
        values = [int(v) for v in fields[1:]]
    except ValueError:
        return None, None
    # user nice system idle iowait irq softirq steal [guest guest_nice: already within user and nice]
    total = sum(values[:8])
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return total - idle, total


def _process_ticks(pid: int) -> int:
    """utime + stime + cutime + cstime of a live process (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read()
    except OSError:
        return 0
    fields = text[text.rfind(b")") + 2:].split()      # after the command name, which may hold spaces
    try:
        return sum(int(v) for v in fields[11:15])
    except (ValueError, IndexError):
        return 0


def _own_ticks() -> int | None:
    try:
        hz = os.sysconf("SC_CLK_TCK")
    except (AttributeError, ValueError, OSError):
        return None
    t = os.times()
    mine = round((t.user + t.system + t.children_user + t.children_system) * hz)
    roots = live_pids()
    ours = dict.fromkeys(roots + (escaped.below(roots) if roots else []))
    return mine + sum(_process_ticks(pid) for pid in ours)


def _load_avg() -> tuple[float, float, float] | None:
    try:
        return os.getloadavg()
    except (AttributeError, OSError):
        return None


def read(clock: Callable[[], float] = time.perf_counter) -> Reading:
    busy, total = _machine_ticks()
    return Reading(clock(), busy, total, _own_ticks() if busy is not None else None, _load_avg())


def between(a: Reading, b: Reading) -> Load:
    """The load from reading ``a`` to reading ``b``."""
    share = None
    if None not in (a.busy_ticks, a.total_ticks, a.own_ticks, b.busy_ticks, b.total_ticks, b.own_ticks):
        total = b.total_ticks - a.total_ticks           # type: ignore[operator]
        if total > 0:
            others = (b.busy_ticks - a.busy_ticks) - (b.own_ticks - a.own_ticks)   # type: ignore[operator]
            share = min(1.0, max(0.0, others / total))
    return Load(share, b.load_avg[0] if b.load_avg else None, os.cpu_count(), max(0.0, b.at_s - a.at_s))


def now(window_s: float = 1.0, sleep: Callable[[float], None] = time.sleep) -> Load:
    """The load over the next ``window_s`` seconds (before a sweep: nothing of ours runs yet)."""
    first = read()
    sleep(window_s)
    return between(first, read())


def since(first: Reading, at_least_s: float = 0.0, sleep: Callable[[float], None] = time.sleep) -> Load:
    """The load from ``first`` until now, over at least ``at_least_s`` seconds (waiting out the rest)."""
    wait = at_least_s - (time.perf_counter() - first.at_s)
    if wait > 0:
        sleep(wait)
    return between(first, read())


class Monitor:
    """Readings every :data:`READ_EVERY_S` seconds in a daemon thread; :meth:`over_last` gives the load
    over any recent window. A context manager: the thread stops on exit."""

    def __init__(self, every_s: float = READ_EVERY_S):
        self.every_s = every_s
        self.readings: deque[Reading] = deque(maxlen=KEEP_READINGS)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Monitor:
        self.readings.append(read())
        self._thread = threading.Thread(target=self._run, name="draftbench-load", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.readings.append(read())

    def over_last(self, seconds: float) -> Load | None:
        """The load over the last ``seconds`` (from the reading nearest before that moment; the oldest kept
        if none is that old); None before any reading."""
        if not self.readings:
            return None
        latest = read()
        since = latest.at_s - seconds
        start = self.readings[0]
        for reading in list(self.readings):
            if reading.at_s > since:
                break
            start = reading
        return between(start, latest)


def add_window(summary: dict | None, load: Load) -> dict:
    """A row's ``machine_load`` with one more measuring window: the mean share weighted by seconds, the
    largest of any window, the highest one-minute load average seen (see ``results.value_shapes``)."""
    before = summary or {}
    seconds = (before.get("seconds") or 0.0) + load.seconds
    shares = [(before.get("other_cpu_share"), before.get("seconds") or 0.0), (load.other_cpu_share, load.seconds)]
    known = [(share, s) for share, s in shares if share is not None and s > 0]
    weight = sum(s for _, s in known)
    mean = sum(share * s for share, s in known) / weight if weight else None
    highest = [v for v in (before.get("other_cpu_share_max"), load.other_cpu_share) if v is not None]
    loads = [v for v in (before.get("load_avg_1m_max"), load.load_avg_1m) if v is not None]
    return {"other_cpu_share": _round(mean, 3), "other_cpu_share_max": _round(max(highest), 3) if highest else None,
            "load_avg_1m_max": _round(max(loads), 2) if loads else None, "cpu_count": load.cpu_count,
            "seconds": _round(seconds, 1), "windows": (before.get("windows") or 0) + 1}
