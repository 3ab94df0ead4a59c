"""What ``python bench.py --url`` prints: the run's header, each server's table and the comparison.

Every figure printed is read from the rows (and the comparison) that the results file holds too.
"""

from __future__ import annotations

from ..analysis.draft.positions import diagnose
from ..analysis.stats import describe_speedup, summarize
from ..results.file import Row
from ..results.speedup import Speedup

RULE = "=" * 78


def fmt(value, unit: str, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}{unit}"


def percentiles_text(p: dict | None, unit: str) -> str:
    return "n/a" if not p else "  ".join(f"{q}={p[q]:.3f}{unit}" for q in ("p50", "p90", "p99")) + f"  (n={p['n']})"


def print_header(prompts: int, runs: int, max_tokens: int, temperature: float, concurrency: int) -> None:
    streams = f", {concurrency} concurrent streams" if concurrency > 1 else ""
    print(f"{RULE}\n  draftbench bench — {prompts} prompts x {runs} run(s), max_tokens {max_tokens}, "
          f"temperature {temperature:g}{streams}\n{RULE}")


def print_level(row: Row) -> None:
    """What N streams at once did: aggregate throughput, latency percentiles and the server's own counters."""
    load = row.load or {}
    side = load.get("server") or {}
    server_view = []
    if side.get("slots") is not None:
        server_view.append(f"{len(side['slots'])} slots")
    if side.get("busy_slots_max") is not None:
        server_view.append(f"at most {side['busy_slots_max']} busy")
    if side.get("busy_slots_per_decode") is not None:
        server_view.append(f"{side['busy_slots_per_decode']:.2f} busy per decode step")
    print(f"  {'streams':<18} {load.get('streams')} at once (at most {load.get('in_flight_max')} in flight"
          + (f"; server: {', '.join(server_view)}" if server_view else "") + ")")
    print(f"  {'aggregate tok/s':<18} {fmt(load.get('aggregate_tps'), '')} over {fmt(load.get('window_s'), 's')} "
          f"({load.get('output_tokens')} tokens, all streams)")
    print(f"  {'ttft':<18} {percentiles_text(load.get('ttft_s'), 's')}")
    print(f"  {'latency (e2e)':<18} {percentiles_text(load.get('total_s'), 's')}")
    checks = side.get("checks") or {}
    if checks:
        agree = all(c["match"] for c in checks.values())
        print(f"  {'server counters':<18} " + ("per-request counters add up to the server's totals: " if agree else
                                               "per-request counters do NOT add up to the server's totals: ")
              + ", ".join(f"{name} {c['requests']}{' = ' if c['match'] else ' vs '}{c['server']}"
                          for name, c in checks.items()))


def print_table(row: Row) -> None:
    print(f"\n{RULE}\n  RESULTS: {row.target}\n{RULE}")
    metrics = [("ttft", row.ttft_s, "s", 3), ("decode tok/s", row.tps, "", 2), ("server tok/s", row.server_tps, "", 2),
               ("total time", row.total_s, "s", 2),
               ("completion tokens", summarize(r.completion_tokens for r in row.requests), "", 0)]
    for name, s, unit, d in metrics:
        if not s:
            print(f"  {name:<18} n/a")
            continue
        print(f"  {name:<18} min={fmt(s['min'], unit, d):>9}  median={fmt(s['median'], unit, d):>9}  "
              f"mean={fmt(s['mean'], unit, d):>9}  p95={fmt(s['p95'], unit, d):>9}  max={fmt(s['max'], unit, d):>9}")
    if row.concurrency > 1:
        print_level(row)
    if row.tps and row.tps.get("ci95_low") is not None:
        print(f"  {'':<18} mean tok/s 95% CI [{row.tps['ci95_low']:.2f}, {row.tps['ci95_high']:.2f}], "
              f"CV {row.tps['cv']:.1%}")
    print_acceptance(row)
    if row.by_category and len(row.by_category) > 1:
        print("  by category:")
        for cat, v in row.by_category.items():
            acc = "n/a" if v["acceptance_rate"] is None else f"{v['acceptance_rate']:.0%}"
            print(f"    {cat:<16} {fmt(v['mean_tps'], ' tok/s')}  acceptance {acc}")
    for w in row.warnings:
        print(f"  ! {w}")


def print_acceptance(row: Row) -> None:
    """The server's own draft counters; n/a (never 0%) where it drafted nothing or reports none."""
    if row.acceptance_rate is None:
        print("  acceptance         n/a — the server drafted nothing (speculation not active)" if row.draft_n == 0
              else "  acceptance         n/a (the server reports no draft counters)")
        return
    line = f"  acceptance         {row.acceptance_rate:.1%} ({row.draft_n_accepted} accepted / {row.draft_n} drafted)"
    if row.mean_accepted_len:
        line += f", {row.mean_accepted_len:.2f} tokens per verify step"
    print(line)
    if not (row.accepted_per_pos and row.verify_steps):
        print("  by draft position  not reported by this server")
        return
    shares = ", ".join(f"{a / row.verify_steps:.0%}" for a in row.accepted_per_pos)
    print(f"  by draft position  {shares} of verify steps")
    diagnosis = diagnose(row.accepted_per_pos, row.verify_steps)
    if diagnosis:
        print(f"  diagnosis          {diagnosis.message}")


def print_comparison(a: Row, b: Row, ratio: Speedup | None, equivalence: dict | None) -> None:
    """``b`` against ``a``: the paired speed-up, TTFT, aggregate throughput under load, identical output."""
    print(f"\n{RULE}\n  COMPARISON ({b.target} vs {a.target})\n{RULE}")
    print(f"  Mean tok/s : {fmt(a.mean_tps, '')} -> {fmt(b.mean_tps, '')}   speed-up {describe_speedup(ratio)}")
    print(f"  Mean TTFT  : {fmt(a.mean_ttft, 's', 3)} -> {fmt(b.mean_ttft, 's', 3)}")
    if a.load and b.load:
        print(f"  Aggregate  : {fmt(a.load.get('aggregate_tps'), '')} -> {fmt(b.load.get('aggregate_tps'), '')} "
              f"tok/s ({a.concurrency} streams, all together)")
    if equivalence and equivalence.get("checked"):
        first = equivalence["mismatches"][0] if equivalence["mismatches"] else None
        print(f"  Output     : identical on {equivalence['matched']}/{equivalence['compared']} requests"
              + (f"; first difference in {first['prompt_id']} at character {first['char_pos']}" if first else ""))
