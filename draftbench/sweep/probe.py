"""``--dry-run --probe``: a short probe of each target no earlier results file knows, so the
estimate rests on this machine's speed instead of a guess from the model size.

One server per target (its baseline): loaded, warmed up, one request of the sweep's own
``max_tokens`` measured; the row is never saved — only the estimate learns from it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..backends.base import Backend
from ..config.prompts import prompts_for
from ..measure.sequential import MeasureOptions, Schedule
from ..results.kinds import Role
from .config_file import SweepConfig
from .console import Reporter
from .estimate import Estimator
from .plan import Combination, plan
from .runner import CombinationRunner, RunnerIO


def probe_targets(config: SweepConfig, backend: Backend, estimator: Estimator, reporter: Reporter) -> list[str]:
    """Probe every target whose baseline the estimator has no measurement of; returns one line per
    target saying what the probe found (or why it could not measure)."""
    prompts = prompts_for(config.settings).prompts
    options = MeasureOptions.from_settings(config.settings)
    lines = []
    baselines = [c for c in plan(config) if c.role is Role.BASELINE and c.concurrency == 1]
    with tempfile.TemporaryDirectory(prefix="draftbench-probe-") as logs:
        runner = CombinationRunner(backend, config.backend, config.settings, prompts, options,
                                   RunnerIO(Path(logs), reporter))
        for index, combo in enumerate(baselines, 1):
            if estimator.knows(combo.role.value, combo.target.label):
                lines.append(f"{combo.target.label}: measured before, not probed")
                continue
            lines.append(_probe(runner, combo, index, estimator))
    return lines


def _probe(runner: CombinationRunner, combo: Combination, index: int, estimator: Estimator) -> str:
    row = runner.run(combo, index, {}, Schedule(((0, 0),)))
    if not row.ok or not row.mean_total_time:
        return f"{combo.target.label}: the probe could not measure ({row.reason or row.status}); estimated from its size"
    estimator.add_probe(row)
    load = f", loaded in {row.load_time_s:.1f} s" if row.load_time_s is not None else ""
    return f"{combo.target.label}: {row.mean_tps or 0:.1f} tok/s on one request{load}"
