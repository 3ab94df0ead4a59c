"""Summaries, confidence intervals, significance and stability warnings.

No SciPy: Student-t quantiles are exact (:mod:`student_t`), at any degrees of freedom, Welch's and
Satterthwaite's fractional ones included.

Speed-up (see docs/statistics.md): requests are paired by (prompt, repetition) — the same
prompt and seed on the baseline server and on the speculative server. The speed-up is the
geometric mean of the paired ratios ``tps_spec / tps_base``, averaged per prompt first, with a
Student-t interval whose replication unit is the prompt (:mod:`replication`: the claim is about
"prompts like these"; with one prompt, about that prompt). Without pairs (old results, failed
requests) it falls back to Welch's t-interval on the log tok/s of the two groups. A speed-up is
*significant* only when the whole interval clears the noise floor (``settings.noise_floor``,
default 2%): above 1 + floor for a gain, below 1 / (1 + floor) for a loss.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from typing import TypeGuard

from ..common.percent import percent_change
from ..config.settings import DEFAULTS
from ..results.findings import Code, Finding
from ..results.speedup import Speedup, interval_ends, interval_text
from .moments import ratio_of
from .moments import stdev as float_stdev
from .replication import Estimate, SessionVariance, Unit, estimate
from .student_t import t_quantile


def rounded(x: float | None, digits: int = 4) -> float | None:
    """``round(x, digits)``, passing None (not measured) through."""
    return None if x is None else round(x, digits)


def summarize(values: Iterable[float | None]) -> dict | None:
    """n, mean, median, stdev, cv, min, max, p95 and a 95% CI of the mean. None if no values."""
    vals = sorted(v for v in values if v is not None and math.isfinite(v))
    if not vals:
        return None
    n = len(vals)
    mean = statistics.fmean(vals)
    stdev = float_stdev(vals) if n > 1 else None
    half = t_quantile(0.975, n - 1) * stdev / math.sqrt(n) if stdev is not None else None
    p95 = vals[min(n - 1, math.ceil(0.95 * n) - 1)]
    return {
        "n": n, "mean": rounded(mean), "median": rounded(statistics.median(vals)), "stdev": rounded(stdev),
        "cv": rounded(stdev / mean) if stdev is not None and mean else None,
        "min": rounded(vals[0]), "max": rounded(vals[-1]), "p95": rounded(p95),
        "ci95_low": rounded(mean - half) if half is not None else None,
        "ci95_high": rounded(mean + half) if half is not None else None,
    }


def _positive(v: object) -> TypeGuard[float]:
    """A usable rate: a finite number above zero (None, 0, NaN and inf are not measurements)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def clears_floor(low: float | None, high: float | None, noise_floor: float) -> bool | None:
    """Significance as a test: the whole interval is above 1 + floor (a gain) or below 1 / (1 + floor)
    (a loss). None without an interval."""
    if low is None or high is None:
        return None
    return low > 1.0 + noise_floor or high < 1.0 / (1.0 + noise_floor)


def from_estimate(est: Estimate, *, noise_floor: float, n_pairs: int, confidence: float = 0.95) -> Speedup:
    """The :class:`Speedup` of an :class:`replication.Estimate` (log scale) at ``confidence``."""
    low, high = est.bounds(confidence)
    ratio = ratio_of(est.mean)
    method = "paired-log-by-prompt" if est.prompts >= 2 else "paired-t-log"
    if not math.isfinite(high):      # no finite interval (a variance with no degrees of freedom): not judged
        return Speedup(ratio=round(ratio, 4), method=method, n_pairs=n_pairs, percent=percent_change(ratio),
                       noise_floor=noise_floor, question=est.question, prompts=est.prompts, sessions=est.sessions)
    ends = interval_ends(ratio_of(low) if math.isfinite(low) else 0.0, ratio_of(high))
    return Speedup(ratio=round(ratio, 4), **ends,
                   significant=clears_floor(ends["ci95_low"], ends["ci95_high"] or math.inf, noise_floor),
                   method=method, n_pairs=n_pairs,
                   percent=percent_change(ratio), noise_floor=noise_floor, question=est.question,
                   se_log=round(est.se, 6), df=round(min(est.df, 1e6), 3), prompts=est.prompts, sessions=est.sessions)


