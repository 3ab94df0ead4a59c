"""What an export holds: one record per combination, flat (every value a string, number, bool or
null), with the columns in a fixed order, plus how the Markdown exporter shows each column.

The exporters (one module per format) only lay a :class:`Table` out; what goes in it is decided
here, once, for a results file (:func:`results_table`) and for a comparison
(:func:`comparison_table`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ...analysis.context_length import timing
from ...analysis.memory_cost import cost_of, limit_of, over_limit
from ...analysis.next_step import NextStep, rerun_of
from ...analysis.summary import TargetVerdict, verdicts_of
from ...analysis.temperature_axis import draft_sampling_of
from ...results.file import ResultsFile, Row, combination_title
from ...results.kinds import Role, Status
from ...results.memory import mib_text
from ..compare import Comparison, Match
from ..compare.text import SAME_MEASUREMENTS, change_columns, describe_change, speedup_text, tps_text
from .markdown_text import code, plain

Record = dict[str, Any]


@dataclass(frozen=True)
class MarkdownColumn:
    title: str
    show: Callable[[Record], str]
    align: str = "right"            # "left" or "right"


@dataclass(frozen=True)
class Heading:
    """A column of the human-readable table (Markdown)."""

    title: str
    align: str = "right"            # "left" or "right"


@dataclass(frozen=True)
class Table:
    """Raw records for machines (CSV, JSON) and the same rows as text for people (Markdown)."""

    kind: str                       # "results" or "comparison"
    columns: tuple[str, ...]        # record keys, in order (the CSV header)
    records: tuple[Record, ...]
    headings: tuple[Heading, ...]
    cells: Callable[[], tuple[tuple[str, ...], ...]]   # makes :attr:`text` (only the Markdown exporter needs it)
    meta: dict = field(default_factory=dict)   # where the data came from (the JSON export's header)
    verdicts: tuple[TargetVerdict, ...] = ()     # each target's verdict (the Markdown export ends with them)

    @cached_property
    def text(self) -> tuple[tuple[str, ...], ...]:
        """One tuple of cell texts per record, one text per heading (made on first use: a tenth of a CSV
        export of 50k rows went into text no CSV shows)."""
        return self.cells()


# --------------------------------------------------------------------------- one results file

RESULT_COLUMNS = (
    "combination", "role", "target", "candidate", "method", "params", "draft_max", "status", "reason",
    "speculation_active", "n_requests", "mean_tps", "median_tps", "stdev_tps", "min_tps", "max_tps",
    "ci95_low_tps", "ci95_high_tps", "mean_ttft_s", "acceptance_rate", "mean_accepted_len", "speedup",
    "speedup_ci95_low", "speedup_ci95_high", "speedup_significant", "speedup_method", "server_version",
)
CONTEXT_COLUMNS = ("context_tokens", "median_ttft_s", "median_prefill_tps")   # only for files with the context axis
# only for files with the temperature axis or a distribution check (analysis.temperature_axis, output_distribution)
TEMPERATURE_COLUMNS = ("temperature", "draft_sampling", "distribution_checked", "distribution_consistent",
                       "distribution_p_value")
# only for files whose servers said what they held (analysis.memory_cost; "by device": "CPU 145.2; CUDA0 912")
MEMORY_COLUMNS = ("held_mib", "held_by_device", "peak_rss_mib", "kv_mib", "extra_mib", "extra_by_device",
                  "fits_memory_limit", "memory_note")


def _params_text(row: Row) -> str | None:
    cand = row.candidate if isinstance(row.candidate, dict) else {}
    params = cand.get("params")
    shown = {k: v for k, v in params.items() if k != "draft_max"} if isinstance(params, dict) else {}
    return ", ".join(f"{k}={v}" for k, v in sorted(shown.items())) or None


def result_record(row: Row) -> Record:
    tps = row.tps or {}
    speed = row.speedup if row.speculation_active is not False else None   # an inactive row has no speed-up
    cand = row.candidate if isinstance(row.candidate, dict) else {}
    method = "+".join(str(m) for m in cand.get("method") or ()) or None
    return {
        "combination": combination_title(row.role, row.target, row.draft, row.draft_max, show_k=True,
                                         concurrency=row.concurrency, context_tokens=row.context_tokens,
                                         temperature=row.temperature),
        "role": row.role, "target": row.target, "candidate": row.draft, "method": method,
        "params": _params_text(row), "draft_max": row.draft_max, "status": row.status, "reason": row.reason,
        "speculation_active": row.speculation_active,
        "n_requests": sum(1 for r in row.requests if r.error is None) or tps.get("n"),
        "mean_tps": row.mean_tps, "median_tps": row.median_tps, "stdev_tps": tps.get("stdev"),
        "min_tps": tps.get("min"), "max_tps": tps.get("max"), "ci95_low_tps": tps.get("ci95_low"),
        "ci95_high_tps": tps.get("ci95_high"), "mean_ttft_s": row.mean_ttft, "acceptance_rate": row.acceptance_rate,
        "mean_accepted_len": row.mean_accepted_len, "speedup": speed.ratio if speed else None,
        "speedup_ci95_low": speed.ci95_low if speed else None, "speedup_ci95_high": speed.ci95_high if speed else None,
        "speedup_significant": speed.significant if speed else None,
        "speedup_method": speed.method if speed else None,
        "server_version": (row.server or {}).get("version"),
    }


def _context_record(row: Row) -> Record:
    measured = timing(row, None)
    return {"context_tokens": row.context_tokens, "median_ttft_s": measured.ttft_s,
            "median_prefill_tps": measured.prefill_tps}


def _temperature_record(row: Row) -> Record:
    check = row.output_distribution or {}
    return {"temperature": row.temperature, "draft_sampling": draft_sampling_of(row),
            "distribution_checked": check.get("checked"), "distribution_consistent": check.get("consistent"),
            "distribution_p_value": check.get("p_value")}


def _memory_record(row: Row, baseline: Row | None, limit: dict[str, float]) -> Record:
    """What the row's server held, and a candidate's cost over the target alone's (``None``: not said)."""
    mem = row.memory
    cost = cost_of(row, baseline, limit) if row.role is Role.SPECULATIVE and mem is not None else None
    held = mem.held() if mem is not None else {}
    return {"held_mib": mem.total_mib() if mem else None,
            "held_by_device": "; ".join(f"{d} {mib:g}" for d, mib in held.items()) or None,
            "peak_rss_mib": mem.peak_rss_mib if mem else None, "kv_mib": mem.buffer_mib("kv_mib") if mem else None,
            "extra_mib": cost.extra_mib if cost else None,
            "extra_by_device": "; ".join(f"{d} {mib:+g}" for d, mib in cost.extra.items()) or None if cost else None,
            "fits_memory_limit": not over_limit(mem, limit) if limit and held else None,
            "memory_note": mem.unreported if mem else "not recorded" if row.measured else None}


