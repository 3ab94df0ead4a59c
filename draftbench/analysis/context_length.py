"""The context axis: the verdict at each prompt length, and up to which length each candidate pays.

Rows measured at several context lengths (``settings.context_tokens``) are analysed one length at a
time by the very analysis every verdict uses (``analysis.verdict``): the rows of one length alone, with
their own baseline, intervals and decision. Nothing here judges a speed-up; it gathers the per-length
verdicts and follows each candidate across lengths: it *pays* at a length when that length's verdict
recommends it (the staged decision's pick; in a file measured before stages, ``before_stages.rule.winners``:
the confirmed candidate where a confirmation ran) or its own interval there is significantly faster, and its
reach is the longest length at which it pays there and at every shorter length.

Beside the speed-up each length shows time to first token split honestly: the server's prefill
(``timings.prompt_ms``) and decode measured apart, the extra time to first token a candidate costs
over its baseline at the same prompts (a draft model prefills the whole prompt too), and a modelled
end-to-end time for a request of the user's typical output length.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import replace

from ..common.errors import Problem
from ..config.long_prompts import RANDOM_TOKENS
from ..config.settings import DEFAULTS, Settings
from ..results.file import ResultsFile, Row
from ..results.kinds import Role
from .before_stages import rule as before_stages
from .context_verdict import ContextAxis, LengthPoint, LengthReach, LengthVerdict, Timing
from .crossover import LevelOutcome, label, outcome
from .stats import describe_speedup
from .summary import Summary, TargetVerdict, summary_of, verdicts_of


def lengths(settings: Settings) -> tuple[int, ...]:
    """``settings.context_tokens`` as sorted lengths (a number or a list); () without the axis."""
    value = settings.context_tokens
    values = value if isinstance(value, (list, tuple)) else [value]
    return tuple(sorted({v for v in values if isinstance(v, int) and not isinstance(v, bool) and v > 0}))


def settings_problems(settings: Settings, *, tokenizes: bool) -> list[Problem]:
    """Settings that cannot go with the context axis: it measures long prompts of its own (the prompt settings
    would be ignored), cut with the backend's tokenizer; the adaptive race and drafts alone measure one length."""
    if not lengths(settings):
        return []
    where, problems = "$.settings.context_tokens", []
    if not tokenizes:
        problems.append(Problem(where, "long prompts are cut to their length with the server's own tokenizer, which "
                                "only the llamacpp backend offers here", "use backend llamacpp, or remove it"))
    for key, ignored in (("prompts", settings.prompts != DEFAULTS.prompts),
                         ("prompts_per_category", settings.prompts_per_category is not None)):
        if ignored:
            problems.append(Problem(f"$.settings.{key}", "is ignored with settings.context_tokens, which measures "
                                    "its own long prompts (summarise, question, code edit, continue; "
                                    "docs/long-context.md)", f"remove settings.{key}, or settings.context_tokens"))
    for key, one_length in (("search", settings.search == "adaptive"), ("draft_alone", settings.draft_alone)):
        if one_length:
            problems.append(Problem(f"$.settings.{key}", "measures one prompt length only",
                                    f"remove settings.{key}, or settings.context_tokens"))
    return problems


def row_lengths(results: ResultsFile, target: str | None = None) -> tuple[int, ...]:
    """The context lengths measured (for one target, or any), ascending; () for files without the axis."""
    rows = results.results if target is None else results.rows_of(target)
    return tuple(sorted({r.context_tokens for r in rows if r.context_tokens is not None}))


def on_axis(results: ResultsFile) -> bool:
    """Whether rows were measured at a context length (then each length is analysed on its own)."""
    return bool(row_lengths(results))


def at_length(results: ResultsFile, length: int | None) -> ResultsFile:
    """The file as if only ``length`` had been measured: its rows and the rows of no length (drafts alone)."""
    return replace(results, results=tuple(r for r in results.results if r.context_tokens in (length, None)))


def each_length(results: ResultsFile) -> list[tuple[int | None, ResultsFile]]:
    """The file one prompt length at a time (as :func:`at_length` cuts it); ``[(None, results)]`` without the axis."""
    lengths = row_lengths(results)
    return [(n, at_length(results, n)) for n in lengths] if lengths else [(None, results)]


def primary(results: ResultsFile) -> ResultsFile:
    """What the single-length views (grid, charts, exports' speed-ups) show: the shortest length, or the file."""
    lengths = row_lengths(results)
    return at_length(results, lengths[0]) if lengths else results


