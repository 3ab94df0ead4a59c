"""The ceiling of a draft: what its cost allows on this hardware, whatever its accuracy.

With ``settings.ceiling`` every draft is run twice more in llama-server's synthetic-acceptance
mode (``--spec-synth-len L``, "benchmarking only"): the real draft still runs, so its real
cost is paid, but the target accepts drafted tokens at random so that the mean accepted length
(the target's token included) is L. Two levels per draft:

* ``measured``: L = the draft's own measured mean accepted length — the same work as the real
  run, so it should land close to it;
* ``full``: L = k + 1, every drafted token accepted — the best a draft of this cost can do.

That separates the two reasons a draft disappoints: too costly for this hardware (even
``full`` is slow) or too inaccurate (``full`` is fast, the real run is not). Ceiling rows are
never candidates: never ranked, never compared for output (their text is not valid), and shown
as synthetic everywhere. This module is pure: rows in, numbers and sentences out.
"""

from __future__ import annotations

from ...config.settings import DEFAULTS
from ...results.file import Row
from ...results.kinds import CeilingLevel, Role
from ...results.speedup import Speedup, plain
from ..stats import describe_speedup
from .best_k import tok_s

SYNTH_LEN = "synth_len"      # the llama.cpp candidate parameter (--spec-synth-len)
Level = CeilingLevel         # measured / full (declared with the row kinds: the results schema checks it)


def draft_length(measured: Row | None, configured_k: int | None) -> int | None:
    """k as the server ran it: the per-position counters have one entry per draft position (the
    server's n_max), which also covers a draft_max left to the server's default."""
    if measured is not None and measured.accepted_per_pos:
        return len(measured.accepted_per_pos)
    return configured_k


def synth_length(level: Level, measured: Row | None, configured_k: int | None) -> tuple[float | None, int | None, str]:
    """(L, k, "") for a ceiling run, or (None, k, why it cannot run) — read from the draft's real row."""
    k = draft_length(measured, configured_k)
    if measured is None or not measured.ok:
        return None, k, "skipped: the draft's real run has no measurement, so there is nothing to compare its ceiling with"
    if measured.speculation_active is False:
        return None, k, "skipped: the draft never speculated in its real run, so synthetic acceptance cannot run either"
    if k is None:
        return None, k, ("skipped: the draft length k is unknown (the server reported no per-position counts); "
                         "set settings.draft_max")
    if level is Level.FULL:
        return float(k + 1), k, ""
    if measured.mean_accepted_len is None:
        return None, k, ("skipped: the server reported no verify steps for the real run, so its mean accepted "
                         "length is unknown")
    return min(max(measured.mean_accepted_len, 1.0), float(k + 1)), k, ""


def _level(row: Row) -> str | None:
    return (row.synthetic or {}).get("level")


def ceiling_rows(rows: tuple[Row, ...] | list[Row], row: Row) -> dict[str, Row]:
    """The measured ceiling rows of a speculative row, by level."""
    return {str(_level(r)): r for r in rows if r.role is Role.CEILING and r.ok and r.target == row.target
            and r.draft == row.draft and r.draft_max == row.draft_max and r.mean_tps and _level(r)}


def summarize(row: Row, ceilings: dict[str, Row]) -> dict | None:
    """This draft against its ceiling, or None when no ceiling row was measured."""
    full, at_measured = ceilings.get(Level.FULL.value), ceilings.get(Level.MEASURED.value)
    if full is None and at_measured is None:
        return None
    out: dict = {"full_tps": None, "full_speedup": None, "at_measured_tps": None, "at_measured_speedup": None,
                 "reach": None, "full_synth_len": None, "measured_synth_len": None}
    if full is not None:
        out.update(full_tps=full.mean_tps, full_speedup=full.speedup,
                   full_synth_len=(full.synthetic or {}).get(SYNTH_LEN))
        if row.mean_tps and full.mean_tps:
            out["reach"] = round(row.mean_tps / full.mean_tps, 4)
    if at_measured is not None:
        out.update(at_measured_tps=at_measured.mean_tps, at_measured_speedup=at_measured.speedup,
                   measured_synth_len=(at_measured.synthetic or {}).get(SYNTH_LEN))
    out["text"] = describe(out)
    return plain(out)     # Row.ceiling is JSON: its speed-ups as their objects


def describe(summary: dict) -> str:
    """"this draft reaches 62% of what its cost allows; a perfect draft of this size would give +X%"."""
    parts = []
    if summary.get("reach") is not None:
        parts.append(f"this draft reaches {summary['reach']:.0%} of what its cost allows "
                     f"({tok_s(summary['full_tps'])} with every drafted token accepted)")
    full = Speedup.from_value(summary.get("full_speedup"))
    if full:
        parts.append(f"a perfect draft of this size would give {describe_speedup(full)}")
    return "; ".join(parts)


def no_draft_can_pay(rows: tuple[Row, ...] | list[Row], target: str,
                     noise_floor: float = DEFAULTS.noise_floor) -> str | None:
    """The verdict's sentence when even the draft with the highest ceiling (at equal k, the cheapest),
    with every drafted token accepted, is shown not to beat the target alone by the noise floor: the
    upper end of its interval is below 1 + floor (None otherwise — a ceiling not shown below it is no
    evidence that nothing can pay — or without full-acceptance rows)."""
    fulls = [r for r in rows if r.role is Role.CEILING and r.ok and r.target == target and _level(r) == Level.FULL.value
             and r.speedup and r.speculation_active is not False]
    if not fulls:
        return None
    best = max(fulls, key=lambda r: r.speedup.ci95_high or r.speedup.ratio if r.speedup else 0.0)
    speed = best.speedup
    if speed is None or speed.ci95_high is None or speed.ci95_high >= 1.0 + noise_floor:
        return None
    k = f", k={best.draft_max}" if best.draft_max else ""
    return (f"No draft can pay on this hardware: even the draft with the highest ceiling ({best.draft}{k}), with every "
            f"drafted token accepted (synthetic acceptance), gives {describe_speedup(speed)} against the target "
            "alone — verifying drafted tokens costs about as much as generating them here (a compute-bound "
            "target, typical of CPUs). More or better drafts will not help on this machine.")