def _memory_text(rec: Record) -> str:
    if rec["held_mib"] is None:
        return "—"
    text = mib_text(rec["held_mib"])
    if rec["extra_mib"] is not None:
        text += f" ({mib_text(rec['extra_mib'], signed=True)})"
    return text + (" over the limit" if rec["fits_memory_limit"] is False else "")


def _num(value: Any, fmt: str = ".2f") -> str:
    return "—" if value is None else f"{value:{fmt}}"


def _mean(rec: Record) -> str:
    if rec["mean_tps"] is None:
        return "—"
    return _num(rec["mean_tps"]) + (f" ± {rec['stdev_tps']:.2f}" if rec["stdev_tps"] is not None else "")


def _relative(rec: Record) -> str:
    """hyperfine's "Relative" column: the speed-up over the target's baseline (1.00 for the baseline)."""
    if rec["role"] is Role.BASELINE and rec["status"] is Status.OK:
        return "1.00"
    if rec["speedup"] is None:
        return "—"
    text = _num(rec["speedup"])
    if rec["speedup_ci95_low"] is not None:        # no upper end: unbounded (results/speedup.py)
        high = rec["speedup_ci95_high"]
        text += f" [{rec['speedup_ci95_low']:.2f}, {'unbounded' if high is None else f'{high:.2f}'}]"
    if rec["speedup_significant"] is False:
        text += " (not significant)"
    elif rec["speedup_significant"] is None:
        text += " (no CI)"       # a ratio of means, or too few requests: significance unknown
    return text


