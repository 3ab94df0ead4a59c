#!/usr/bin/env python3
"""Print the ratios a results file supports: speed-up vs baseline (with its CI), measured vs
predicted speed-up, and client vs server decode tok/s (how much the measurement itself costs).

    python benchmarks/ratios.py results/<file>.json

Ratios, not absolute timings: they carry over between machines of the same kind and are what
docs/benchmarks.md quotes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from draftbench.analysis.stats import describe_speedup
from draftbench.analysis.verdict import analyze
from draftbench.common.errors import DraftbenchError
from draftbench.results.file import load_results
from draftbench.results.kinds import Role


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", metavar="RESULTS_FILE", help="a results file (results/<file>.json)")
    path = p.parse_args(argv).results
    try:
        results = analyze(load_results(path))
    except DraftbenchError as exc:                    # its own fix names sweep.py's --results, not this argument
        print(f"Error: {exc.message}\n  Fix: give ratios.py a results file that sweep.py wrote", file=sys.stderr)
        return exc.exit_code
    print(f"{results.name} on {results.hardware} ({results.backend})")
    print(f"{'combination':48s} {'tok/s':>8s} {'accept':>7s} {'speed-up vs baseline':>30s} "
          f"{'predicted':>9s} {'client/server':>13s}")
    for row in results.results:
        if not row.ok:
            continue
        name = row.target + (f" + {row.draft}" if row.draft and row.role is Role.SPECULATIVE else "") + \
            (f" (k={row.draft_max})" if row.draft_max else "") + ("" if row.role in (Role.BASELINE, Role.SPECULATIVE)
                                                                 else f" [{row.role}]") + \
            (f" [{row.concurrency} streams]" if row.concurrency != 1 else "")
        pairs = [r.decode_tps / r.server_decode_tps for r in row.requests
                 if r.decode_tps and r.server_decode_tps]
        client_server = f"{statistics.median(pairs):.3f}" if pairs else "n/a"
        predicted = row.theory.predicted_speedup if row.theory else None
        print(f"{name[:48]:48s} {row.mean_tps or 0:8.2f} "
              f"{'n/a' if row.acceptance_rate is None else f'{row.acceptance_rate:.0%}':>7s} "
              f"{describe_speedup(row.speedup) if row.speedup else '':>30s} "
              f"{f'{predicted:.2f}x' if predicted else '':>9s} {client_server:>13s}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
