"""How long a sweep will take: per combination, from what was measured before.

One model serves ``--dry-run`` (the plan with durations) and the console's ETA. A combination
costs: loading its server, the warm-up, and its requests. Each is taken, in order of
preference, from

1. the same combination measured before — in this results file or in another draftbench results
   file of the same ``hardware`` next to it (``mean_total_time`` per request, ``load_time_s``);
2. the same target measured before (its baseline), for candidates never measured: speculation
   assumed to neither help nor hurt;
3. a short probe of the target (``--dry-run --probe``: one request on its own server, never saved),
   the same way;
4. the model files' sizes: decoding reads the whole model once per token, so tok/s ≈ memory
   bandwidth / model bytes, with :data:`ASSUMED_BANDWIDTH_GBPS` (a guess, said as such).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..common.errors import DraftbenchError
from ..results.file import ResultsFile, Row, load_results
from ..results.kinds import Role
from ..results.peek import peek_header
from .config_file import SweepConfig

ASSUMED_BANDWIDTH_GBPS = 50.0    # between a CPU's (~20) and a laptop GPU's (~200): a guess
ASSUMED_LOAD_GBPS = 2.0          # reading a model file from an SSD into memory
SERVER_OVERHEAD_S = 1.0          # start-up probes, readiness polling, stopping, port release
WARMUP_TOKENS = 64               # measure.py caps warm-up requests at 64 tokens
HISTORY_MAX_FILES = 200          # earlier results files looked at, in name order
HISTORY_MAX_BYTES = 64 * 10**6   # a bigger file of ours is not read for an estimate (a dry run stays quick)


@dataclass(frozen=True)
class Estimate:
    seconds: float
    source: str                      # "measured", "baseline", "probe", "model size" or "unknown"
    load_s: float = 0.0              # one server: loading, start-up overhead and warm-up
    per_request_s: float = 0.0       # one measured request


class Estimator:
    def __init__(self, config: SweepConfig, n_prompts: int, history: tuple[ResultsFile, ...] = ()):
        self.config = config
        self.n_prompts = n_prompts
        self.history = history
        self.rows: dict[tuple, Row] = {}
        self.probed: dict[str, Row] = {}     # target label -> its short probe's row
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
        for row in results.results:
            if row.measured and row.mean_total_time:
                self.rows[(row.role, row.target, row.draft, row.draft_max, row.concurrency)] = row

    def add_probe(self, row: Row) -> None:
        """Learn a target's speed from a short probe of its baseline (``sweep.probe``)."""
        if row.measured and row.mean_total_time:
            self.probed[row.target] = row

    def knows(self, role: str, target: str) -> bool:
        """Whether a combination (or, for candidates, its target's baseline) was measured before."""
        return any(key[0] == role and key[1] == target for key in self.rows)

    def combination(self, role: str, target: str, draft: str | None, draft_max: int | None,
                    target_path: str | None, concurrency: int = 1) -> Estimate:
        s = self.config.settings
        requests = self.n_prompts * (s.get("runs") or 1)
        warmup = s.get("warmup") or 0
        max_tokens = s.get("max_tokens") or 512
        row = self.rows.get((role, target, draft, draft_max, concurrency))
        source = "measured"
        if row is None and role in (Role.SPECULATIVE, Role.CONTROL):
            row, source = self.rows.get((Role.BASELINE, target, None, None, concurrency)), "baseline"
        if row is None and concurrency == 1 and target in self.probed:
            row, source = self.probed[target], "probe"
        if row is not None and row.mean_total_time:
            per_request = row.mean_total_time
            warm = per_request * min(1.0, WARMUP_TOKENS / max_tokens)
            load = row.load_time_s if row.load_time_s is not None else 0.0
            start = load + SERVER_OVERHEAD_S + warmup * warm
            return Estimate(start + requests * per_request, source, start, per_request)
        size = _size(target_path)
        if not size:
            return Estimate(0.0, "unknown")
        tps = ASSUMED_BANDWIDTH_GBPS * 1e9 / size
        start = size / (ASSUMED_LOAD_GBPS * 1e9) + SERVER_OVERHEAD_S + warmup * min(max_tokens, WARMUP_TOKENS) / tps
        return Estimate(start + requests * max_tokens / tps, "model size", start, max_tokens / tps)

    def parts(self, estimate: Estimate, combo) -> tuple[float, float]:
        """(one server's start, one request) of ``estimate``: what a schedule's step costs."""
        return estimate.load_s, estimate.per_request_s


def _size(path: str | None) -> int | None:
    try:
        return os.path.getsize(path) if path else None
    except OSError:
        return None


def estimate_of(estimator: Estimator, combo) -> Estimate:
    """The estimate for a ``sweep.plan.Combination`` (duck-typed: this module sits below the sweep)."""
    cand = combo.candidate
    return estimator.combination(combo.role.value, combo.target.label, cand.label if cand else None,
                                 combo.draft_max, combo.target.path, combo.concurrency)


def total_s(estimator: Estimator, combos) -> float | None:
    """Seconds for ``combos``; None when nothing is known about any of them."""
    estimates = [estimate_of(estimator, c) for c in combos]
    if not estimates or all(e.source == "unknown" for e in estimates):
        return None
    return sum(e.seconds for e in estimates)