def _note(rec: Record) -> str:
    if rec["status"] is not Status.OK:
        return f"{rec['status']}: {rec['reason'] or 'no reason recorded'}"
    if rec["speculation_active"] is False:
        return "speculation not active: not a speed-up"
    return ""


RESULT_MARKDOWN = (
    MarkdownColumn("Combination", lambda r: code(r["combination"]), "left"),
    MarkdownColumn("Mean [tok/s]", _mean),
    MarkdownColumn("Min [tok/s]", lambda r: _num(r["min_tps"])),
    MarkdownColumn("Max [tok/s]", lambda r: _num(r["max_tps"])),
    MarkdownColumn("Acceptance", lambda r: "—" if r["acceptance_rate"] is None else f"{r['acceptance_rate']:.1%}"),
    MarkdownColumn("Relative", _relative),
    MarkdownColumn("Note", lambda r: plain(_note(r)), "left"),
)


def results_table(results: ResultsFile, source: str) -> Table:
    """One record per row of an analysed results file: its measured figures and speed-up (what
    :func:`analysis.verdict.analyze_speedups` recomputes; :func:`analysis.verdict.analyze` does too)."""
    rerun = rerun_of(results, None, source)     # the command a next step adds to (its config unknown here)
    meta = {"source": source, "name": results.name, "hardware": results.hardware, "backend": results.backend,
            "model_family": results.model_family, "timestamp": results.timestamp,
            "schema_version": results.schema_version,
            # each target's verdict and the command that runs it (the Markdown export ends with them)
            "verdicts": [{"target": v.target, "verdict": v.verdict,
                          "run": [{"what": lead, "line": line} for lead, line in v.run_commands()],
                          **({"memory": v.memory.to_dict()} if v.memory is not None else {}),
                          **({"next": _next(v.next_step, rerun)} if v.next_step is not None else {})}
                         for v in verdicts_of(results)]}
    if any(v.next_step is not None for v in verdicts_of(results)):
        meta["rerun"] = rerun         # what the Markdown export's next commands add to
    with_context = any(r.context_tokens is not None for r in results.results)
    with_memory = any(r.memory is not None for r in results.results)
    with_heat = any(r.temperature is not None or r.output_distribution for r in results.results)
    limit = limit_of(results)
    records = tuple({**result_record(r), **(_context_record(r) if with_context else {}),
                     **(_temperature_record(r) if with_heat else {}),
                     **(_memory_record(r, results.baseline_for(r.target, r.concurrency), limit) if with_memory else {})}
                    for r in results.results)
    columns = RESULT_COLUMNS + (CONTEXT_COLUMNS if with_context else ()) + (TEMPERATURE_COLUMNS if with_heat else ()) \
        + (MEMORY_COLUMNS if with_memory else ())
    shown = RESULT_MARKDOWN[:-1] + ((MarkdownColumn("Memory (added)", _memory_text),) if with_memory else ()) + \
        RESULT_MARKDOWN[-1:]
    return Table("results", columns, records, tuple(Heading(c.title, c.align) for c in shown),
                 lambda: tuple(tuple(c.show(rec) for c in shown) for rec in records), meta, verdicts_of(results))


def _next(step: NextStep, rerun: str) -> dict:
    return {**step.to_dict(), "text": step.lead(), "command": step.command(rerun) if step.stages is not None else None}