def speedup_of_units(units: list[Unit], *, noise_floor: float = DEFAULTS.noise_floor,
                     sessions: SessionVariance | None = None) -> Speedup | None:
    """Speed-up from paired log ratios (see :mod:`replication`); a bare ratio from a single one."""
    if not units:
        return None
    est = estimate(units, sessions)
    if est is None:
        ratio = math.exp(units[0].value)
        return Speedup(ratio=round(ratio, 4), method="single-sample", n_pairs=len(units),
                       percent=percent_change(ratio))
    return from_estimate(est, noise_floor=noise_floor, n_pairs=len(units))


def speedup(baseline: Mapping[tuple, float | None], candidate: Mapping[tuple, float | None], *,
            noise_floor: float = DEFAULTS.noise_floor) -> Speedup | None:
    """Speed-up of ``candidate`` over ``baseline``; both map (prompt_id, run) -> tok/s."""
    # (the plain float first, in the comprehension itself: this runs for every row and category of a file)
    base = {k: v for k, v in baseline.items() if (type(v) is float and v > 0 and v - v == 0) or _positive(v)}
    cand = {k: v for k, v in candidate.items() if (type(v) is float and v > 0 and v - v == 0) or _positive(v)}
    if not base or not cand:
        return None
    keys = sorted(set(base) & set(cand))
    if len(keys) >= 2:
        return speedup_of_units([Unit(str(k[0]), math.log(cand[k] / base[k])) for k in keys], noise_floor=noise_floor)
    lb = [math.log(v) for v in base.values()]
    lc = [math.log(v) for v in cand.values()]
    if len(lb) < 2 or len(lc) < 2:
        ratio = statistics.fmean(cand.values()) / statistics.fmean(base.values())
        return Speedup(ratio=round(ratio, 4), method="single-sample", n_pairs=0,
                       percent=percent_change(ratio))
    mean = statistics.fmean(lc) - statistics.fmean(lb)
    va, vb = statistics.variance(lc) / len(lc), statistics.variance(lb) / len(lb)
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / ((va ** 2) / (len(lc) - 1) + (vb ** 2) / (len(lb) - 1)) if se > 0 else 1e9
    half = t_quantile(0.975, df) * se
    ratio, low, high = ratio_of(mean), ratio_of(mean - half), ratio_of(mean + half)
    return Speedup(ratio=round(ratio, 4), **interval_ends(low, high),
                   significant=clears_floor(low, high, noise_floor), method="welch-t-log", n_pairs=0,
                   percent=percent_change(ratio), noise_floor=noise_floor)


# A subset's interval (one prompt category, the requests without loops) is worth printing only from
# this many pairs, and while its high end is at most this many times its low end: two requests give
# "+74.8% [-95.9%, +7300.2%]", which tells nothing.
MIN_PAIRS_TO_TELL = 3
MAX_USEFUL_SPAN = 4.0
TOO_FEW = "too few requests to tell"


def too_few_to_tell(s: Speedup | None) -> bool:
    """True when a speed-up rests on too few requests for an interval worth printing."""
    if s is None or s.method == "ratio-of-means":
        return False
    if s.method == "single-sample":
        return True
    if s.method in ("paired-t-log", "paired-log-by-prompt") and ((s.n_pairs or 0) < MIN_PAIRS_TO_TELL
                                                                 or s.ci95_high is None):
        return True          # too few pairs, or no finite interval (nothing to estimate a spread from)
    if s.ci95_low is not None and s.ci95_high is not None:
        return s.ci95_low <= 0 or s.ci95_high / s.ci95_low > MAX_USEFUL_SPAN
    return False


def describe_subset(s: Speedup | None) -> str:
    """:func:`describe_speedup` for a subset of a row's requests, or 'too few requests to tell (n pairs)'."""
    if too_few_to_tell(s):
        assert s is not None
        return TOO_FEW + (f" ({s.n_pairs} pairs)" if s.n_pairs else "")
    return describe_speedup(s)


def describe_speedup(s: Speedup | None) -> str:
    """'+12.3% [+8.1%, +16.6%]' and whether it is significant, for people."""
    if s is None:
        return "n/a"
    text = f"{(s.ratio - 1) * 100:+.1f}%"
    words = [s.interval] if s.interval else []
    if s.has_interval:
        text += f" {interval_text(s.ci95_low, s.high)}"
    if s.ci95_high is not None and s.ci95_high < 1 and not s.note:
        words.append("significantly slower")          # the whole interval is below 1
    elif s.significant is False:
        words.append("not significant")
    elif s.significant is None:
        words.append("significance unknown")
    return text + (f" ({'; '.join(words)})" if words else "")


