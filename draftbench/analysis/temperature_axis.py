"""The temperature axis: the verdict at each sampling temperature, and up to which temperature each candidate pays.

Rows measured at several temperatures (``settings.temperature`` as a list) carry their own (``Row.temperature``)
and are analysed one temperature at a time by the very analysis every verdict uses (``analysis.verdict``): that
temperature's rows alone, against the target alone *at that temperature*, with their own staged decision and error
budget (95% for each temperature's verdict, as for any sweep). Nothing here judges a speed-up; it gathers the
per-temperature verdicts and follows each candidate across them: it *pays* at a temperature when that temperature's
verdict recommends it or its own interval there is significantly faster (the rule the context axis uses), and its
reach is the hottest temperature at which it pays there and at every cooler one. Two candidates that differ only in
how their draft is sampled (``params.draft_sampling``, as their servers ran it) are compared at each temperature on
the stages both measured, at the decision's own error. Each candidate's output-distribution check (temperature > 0,
:mod:`output_distribution`) is said beside its temperature's verdict, or said not to have been made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..common.errors import Problem
from ..common.percent import signed_change
from ..config.settings import Settings
from ..results.file import ResultsFile, Row
from ..results.kinds import Role
from . import axis_points
from .concurrency import levels
from .context_length import payers
from .crossover import label, outcome
from .decision import decide
from .output_distribution import describe
from .summary import Summary, TargetVerdict, summary_of, verdicts_of
from .temperature_verdict import (
    HeatPoint,
    HeatReach,
    SamplingComparison,
    TemperatureAxis,
    TemperatureVerdict,
    heat,
    sampling_sentence,
)


def settings_problems(settings: Settings) -> list[Problem]:
    """Settings that cannot go with the temperature axis: another axis (one at a time), concurrency levels and
    synthetic-acceptance runs (measured at one temperature), drafts alone (likewise)."""
    if not settings.temperature_axis:
        return []
    refused = (("context_tokens", settings.context_tokens is not None, "is another axis; one axis at a time"),
               ("concurrency", levels(settings) != (1,), "measures several streams at one temperature only"),
               ("ceiling", settings.ceiling, "measures synthetic acceptance at one temperature only"),
               ("draft_alone", settings.draft_alone, "measures each draft alone at one temperature only"))
    return [Problem(f"$.settings.{key}", why, f"remove settings.{key}, or make settings.temperature one number")
            for key, bad, why in refused if bad]


def row_temperatures(results: ResultsFile, target: str | None = None) -> tuple[float, ...]:
    """The temperatures measured (for one target, or any), ascending; () for files without the axis."""
    return axis_points.values(results, "temperature", target)


def on_axis(results: ResultsFile) -> bool:
    """Whether rows were measured on the temperature axis (then each temperature is analysed on its own)."""
    return bool(row_temperatures(results))


def at_temperature(results: ResultsFile, temperature: float | None) -> ResultsFile:
    """The file as if only ``temperature`` had been measured: its rows and the rows of none (drafts alone)."""
    return axis_points.at(results, "temperature", temperature)


def each_temperature(results: ResultsFile) -> list[tuple[float | None, ResultsFile]]:
    """The file one temperature at a time; ``[(None, results)]`` without the axis."""
    return axis_points.each(results, "temperature")


def primary(results: ResultsFile) -> ResultsFile:
    """What the single-point views (grid, exports' speed-ups) show: the coolest temperature, or the file."""
    return axis_points.first(results, "temperature")


def analyze_temperatures(results: ResultsFile, analyze_one: Callable[[ResultsFile], ResultsFile]) -> ResultsFile:
    """``analyze_one`` on each temperature's rows; the rows merged back in file order, the summary per target: the
    coolest temperature's entry with every temperature's verdict and the crossover (see :func:`summarize`); without a
    summary (only the speed-ups were recomputed), none."""
    merged, analysed = axis_points.analyze_each(results, "temperature", analyze_one)
    if any(a.summary is None for a in analysed.values()):
        return replace(merged, summary=None)
    return replace(merged, summary=summarize(merged, analysed))


def summarize(results: ResultsFile, analysed: dict[float, ResultsFile]) -> Summary:
    """Per target: the coolest temperature's verdict, with ``temperature`` (every temperature's verdict, each
    candidate's reach and points, the sampling comparisons) and a sentence that reads across temperatures."""
    temps = tuple(analysed)
    entries = {t: {v.target: v for v in verdicts_of(analysed[t])} for t in temps}
    floor = results.read_settings().noise_floor
    out = []
    for target in dict.fromkeys(name for t in temps for name in entries[t]):
        first = next(entries[t][target] for t in temps if target in entries[t])
        per = tuple(_temperature_entry(analysed[t], target, t, entries[t].get(target)) for t in temps)
        sampling = tuple(c for t in temps for c in sampling_comparisons(analysed[t], target, t))
        reach, sentence = crossover(analysed, target, floor, per) if len(temps) > 1 else (None, "")
        sentence = " ".join(x for x in (sentence, sampling_sentence(sampling)) if x)
        said = " ".join(_said_at(p, target) for p in per if p.verdict)
        out.append(replace(first, verdict=f"{target}, by temperature — {said} {sentence}".strip(),
                           temperature=TemperatureAxis(temps, per, reach, sampling, sentence)))
    # every point's servers (no row is of no temperature here: drafts alone are refused with the axis)
    loads = sum(found.server_loads for a in analysed.values() if (found := summary_of(a)) is not None)
    return Summary(tuple(out), loads)


def _said_at(entry: TemperatureVerdict, target: str) -> str:
    verdict = entry.verdict[len(target) + 2:] if entry.verdict.startswith(f"{target}: ") else entry.verdict
    checks = [f"{c.candidate}: {describe(c.output_distribution)}" for c in entry.candidates
              if entry.temperature > 0 and (c.outcome.value != "no valid measurement" or c.output_distribution)]
    return f"At temperature {heat(entry.temperature)}: {verdict.rstrip()}" + (
        f" ({'; '.join(checks)}.)" if checks else "")


def speculative(results: ResultsFile, target: str) -> list[Row]:
    return [r for r in results.rows_of(target) if r.role is Role.SPECULATIVE and r.draft is not None
            and r.concurrency == 1]


def draft_sampling_of(row: Row) -> str | None:
    """How the row's draft was sampled: as its server ran it (read from the process), else as its candidate asked."""
    ran = (row.server or {}).get("draft_sampling")
    asked = ((row.candidate or {}).get("params") or {}).get("draft_sampling")
    return ran if isinstance(ran, str) else asked if isinstance(asked, str) else None


def _temperature_entry(results: ResultsFile, target: str, temperature: float,
                       verdict: TargetVerdict | None) -> TemperatureVerdict:
    baseline = results.baseline_for(target)
    points = tuple(HeatPoint(label(r.draft or "", r.draft_max), outcome(r), r.speedup, r.acceptance_rate,
                             draft_sampling_of(r), r.output_distribution) for r in speculative(results, target))
    return TemperatureVerdict(temperature, verdict.verdict if verdict else "",
                              verdict.recommended_draft if verdict else None, verdict.speedup if verdict else None,
                              verdict.baseline_tps if verdict else (baseline.mean_tps if baseline else None), points,
                              verdict.stages if verdict else None)


def _same_but_sampling(row: Row) -> tuple:
    """What two candidates share when they differ only in how their draft is sampled."""
    cand = row.candidate or {}
    params = {k: v for k, v in (cand.get("params") or {}).items() if k != "draft_sampling"}
    return (row.draft_path, tuple(cand.get("method") or ()), tuple(sorted(params.items(), key=str)), row.draft_max)


def sampling_comparisons(results: ResultsFile, target: str, temperature: float) -> list[SamplingComparison]:
    """Probabilistic against greedy drafting for every draft measured both ways at ``temperature`` (> 0: at 0 both
    propose the draft's most likely token), on the stages both measured, at the decision's last look's error."""
    if temperature <= 0:
        return []
    decision = decide(results).get(target)
    if decision is None:
        return []
    names = {r.key: n for n, r in decision.evidence.rows.items()}
    groups: dict[tuple, dict[str, Row]] = {}
    for row in speculative(results, target):
        sampling = draft_sampling_of(row)
        if sampling in ("greedy", "probabilistic") and row.key in names:
            groups.setdefault(_same_but_sampling(row), {})[sampling] = row
    out = []
    for pair in groups.values():
        if len(pair) == 2:
            p, g = names[pair["probabilistic"].key], names[pair["greedy"].key]
            found = decision.versus(p, g)
            if found is not None:
                out.append(SamplingComparison(temperature, p, g, found.ratio, found.low, found.high))
    return out


def crossover(analysed: dict[float, ResultsFile], target: str, noise_floor: float,
              per: tuple[TemperatureVerdict, ...]) -> tuple[HeatReach, str]:
    """Each candidate's reach — the hottest temperature at which it pays there and at every cooler one — and the
    sentence: "135M pays up to 0.7: +21% at 0, +9% at 0.7; from 1.0 none pays"."""
    temps = tuple(analysed)
    paying = {t: payers(analysed[t], target, noise_floor) for t in temps}
    names = list(dict.fromkeys(c.candidate for p in per for c in p.candidates))
    reach: dict[str, float | None] = {}
    for name in names:
        reach[name] = None
        for t in temps:
            if name not in paying[t]:
                break
            reach[name] = t
    info = HeatReach(reach, paying)
    # T verdicts, each at 95% on its own (its own error budget): the sentence reads them together and says so
    claims = f"each temperature's verdict its own 95% claim, not corrected across the {len(temps)}"
    if not any(paying.values()):
        return info, (f"Across temperatures ({heat(temps[0])} to {heat(temps[-1])}; {claims}): no candidate pays at "
                      "any temperature.")
    phrases = [_phrase(name, reach[name], temps, paying, per) for name in names]
    sentence = f"Across temperatures ({claims}): " + "; ".join(p for p in phrases if p)
    coolest = set(paying[temps[0]])
    for entry in per[1:]:
        now = paying[entry.temperature]
        if coolest and not now:
            gains = "nothing gains" if "nothing gains" in entry.verdict.lower() else "none pays"
            sentence += f"; from {heat(entry.temperature)} {gains}"
            break
        if set(now) < coolest:
            sentence += f"; from {heat(entry.temperature)} only {', '.join(now)} {'pays' if len(now) == 1 else 'pay'}"
            break
    return info, sentence + "."


def _phrase(name: str, top: float | None, temps: tuple[float, ...], paying: dict[float, list[str]],
            per: tuple[TemperatureVerdict, ...]) -> str:
    figures = {p.temperature: c.speedup for p in per for c in p.candidates if c.candidate == name}

    def at(t: float) -> str:
        speed = figures.get(t)
        return f"{signed_change(speed.ratio)} at {heat(t)}" if speed else f"at {heat(t)}"
    if top == temps[-1]:
        return f"{name} pays at every temperature measured: " + ", ".join(at(t) for t in temps)
    if top is not None:
        return f"{name} pays up to {heat(top)}: " + ", ".join(at(t) for t in temps if t <= top)
    where = [t for t in temps if name in paying[t]]
    if where:
        return f"{name} pays only at " + ", ".join(at(t) for t in where)
    return f"{name} pays at no temperature measured"