# --------------------------------------------------------------------------- a comparison

def _match_record(comparison: Comparison, m: Match) -> Record:
    return {"combination": m.title, "role": m.role, "target": m.target, "candidate": m.draft,
            "draft_max": m.draft_max, "files": "".join(comparison.letters[i] for i in m.present)}


def comparison_table(comparison: Comparison) -> Table:
    """One record per combination of any file: each file's tok/s and speed-up, and each change between files."""
    letters = comparison.letters
    pairs = change_columns(comparison)
    columns = ["combination", "role", "target", "candidate", "draft_max", "files"]
    for x in letters:
        columns += [f"{x}_status", f"{x}_mean_tps", f"{x}_speedup", f"{x}_speedup_significant"]
    for i, ref in pairs:
        p = f"{letters[i]}_vs_{letters[ref]}"
        columns += [f"{p}_ratio", f"{p}_ci95_low", f"{p}_ci95_high", f"{p}_significant", f"{p}_method"]
    records: list[Record] = []
    shown: list[dict[str, str]] = []       # what the Markdown table shows, per record
    for row in comparison.rows:
        rec = _match_record(comparison, row.match)
        texts = {"combination": code(row.title)}
        for x, cell in zip(letters, row.cells):
            speed = cell.speedup
            rec.update({f"{x}_status": cell.row.status if cell.row is not None else None,
                        f"{x}_mean_tps": cell.tps, f"{x}_speedup": speed.ratio if speed else None,
                        f"{x}_speedup_significant": speed.significant if speed else None})
            texts[f"{x}_tps"], texts[f"{x}_speedup"] = tps_text(cell), speedup_text(cell)
        for i, ref in pairs:
            p = f"{letters[i]}_vs_{letters[ref]}"
            c = row.change_for(i)
            c = c if c is not None and c.reference == ref else None
            r = c.ratio if c else None
            rec.update({f"{p}_ratio": r.ratio if r else None, f"{p}_ci95_low": r.ci95_low if r else None,
                        f"{p}_ci95_high": r.ci95_high if r else None, f"{p}_significant": r.significant if r else None,
                        f"{p}_method": r.method if r else None})
            texts[p] = SAME_MEASUREMENTS if c is None and row.copy_of(i, ref) else describe_change(c)
        records.append(rec)
        shown.append(texts)
    for index, matches in enumerate(comparison.only_in):
        x = letters[index]
        for m in matches:
            rec = _match_record(comparison, m)
            only = m.rows[index]
            assert only is not None      # the file that holds it
            speed = only.speedup if only.counts_as_speedup() else None
            rec.update({f"{x}_status": only.status, f"{x}_mean_tps": only.mean_tps,
                        f"{x}_speedup": speed.ratio if speed else None,
                        f"{x}_speedup_significant": speed.significant if speed else None})
            records.append(rec)
            shown.append({"combination": code(m.title), f"{x}_tps": _num(only.mean_tps) if only.ok else only.status,
                          "note": f"only in {x}"})
    keys = (["combination"] + [f"{x}_tps" for x in letters] + [f"{letters[i]}_vs_{letters[ref]}" for i, ref in pairs]
            + [f"{x}_speedup" for x in letters] + ["note"])
    headings = ([Heading("Combination", "left")] + [Heading(f"{x} [tok/s]") for x in letters]
                + [Heading(f"{letters[i]} vs {letters[ref]}") for i, ref in pairs]
                + [Heading(f"{x} speed-up") for x in letters] + [Heading("Note", "left")])
    text = tuple(tuple(t.get(k, "" if k == "note" else "—") for k in keys) for t in shown)
    meta = {"files": [{"letter": f.letter, "source": f.path, "name": f.results.name, "hardware": f.results.hardware,
                       "backend": f.results.backend} for f in comparison.files],
            "differences": [d.message(letters) for d in comparison.differences]}
    return Table("comparison", tuple(columns), tuple(records), tuple(headings), lambda: text, meta)