def analyze_lengths(results: ResultsFile, analyze_one: Callable[[ResultsFile], ResultsFile]) -> ResultsFile:
    """``analyze_one`` on each length's rows; the rows merged back in file order, the summary per target:
    the shortest length's entry, with every length's verdict and the crossover (see :func:`summarize`)."""
    lengths = row_lengths(results)
    analysed = {n: analyze_one(at_length(results, n)) for n in lengths}
    by_key: dict[tuple, Row] = {}
    for n in reversed(lengths):          # a row of no length takes its analysis at the shortest length
        by_key.update({r.key: r for r in analysed[n].results})
    merged = replace(results, results=tuple(by_key.get(r.key, r) for r in results.results))
    if any(a.summary is None for a in analysed.values()):
        return replace(merged, summary=None)
    return replace(merged, summary=summarize(merged, analysed))


def summarize(results: ResultsFile, analysed: dict[int, ResultsFile]) -> Summary:
    """Per target: the shortest length's verdict, with ``context`` (every length's verdict, each candidate's
    reach, prefill and decode) and a sentence that reads across lengths."""
    lengths = tuple(analysed)
    entries = {n: {v.target: v for v in verdicts_of(analysed[n])} for n in lengths}
    read = results.read_settings()
    typical, noise_floor = typical_output_tokens(read), read.noise_floor
    out = []
    for target in dict.fromkeys(t for n in lengths for t in entries[n]):
        first = next(entries[n][target] for n in lengths if target in entries[n])
        per_length = tuple(_length_entry(analysed[n], target, n, entries[n].get(target), typical) for n in lengths)
        reach, sentence = crossover(analysed, target, noise_floor) if len(lengths) > 1 else (None, "")
        verdicts = " ".join(f"At {p.context_tokens:,} tokens: {_without_target(p.verdict, target)}"
                            for p in per_length if p.verdict)
        how = f" ({filler_label(read)})" if read.context_filler == RANDOM_TOKENS else ""
        out.append(replace(first, verdict=f"{target}, by prompt length{how} — {verdicts} {sentence}".strip(),
                           context=ContextAxis(lengths, typical, per_length, reach)))
    first_summary = summary_of(next(iter(analysed.values())))
    return Summary(tuple(out), first_summary.server_loads if first_summary is not None else 0)


def filler_label(settings: Settings) -> str:
    """What the long prompts were made of, as every figure of them is labelled."""
    if settings.context_filler == RANDOM_TOKENS:
        return "random-token filler: the documents' tokens shuffled, which overstates speculative gains"
    return "real documents"


def typical_output_tokens(settings: Settings) -> int:
    """The output length the end-to-end figure models: ``typical_output_tokens``, else ``max_tokens``."""
    return settings.typical_output_tokens or settings.max_tokens


def _without_target(verdict: str, target: str) -> str:
    return verdict[len(target) + 2:] if verdict.startswith(f"{target}: ") else verdict