def run_to_run_cv(samples: Mapping[str, list[float]]) -> float | None:
    """Mean coefficient of variation across repetitions of the same prompt (timing noise).

    Differences *between* prompts are real (code drafts better than prose), so they do not
    count as noise; only repeated runs of one prompt can show it.
    """
    cvs = []
    for values in samples.values():
        vals = [v for v in values if _positive(v)]
        if len(vals) >= 2:
            mean = statistics.fmean(vals)
            if mean > 0:
                cvs.append(float_stdev(vals) / mean)
    return statistics.fmean(cvs) if cvs else None


# How to change each setting the warnings mention, by where the run was configured.
SETTINGS_FLAGS: dict[str, str] = {"runs": "settings.runs", "warmup": "settings.warmup",
                                  "max_tokens": "settings.max_tokens", "prompts": "settings.prompts"}
BENCH_FLAGS: dict[str, str] = {"runs": "--runs", "warmup": "--warmup", "max_tokens": "--max-tokens",
                               "prompts": "--prompt/--prompt-file"}


def flags_of(made_by: str | None) -> dict[str, str]:
    """How a results file's warnings name a setting: bench.py's flags for its A/B, else the config's keys."""
    return BENCH_FLAGS if made_by == "bench.py" else SETTINGS_FLAGS


def stability_warnings(*, runs: int, n_requests: int, run_cv: float | None, tps_values: list[float | None],
                       completion_tokens: list[int | None], max_tokens: int,
                       flags: Mapping[str, str] | None = None, n_prompts: int | None = None) -> list[Finding]:
    """Findings in the pyperf/hyperfine spirit: each names the setting to change.

    ``flags`` maps "runs", "warmup", "max_tokens" and "prompts" to how the user changes them:
    config keys for a sweep (:data:`SETTINGS_FLAGS`, the default) or command-line options for
    ``bench.py`` (:data:`BENCH_FLAGS`). Missing entries fall back to the config keys.
    ``tps_values`` are in request order (the first one is the first measured request). One run per
    prompt is a design, not a problem, where the interval comes from the prompts (``n_prompts`` ≥ 3).
    """
    f = {**SETTINGS_FLAGS, **(flags or {})}
    out = []
    if runs < 2 and (n_prompts is None or n_prompts < 3):
        out.append(Finding(Code.ONE_RUN, f"only one run per prompt: timing noise cannot be measured — raise "
                           f"{f['runs']} to 3", f["runs"]))
    if run_cv is not None and run_cv > 0.10:
        out.append(Finding(Code.RUN_TO_RUN_VARIATION, f"tok/s varies {run_cv:.0%} between runs of the same prompt — "
                           f"close other programs, check power/thermal settings, or raise {f['runs']}", f["runs"]))
    vals = [v for v in tps_values if _positive(v)]
    if len(vals) >= 3:
        med = statistics.median(vals)
        first = tps_values[0]
        first_cold = first is not None and _positive(first) and first < med / 2   # the very first request, measured
        if first_cold:
            out.append(Finding(Code.COLD_START, f"the first measured request ran at {vals[0] / med:.0%} of the median "
                               f"speed — the server was still warming up; raise {f['warmup']}", f["warmup"]))
        slow = [v for v in vals[1 if first_cold else 0:] if v < med / 2]
        if slow:
            out.append(Finding(Code.SLOW_OUTLIERS, f"{len(slow)} request(s) ran at less than half the median speed — "
                               f"something else may have used the machine; rerun, or raise {f['runs']}", f["runs"]))
    short = [c for c in completion_tokens if c is not None and c < 32]
    if short and max_tokens >= 32:
        out.append(Finding(Code.SHORT_OUTPUTS, f"{len(short)} request(s) generated fewer than 32 tokens — rates from "
                           f"so few tokens are noisy; use longer prompts or raise {f['max_tokens']}", f["max_tokens"]))
    elif max_tokens < 32:
        out.append(Finding(Code.MAX_TOKENS_TOO_LOW, f"{f['max_tokens']} is below 32: too few tokens for a stable rate "
                           "— raise it", f["max_tokens"]))
    if n_requests < 3:
        out.append(Finding(Code.FEW_REQUESTS, f"only {n_requests} measured request(s) — too few for a confidence "
                           f"interval; add prompts ({f['prompts']}) or raise {f['runs']}", f["runs"]))
    return out
