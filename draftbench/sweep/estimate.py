"""How long a sweep will take: per combination, from what was measured before.

One model serves ``--dry-run`` (the plan with durations), the console's ETA and the race's upper
bound. A combination costs: loading its server, the warm-up, and its requests, which N streams run
N at a time. A request's time is rebuilt from what an earlier request measured — its time to the
first token and its decode rate — at *this* config's ``max_tokens`` (a request that stopped by
itself stops there again; one cut at the old limit runs to the new one), so a changed
``max_tokens`` changes the estimate. Each is taken, in order of preference, from

1. the same combination measured before — in this results file or in another draftbench results
   file of the same ``hardware`` next to it;
2. the same combination at one stream, for a concurrency level never measured: each request slowed
   as much as the target's baseline was at that level (or, not known, as if the streams ran one
   after the other);
3. for a ceiling run, its draft's real run (at full acceptance, each verify step yields k+1 tokens
   instead of the mean accepted length the real run measured);
4. the same target measured before (its baseline), for candidates never measured: scaled by how much
   slower or faster this target's candidates measured so far ran than its baseline (on a CPU,
   speculation often costs several times the target alone);
5. a short probe of the target (``--dry-run --probe``: one request on its own server, never saved),
   the same way;
6. the model files' sizes: decoding reads the whole model once per token, so tok/s ≈ memory
   bandwidth / model bytes, with :data:`ASSUMED_BANDWIDTH_GBPS` (a guess, said as such).

``benchmarks/estimate.py`` reports these estimates against the measured wall times.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass
from pathlib import Path

from ..common.errors import DraftbenchError
from ..lifetime.machine_load import Load
from ..results.file import ResultsFile, Row, load_results
from ..results.kinds import Role
from ..results.peek import peek_header
from .config_file import SweepConfig

ASSUMED_BANDWIDTH_GBPS = 50.0    # between a CPU's (~20) and a laptop GPU's (~200): a guess
ASSUMED_LOAD_GBPS = 2.0          # reading a model file from an SSD into memory
SERVER_OVERHEAD_S = 1.0          # start-up probes, readiness polling, stopping, port release
WARMUP_TOKENS = 64               # measure.py caps warm-up requests at 64 tokens
FULL = "full"                    # the ceiling level at full acceptance (analysis.draft.ceiling.Level.FULL)
HISTORY_MAX_FILES = 200          # earlier results files looked at, in name order
HISTORY_MAX_BYTES = 64 * 10**6   # a bigger file of ours is not read for an estimate (a dry run stays quick)


@dataclass(frozen=True)
class Duration:
    """How long one combination is expected to take, and what that expectation was learned from (not the
    analysis's ``Estimate`` of a speed-up)."""
    seconds: float
    source: str                      # "measured", "one stream", "real run", "baseline", "probe", "model size", "unknown"
    fixed_s: float = 0.0             # of which: loading the server, its start-up and its warm-up
    request_s: float = 0.0           # one request (N streams: one round of N), as the rest was counted
    learned_load: float | None = None   # other programs' CPU share while the row it was learned from ran


@dataclass(frozen=True)
class Known:
    """A measured row and the ``max_tokens`` its requests were capped at (None: not recorded)."""

    row: Row
    max_tokens: int | None

    @property
    def load(self) -> float | None:
        """Other programs' CPU share while the row was measured (None: not recorded)."""
        share = (self.row.machine_load or {}).get("other_cpu_share")
        return float(share) if isinstance(share, (int, float)) else None

    def request_s(self, max_tokens: int, decode_speedup: float = 1.0, *, made_at: int | None = None) -> float | None:
        """Mean seconds for one request at ``max_tokens``, rebuilt from each measured request (TTFT, then
        the decode rate times ``decode_speedup`` for the tokens it would generate). ``made_at``: the limit
        to assume where the row's own is not recorded."""
        times = []
        for r in self.row.requests:
            if r.error is not None or r.ttft_s is None or not r.decode_tps or r.completion_tokens is None:
                continue
            tokens = max_tokens if r.finish_reason == "length" else min(r.completion_tokens, max_tokens)
            times.append(r.ttft_s + max(0, tokens - 1) / (r.decode_tps * decode_speedup))
        if times:
            return statistics.fmean(times)
        total = self.row.mean_total_time
        if not total:
            return None
        # no per-request data (an upstream file): its mean, scaled to the new limit
        made = self.max_tokens or made_at
        scale = max_tokens / made if made else 1.0
        return total * scale / decode_speedup


class Estimator:
    def __init__(self, config: SweepConfig, n_prompts: int, history: tuple[ResultsFile, ...] = ()):
        self.config = config
        self.n_prompts = n_prompts
        self.history = history
        self.rows: dict[tuple, Known] = {}
        self.probed: dict[str, Known] = {}     # target label -> its short probe's row
        for results in history:
            self.add(results)

    @classmethod
    def for_results_path(cls, config: SweepConfig, n_prompts: int, results_path: Path) -> Estimator:
        """With the draftbench results files of the same hardware in the results file's folder.

        Cheap whatever the folder holds: each ``*.json`` is judged by its first bytes (see
        :func:`draftbench.results.peek.peek_header`: a FIFO, a device, another tool's JSON or an
        upstream file is passed over unread), and only files of ours under :data:`HISTORY_MAX_BYTES`
        are read whole."""
        files = []
        folder = results_path.parent
        candidates = sorted(folder.glob("*.json")) if folder.is_dir() else []
        for path in candidates[:HISTORY_MAX_FILES]:     # bounded: a folder of thousands is not read every dry run
            header = peek_header(path)
            if header is None or not header.ours or header.keys.get("hardware") != config.hardware:
                continue
            try:
                if path.stat().st_size > HISTORY_MAX_BYTES:
                    continue
                files.append(load_results(path))
            except (OSError, DraftbenchError):
                continue
        return cls(config, n_prompts, tuple(files))

    def add(self, results: ResultsFile) -> None:
        """Learn from a results file (later files win: the current sweep is added last)."""
        # a file that does not say was made at this config's max_tokens (see Known.request_s)
        max_tokens = _whole(results.read_settings().max_tokens) if results.records_setting("max_tokens") else None
        for row in results.results:
            if row.measured and (row.mean_total_time or row.requests):
                level = (row.synthetic or {}).get("level") if row.role == Role.CEILING.value else None
                self.rows[(row.role, row.target, row.draft, row.draft_max, row.concurrency, level)] = \
                    Known(row, max_tokens)

    def add_probe(self, row: Row) -> None:
        """Learn a target's speed from a short probe of its baseline (``sweep.probe``), made at this config's
        ``max_tokens``."""
        if row.measured and row.mean_total_time:
            self.probed[row.target] = Known(row, self._max_tokens())

    def knows(self, role: str, target: str) -> bool:
        """Whether a combination (or, for candidates, its target's baseline) was measured before."""
        return any(key[0] == role and key[1] == target for key in self.rows)

    def _max_tokens(self) -> int:
        return self.config.settings.max_tokens

    def _request_s(self, known: Known | None) -> float | None:
        return known.request_s(self._max_tokens(), made_at=self._max_tokens()) if known else None

    def _get(self, role: str, target: str, draft: str | None, draft_max: int | None, concurrency: int,
             level: str | None = None) -> Known | None:
        return self.rows.get((role, target, draft, draft_max, concurrency, level))

    def _baseline(self, target: str, concurrency: int) -> Known | None:
        return self._get(Role.BASELINE.value, target, None, None, concurrency)

    def _slowdown(self, target: str, concurrency: int) -> float:
        """How much longer a request takes at ``concurrency`` streams than alone: the target's baselines
        at both say; unknown, the streams are taken to run one after the other (no gain from them)."""
        one, many = self._baseline(target, 1), self._baseline(target, concurrency)
        a = self._request_s(one)
        b = self._request_s(many)
        return b / a if a and b else float(concurrency)

    def _candidate_factor(self, target: str, concurrency: int) -> float:
        """How much longer this target's measured candidates took per request than its baseline (median)."""
        base_s = self._request_s(self._baseline(target, concurrency))
        if not base_s:
            return 1.0
        ratios = [s / base_s for key, known in self.rows.items()
                  if key[0] == Role.SPECULATIVE.value and key[1] == target and key[4] == concurrency
                  and (s := self._request_s(known))]
        return statistics.median(ratios) if ratios else 1.0

    def combination(self, role: str, target: str, draft: str | None, draft_max: int | None,
                    target_path: str | None, concurrency: int = 1, level: str | None = None) -> Duration:
        requests = self.n_prompts * self.config.settings.runs
        warmup = self.config.settings.warmup
        max_tokens = self._max_tokens()
        rounds = math.ceil(requests / concurrency)     # N streams take N requests at a time

        def made_of(known: Known, source: str, *, factor: float = 1.0, decode_speedup: float = 1.0) -> Duration | None:
            per_request = known.request_s(max_tokens, decode_speedup, made_at=max_tokens)
            if per_request is None:
                return None
            warm = known.request_s(min(max_tokens, WARMUP_TOKENS), decode_speedup, made_at=max_tokens) or 0.0
            load = known.row.load_time_s if known.row.load_time_s is not None else 0.0
            fixed = load + SERVER_OVERHEAD_S + factor * warmup * warm
            return Duration(fixed + factor * rounds * per_request, source, fixed, factor * per_request, known.load)

        candidates: list[Duration | None] = []
        exact = self._get(role, target, draft, draft_max, concurrency, level)
        if exact:
            candidates.append(made_of(exact, "measured"))
        if concurrency != 1 and (alone := self._get(role, target, draft, draft_max, 1, level)):
            candidates.append(made_of(alone, "one stream", factor=self._slowdown(target, concurrency)))
        if role == Role.CEILING.value and (real := self._get(Role.SPECULATIVE.value, target, draft, draft_max, 1)):
            candidates.append(made_of(real, "real run", decode_speedup=_full_acceptance_gain(real.row, level)))
        if role in (Role.SPECULATIVE.value, Role.CONTROL.value, Role.CEILING.value):
            base = self._baseline(target, concurrency)
            factor = self._candidate_factor(target, concurrency) if role != Role.CONTROL.value else 1.0
            if base:
                candidates.append(made_of(base, "baseline", factor=factor))
            elif concurrency != 1 and (alone := self._baseline(target, 1)):
                candidates.append(made_of(alone, "baseline", factor=factor * self._slowdown(target, concurrency)))
        if target in self.probed:
            candidates.append(made_of(self.probed[target], "probe", factor=float(concurrency)))
        found = next((e for e in candidates if e is not None), None)
        if found is not None:
            return found
        size = _size(target_path)
        if not size:
            return Duration(0.0, "unknown")
        tps = ASSUMED_BANDWIDTH_GBPS * 1e9 / size
        fixed = size / (ASSUMED_LOAD_GBPS * 1e9) + SERVER_OVERHEAD_S + warmup * min(max_tokens, WARMUP_TOKENS) / tps
        return Duration(fixed + requests * max_tokens / tps, "model size", fixed, max_tokens / tps)

    def parts(self, estimate: Duration, combo) -> tuple[float, float]:
        """(one server's start, one request) of ``estimate``: what a stage's step costs (sweep/target_plan.py)."""
        return estimate.fixed_s, estimate.request_s


def _full_acceptance_gain(real: Row, level: str | None) -> float:
    """A ceiling run at full acceptance yields k+1 tokens per verify step where the real run yielded its
    mean accepted length: its decode runs that much faster (at its measured acceptance: the same)."""
    k = len(real.accepted_per_pos) if real.accepted_per_pos else real.draft_max
    if level != FULL or not k or not real.mean_accepted_len:
        return 1.0
    return max(1.0, (k + 1) / real.mean_accepted_len)


def _whole(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _size(path: str | None) -> int | None:
    try:
        return os.path.getsize(path) if path else None
    except OSError:
        return None


def estimate_of(estimator: Estimator, combo) -> Duration:
    """The estimate for a ``sweep.plan.Combination`` (duck-typed: this module sits below the sweep)."""
    cand = combo.candidate
    level = (combo.synthetic or {}).get("level") if combo.role == Role.CEILING else None
    return estimator.combination(combo.role.value, combo.target.label, cand.label if cand else None,
                                 combo.draft_max, combo.target.path, combo.concurrency, level)


def total_s(estimator: Estimator, combos) -> float | None:
    """Seconds for ``combos``; None when nothing is known about any of them."""
    estimates = [estimate_of(estimator, c) for c in combos]
    if not estimates or all(e.source == "unknown" for e in estimates):
        return None
    return sum(e.seconds for e in estimates)


# How far a plan's estimate can be off, by the weakest source it rests on (the figures: benchmarks/estimate.py
# and issue 37, where a guess from model sizes said ~37 s for a sweep that took 1h35m on a busy 2-core machine).
ACCURACY = {
    "model size": "a guess from the model files' sizes and an assumed memory bandwidth: it can be 100x short on a "
                  "CPU or a busy machine",
    "baseline": "learned from each target's earlier baseline, with candidates scaled as the measured ones ran: "
                "often within a factor of 2-3, more for candidates unlike those measured",
    "probe": "learned from one request per target just now: within a factor of about 2-3 while the machine's load "
             "stays as it is",
    "measured": "learned from these same combinations measured before: close, while the machine's load stays as "
                "it was",
}
ORDER = ("model size", "baseline", "probe", "measured")
LOAD_APART = 0.15        # other programs' share this much higher or lower now than when learned: said


def accuracy(estimates: list[Duration], *, probed: bool, now: Load | None = None) -> list[str]:
    """What ``--dry-run`` says about how far its estimate can be off: the weakest source it rests on, the
    load its figures were learned under (against ``now``, the machine's load right now), and ``--probe``
    where a guess could be replaced by a measurement."""
    sources = {e.source for e in estimates if e.source != "unknown"}
    weakest = next((s for s in ORDER if s in sources or (s == "baseline" and sources & {"one stream", "real run"})),
                   None)
    lines = []
    if weakest is not None:
        lines.append(f"How far off: {ACCURACY[weakest]}.")
    if "model size" in sources and not probed:
        lines.append("  For a measured estimate, add --probe (one request of each target, nothing saved): "
                     "python sweep.py --config … --dry-run --probe")
    learned = [e.learned_load for e in estimates if e.learned_load is not None]
    if learned:
        mean = statistics.fmean(learned)
        text = f"  Learned from rows measured while other programs used {mean:.0%} of the CPU on average"
        current = now.other_cpu_share if now is not None else None
        if current is None:
            text += ": a quieter machine runs it faster, a busier one slower."
        else:
            text += f"; right now they use {current:.0%}"
            text += (", so it should run faster than estimated." if current < mean - LOAD_APART else
                     ", so it may run slower than estimated." if current > mean + LOAD_APART else ".")
        lines.append(text)
    return lines