def _median(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(statistics.median(vals), 4) if vals else None


def timing(row: Row | None, typical: int | None) -> Timing:
    """A row's time to first token, prefill and decode (medians over its requests), and a request of
    ``typical`` output tokens end to end: TTFT + (typical − 1) / decode tok/s (modelled from the two)."""
    ok = [r for r in row.requests if r.error is None] if row is not None else []
    ttft, decode = _median(r.ttft_s for r in ok), _median(r.decode_tps for r in ok)
    return Timing(ttft, _median(r.server_prefill_s for r in ok), _median(r.server_prefill_tps for r in ok), decode,
                  _median(r.prompt_tokens for r in ok),
                  round(ttft + (typical - 1) / decode, 4) if ttft is not None and decode and typical is not None
                  else None)


def extra_ttft_s(row: Row, baseline: Row | None) -> float | None:
    """How much later a candidate's first token comes than its baseline's on the same prompts (median of the
    paired differences): a draft model's own prefill of the prompt shows here."""
    if baseline is None:
        return None
    base = {(r.prompt_id, r.run): r.ttft_s for r in baseline.requests if r.error is None and r.ttft_s is not None}
    return _median(r.ttft_s - base[(r.prompt_id, r.run)] for r in row.requests
                   if r.error is None and r.ttft_s is not None and (r.prompt_id, r.run) in base)


def _length_entry(results: ResultsFile, target: str, length: int, verdict: TargetVerdict | None,
                  typical: int | None) -> LengthVerdict:
    baseline = results.baseline_for(target)
    base_timing = timing(baseline, typical)
    candidates = []
    for row in _speculative(results, target):
        mine = timing(row, typical)
        e2e = (round(base_timing.end_to_end_s / mine.end_to_end_s, 4)
               if base_timing.end_to_end_s and mine.end_to_end_s else None)
        candidates.append(LengthPoint(mine, row.memory, label(row.draft or "", row.draft_max), outcome(row),
                                      row.speedup, extra_ttft_s(row, baseline), e2e))
    return LengthVerdict(length, verdict.verdict if verdict else "", verdict.recommended_draft if verdict else None,
                         verdict.speedup if verdict else None,
                         LengthPoint(base_timing, baseline.memory if baseline else None), tuple(candidates),
                         verdict.stages if verdict else None)


def _speculative(results: ResultsFile, target: str) -> list[Row]:
    return [r for r in results.rows_of(target) if r.role is Role.SPECULATIVE and r.draft is not None
            and r.concurrency == 1]


def _tokens(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else f"{n:,}"


def payers(results: ResultsFile, target: str, noise_floor: float) -> list[str]:
    """The candidates that pay at one length (``results``: that length, analysed): the one its verdict recommends
    (staged: the decision's pick; before stages: the one confirmed on fresh requests, where one was — that block
    decides for it), and every other whose own interval is significantly faster (the rule the concurrency
    crossover uses)."""
    rows = [r for r in _speculative(results, target) if r.counts_as_speedup() and r.speedup]
    verdict = next((v for v in verdicts_of(results) if v.target == target), None)
    confirmed = None
    if verdict is not None and verdict.stages is not None:
        won = {r.key for r in rows if verdict.recommended_draft is not None
               and (r.draft, r.draft_max) == (verdict.recommended_draft, verdict.draft_max)}
    else:
        raced = [r for r in _speculative(results, target) if r.race]
        confirmed = before_stages.confirmed_row(rows)
        won = {r.key for r in before_stages.winners(rows, raced, noise_floor)}
    return [label(r.draft or "", r.draft_max) for r in _speculative(results, target)
            if r.key in won or (r is not confirmed and outcome(r) is LevelOutcome.FASTER)]


def crossover(analysed: dict[int, ResultsFile], target: str, noise_floor: float) -> tuple[LengthReach, str]:
    """Each candidate's reach — the longest length at which it pays there and at every shorter length — and
    the sentence: "smollm2-135m pays up to 2k tokens; from 8k only ngram-mod does"."""
    lengths = tuple(analysed)
    paying = {n: payers(analysed[n], target, noise_floor) for n in lengths}
    names = list(dict.fromkeys(label(r.draft or "", r.draft_max) for n in lengths
                               for r in _speculative(analysed[n], target)))
    reaches: dict[str, int | None] = {}
    for name in names:
        reaches[name] = None
        for n in lengths:
            if name not in paying[n]:
                break
            reaches[name] = n
    info = LengthReach(reaches, paying)
    span = f"{_tokens(lengths[0])} to {_tokens(lengths[-1])} tokens"
    if not any(paying.values()):
        return info, (f"Across prompt lengths ({span}): no candidate pays at any length (none is recommended at "
                      "any).")
    phrases = []
    for name, top in sorted(reaches.items(), key=lambda kv: -(kv[1] or 0)):
        if top == lengths[-1]:
            phrases.append(f"{name} pays at every length measured ({span})")
        elif top is not None:
            phrases.append(f"{name} pays up to {_tokens(top)} tokens")
        elif any(name in paying[n] for n in lengths):
            phrases.append(f"{name} pays only at {', '.join(_tokens(n) for n in lengths if name in paying[n])} tokens")
    never = [name for name in names if not any(name in paying[n] for n in lengths)]
    if never:
        phrases.append(f"{', '.join(never)} {'pays' if len(never) == 1 else 'pay'} at no length measured")
    sentence = "Across prompt lengths: " + "; ".join(phrases)
    shortest = set(paying[lengths[0]])
    for n in lengths[1:]:
        now = paying[n]
        if set(now) < shortest or (shortest and not now):
            sentence += (f"; from {_tokens(n)} tokens " + (f"only {', '.join(now)} {'does' if len(now) == 1 else 'do'}"
                                                           if now else "none does"))
            break
    return info, sentence + "."


def describe_length(entry: LengthVerdict) -> str:
    """One line per candidate of a length's verdict, for the console and the report's table."""
    base = entry.baseline.timing
    lines = [f"{entry.context_tokens:,} tokens: baseline prefill {_rate(base.prefill_tps)} tok/s, "
             f"TTFT {_secs(base.ttft_s)}, decode {_rate(base.decode_tps)} tok/s"]
    for c in entry.candidates:
        lines.append(f"  {c.candidate}: decode {describe_speedup(c.speedup)}; TTFT {_secs(c.timing.ttft_s)} "
                     f"({_signed(c.extra_ttft_s)} over the baseline); end to end "
                     + (f"{c.end_to_end_ratio:.2f}×" if c.end_to_end_ratio else "n/a"))
    return "\n".join(lines)


def _rate(v: float | None) -> str:
    return f"{v:,.0f}" if v is not None else "n/a"


def _secs(v: float | None) -> str:
    return f"{v:.2f} s" if v is not None else "n/a"


def _signed(v: float | None) -> str:
    return f"{v:+.2f} s" if v is not None else "n/a"
