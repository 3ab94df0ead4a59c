"""draftbench.analysis.stats: summaries, the Student-t quantiles its intervals use, paired / Welch speed-up intervals,
significance, warnings."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest
from draftbench.analysis.stats import (
    BENCH_FLAGS,
    SETTINGS_FLAGS,
    describe_speedup,
    run_to_run_cv,
    speedup,
    stability_warnings,
    summarize,
)
from draftbench.analysis.student_t import t_quantile
from draftbench.results.findings import Code
from draftbench.results.speedup import Speedup

# --------------------------------------------------------------------------- Student-t quantiles

# 0.975 quantiles of Student's t (any statistics table), to 3 decimals.
KNOWN_T = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 9: 2.262, 10: 2.228, 19: 2.093, 29: 2.045,
           30: 2.042, 35: 2.030, 40: 2.021, 50: 2.009, 60: 2.000, 80: 1.990, 100: 1.984, 120: 1.980, 1000: 1.962}


@pytest.mark.parametrize("df,expected", sorted(KNOWN_T.items()))
def test_the_95_quantile_is_the_published_one(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=5e-4)
    assert t_quantile(0.975, float(df)) == t_quantile(0.975, df)


def test_the_95_quantile_limits_and_monotonicity():
    assert t_quantile(0.975, 1e9) == pytest.approx(1.960, abs=1e-3)
    assert t_quantile(0.975, 0.5) == math.inf and t_quantile(0.975, 0) == math.inf
    values = [t_quantile(0.975, df / 4) for df in range(4, 400)]
    assert all(a >= b for a, b in itertools.pairwise(values))
    assert 2.776 > t_quantile(0.975, 4.5) > 2.571   # non-integer Welch degrees of freedom


# --------------------------------------------------------------------------- summarize

def test_summarize_against_the_statistics_module():
    data = [12.5, 14.0, 13.2, 15.9, 11.1, 14.4, 13.3]
    s = summarize(data)
    mean, sd = statistics.fmean(data), statistics.stdev(data)
    assert s["n"] == 7
    assert s["mean"] == round(mean, 4)
    assert s["median"] == round(statistics.median(data), 4)
    assert s["stdev"] == round(sd, 4)
    assert s["cv"] == round(sd / mean, 4)
    assert (s["min"], s["max"]) == (11.1, 15.9)
    half = 2.447 * sd / math.sqrt(7)
    assert s["ci95_low"] == pytest.approx(mean - half, abs=1e-4)
    assert s["ci95_high"] == pytest.approx(mean + half, abs=1e-4)
    assert s["p95"] == 15.9


def test_summarize_even_count_median_and_p95():
    data = list(range(1, 21))  # 1..20
    s = summarize(data)
    assert s["median"] == 10.5
    assert s["p95"] == 19          # nearest rank: ceil(0.95 * 20) = 19th value
    assert summarize([5, 1, 3])["median"] == 3   # order of input does not matter


def test_summarize_ignores_none_and_non_finite_and_never_counts_them_as_zero():
    s = summarize([None, 10.0, float("nan"), 20.0, None, float("inf")])
    assert s["n"] == 2 and s["mean"] == 15.0 and s["min"] == 10.0
    assert summarize([None, None]) is None
    assert summarize([]) is None


def test_summarize_single_value_has_no_spread():
    s = summarize([7.0])
    assert s["n"] == 1 and s["mean"] == 7.0 and s["median"] == 7.0
    assert s["stdev"] is None and s["cv"] is None and s["ci95_low"] is None and s["ci95_high"] is None


def test_summarize_zero_values_are_real_values():
    s = summarize([0.0, 0.0, 0.0])
    assert s["n"] == 3 and s["mean"] == 0.0 and s["cv"] is None   # cv undefined at mean 0, not an error


# --------------------------------------------------------------------------- speed-up

def paired(base: list[float], ratios: list[float]) -> tuple[dict, dict]:
    b = {(f"p{i}", 0): v for i, v in enumerate(base)}
    c = {(f"p{i}", 0): v * r for i, (v, r) in enumerate(zip(base, ratios))}
    return b, c


def test_paired_log_ratio_interval_on_known_data():
    base = [20.0, 25.0, 30.0, 22.0, 28.0]
    ratios = [1.10, 1.20, 1.15, 1.25, 1.05]
    b, c = paired(base, ratios)
    s = speedup(b, c)
    logs = [math.log(r) for r in ratios]
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    half = 2.776 * sd / math.sqrt(5)
    assert s.method == "paired-log-by-prompt" and s.n_pairs == 5 and s.question == "prompts like these"
    assert s.ratio == pytest.approx(math.exp(mean), abs=1e-4)             # geometric mean of the ratios
    assert s.ratio == pytest.approx(statistics.geometric_mean(ratios), abs=1e-4)
    assert s.ci95_low == pytest.approx(math.exp(mean - half), abs=1e-4)
    assert s.ci95_high == pytest.approx(math.exp(mean + half), abs=1e-4)
    assert s.ci95_low < s.ratio < s.ci95_high
    assert s.significant is True
    assert s.percent == pytest.approx((math.exp(mean) - 1) * 100, abs=0.01)


def test_pairing_ignores_the_baseline_level():
    # the same ratios on very different prompts give the same estimate as on equal ones
    ratios = [1.3, 1.31, 1.29, 1.3]
    s1 = speedup(*paired([10, 10, 10, 10], ratios))
    s2 = speedup(*paired([5, 50, 500, 5000], ratios))
    assert s1.ratio == s2.ratio and s1.ci95_low == s2.ci95_low


def test_pairs_use_prompt_and_run():
    b = {("a", 0): 10.0, ("a", 1): 20.0, ("b", 0): 10.0}
    c = {("a", 0): 12.0, ("a", 1): 24.0, ("b", 0): 12.0, ("z", 0): 1.0}  # ("z", 0) has no partner
    s = speedup(b, c)
    assert s.n_pairs == 3 and s.ratio == pytest.approx(1.2)
    assert s.ci95_low == pytest.approx(1.2) and s.ci95_high == pytest.approx(1.2)


def test_significance_needs_the_interval_to_exclude_one():
    # ratios straddle 1: the interval includes 1, so never significant whatever the estimate
    s = speedup(*paired([10] * 4, [1.30, 0.80, 1.40, 0.85]))
    assert s.ci95_low < 1 < s.ci95_high
    assert s.significant is False


def test_significance_needs_the_noise_floor_too():
    # a tight interval that excludes 1, but only +1%: below the 2% floor
    s = speedup(*paired([10] * 6, [1.010, 1.011, 1.009, 1.010, 1.012, 1.008]))
    assert s.ci95_low > 1.0
    assert s.significant is False
    # the same data with a 0.5% floor is significant
    s = speedup(*paired([10] * 6, [1.010, 1.011, 1.009, 1.010, 1.012, 1.008]), noise_floor=0.005)
    assert s.significant is True and s.noise_floor == 0.005


def test_the_noise_floor_is_a_test_not_a_point_filter():
    # +5% on average, but the interval reaches below +2%: the floor is not cleared, so not significant
    s = speedup(*paired([10] * 5, [1.01, 1.09, 1.03, 1.07, 1.05]))
    assert s.ratio > 1.04 and 1.0 < s.ci95_low < 1.02
    assert s.significant is False


def test_runs_of_one_prompt_are_not_independent_evidence_about_prompts():
    # two prompts, five runs each: the interval is about prompts like these (df = 1), far wider
    # than 10 independent pairs would give
    b = {(p, r): 10.0 for p in "ab" for r in range(5)}
    c = {(p, r): 10.0 * (1.3 if p == "a" else 1.1) * (1 + 0.001 * r) for p in "ab" for r in range(5)}
    s = speedup(b, c)
    assert s.question == "prompts like these" and s.prompts == 2 and s.df == pytest.approx(1.0)
    assert s.ci95_low < 1.0 < 1.15 < s.ratio < s.ci95_high and s.significant is False
    one = speedup({("a", r): 10.0 for r in range(5)}, {("a", r): 13.0 * (1 + 0.01 * r) for r in range(5)})
    assert one.question == "these prompts" and one.prompts == 1 and one.df == pytest.approx(4.0)


def test_significant_slowdown():
    s = speedup(*paired([10] * 5, [0.70, 0.72, 0.69, 0.71, 0.70]))
    assert s.ci95_high < 1.0 and s.significant is True and s.percent < 0


def test_welch_fallback_without_pairs():
    base = {("a", 0): 10.0, ("b", 0): 11.0, ("c", 0): 9.5, ("d", 0): 10.5}
    cand = {("w", 0): 15.0, ("x", 0): 16.0, ("y", 0): 14.0}
    s = speedup(base, cand)
    assert s.method == "welch-t-log" and s.n_pairs == 0
    lb = [math.log(v) for v in base.values()]
    lc = [math.log(v) for v in cand.values()]
    diff = statistics.fmean(lc) - statistics.fmean(lb)
    va, vb = statistics.variance(lc) / 3, statistics.variance(lb) / 4
    df = (va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 3)
    half = t_quantile(0.975, df) * math.sqrt(va + vb)
    assert s.ratio == pytest.approx(math.exp(diff), abs=1e-4)
    assert s.ci95_low == pytest.approx(math.exp(diff - half), abs=1e-4)
    assert s.ci95_high == pytest.approx(math.exp(diff + half), abs=1e-4)
    assert s.significant is True


def test_one_pair_falls_back_to_welch():
    base = {("a", 0): 10.0, ("b", 0): 11.0}
    cand = {("a", 0): 12.0, ("c", 0): 13.0}
    assert speedup(base, cand).method == "welch-t-log"


def test_single_samples_give_a_ratio_without_significance():
    s = speedup({("a", 0): 10.0}, {("b", 0): 12.0})
    assert s.method == "single-sample" and s.ratio == 1.2
    assert s.significant is None and s.ci95_low is None


def test_none_zero_and_nan_rates_are_not_measurements():
    base = {("a", 0): 10.0, ("b", 0): None, ("c", 0): 10.0, ("d", 0): 0.0, ("e", 0): float("nan")}
    cand = {("a", 0): 12.0, ("b", 0): 12.0, ("c", 0): 12.0, ("d", 0): 12.0, ("e", 0): 12.0}
    s = speedup(base, cand)
    assert s.n_pairs == 2 and s.ratio == pytest.approx(1.2)
    assert speedup({("a", 0): None}, {("a", 0): 10.0}) is None
    assert speedup({}, {("a", 0): 10.0}) is None
    assert speedup({("a", 0): 10.0, ("b", 0): 11.0}, {("a", 0): float("inf"), ("b", 0): 12.0}).method \
        == "single-sample"


# --------------------------------------------------------------------------- text

def test_describe_speedup_significant():
    text = describe_speedup(Speedup(ratio=1.123, ci95_low=1.081, ci95_high=1.166, significant=True))
    assert text == "+12.3% [+8.1%, +16.6%]"


def test_describe_speedup_not_significant():
    text = describe_speedup(Speedup(ratio=1.01, ci95_low=0.97, ci95_high=1.05, significant=False))
    assert text == "+1.0% [-3.0%, +5.0%] (not significant)"


def test_describe_speedup_unknown_and_missing():
    assert describe_speedup(None) == "n/a"
    assert describe_speedup(Speedup(ratio=0.9)) == \
        "-10.0% (significance unknown)"


def test_describe_speedup_of_a_real_result():
    s = speedup(*paired([10] * 4, [1.30, 0.80, 1.40, 0.85]))
    assert describe_speedup(s).endswith("(not significant)")


# --------------------------------------------------------------------------- run-to-run noise

def test_run_to_run_cv_uses_repeats_of_one_prompt_only():
    # prompts differ a lot from each other, but each is perfectly repeatable: no noise
    assert run_to_run_cv({"code": [50.0, 50.0], "prose": [20.0, 20.0]}) == 0.0
    cv = run_to_run_cv({"a": [10.0, 12.0], "b": [20.0, 20.0], "single": [5.0]})
    assert cv == pytest.approx(statistics.fmean([statistics.stdev([10, 12]) / 11, 0.0]))
    assert run_to_run_cv({"a": [10.0], "b": [None, 3.0]}) is None


# --------------------------------------------------------------------------- stability warnings

def quiet(**overrides):
    kwargs = dict(runs=3, n_requests=12, run_cv=0.01, tps_values=[50.0] * 12, completion_tokens=[200] * 12,
                  max_tokens=256)
    kwargs.update(overrides)
    return [f.message for f in stability_warnings(**kwargs)]


def test_findings_are_typed_and_name_the_setting():
    findings = stability_warnings(runs=1, n_requests=12, run_cv=0.25, tps_values=[50.0] * 12,
                                  completion_tokens=[200] * 12, max_tokens=256, flags=BENCH_FLAGS)
    assert [(f.code, f.setting) for f in findings] == [(Code.ONE_RUN, "--runs"), (Code.RUN_TO_RUN_VARIATION, "--runs")]


def test_a_clean_run_has_no_warnings():
    assert quiet() == []


def test_many_prompts_with_one_run_each_is_a_design_not_a_warning():
    assert quiet(runs=1, n_prompts=12) == []                      # the interval comes from the prompts
    assert any("only one run per prompt" in w for w in quiet(runs=1, n_prompts=2))


def test_warnings_name_config_keys_by_default():
    warnings = quiet(runs=1, n_requests=2, max_tokens=16, tps_values=[50.0, 50.0])
    text = "\n".join(warnings)
    assert "raise settings.runs to 3" in text
    assert "settings.max_tokens is below 32" in text
    assert "settings.prompts" in text
    assert "--" not in text


def test_warnings_name_command_line_flags_for_bench():
    warnings = quiet(runs=1, n_requests=2, max_tokens=16, tps_values=[50.0, 50.0], flags=BENCH_FLAGS)
    text = "\n".join(warnings)
    assert "raise --runs to 3" in text
    assert "--max-tokens is below 32" in text
    assert "--prompt/--prompt-file" in text
    assert "settings." not in text


def test_flag_mapping_may_be_partial():
    warnings = quiet(runs=1, flags={"runs": "--repeat"})
    assert any("raise --repeat to 3" in w for w in warnings)
    assert SETTINGS_FLAGS["runs"] == "settings.runs"


def test_noisy_runs_warn():
    (w,) = quiet(run_cv=0.25)
    assert "25%" in w and "settings.runs" in w
    (w,) = quiet(run_cv=0.25, flags=BENCH_FLAGS)
    assert "--runs" in w


def test_a_slow_outlier_warns():
    (w,) = quiet(tps_values=[50.0, 50.0, 51.0, 12.0, 49.0])
    assert w.startswith("1 request(s) ran at less than half the median speed")


def test_a_cold_first_request_names_the_warmup_setting():
    (w,) = quiet(tps_values=[10.0, 50.0, 51.0, 49.0, 50.0])
    assert "first measured request" in w and "settings.warmup" in w
    (w,) = quiet(tps_values=[10.0, 50.0, 51.0, 49.0, 50.0], flags=BENCH_FLAGS)
    assert "--warmup" in w


def test_short_completions_warn():
    (w,) = quiet(completion_tokens=[200, 10, None, 5])
    assert w.startswith("2 request(s) generated fewer than 32 tokens") and "settings.max_tokens" in w


def test_unknown_values_are_never_counted_as_zero():
    # None rates are not "slow"; None completion counts are not "short"
    assert quiet(tps_values=[None, 50.0, None, 50.0, 50.0], completion_tokens=[None] * 12) == []


def test_an_unmeasured_first_request_is_not_blamed_on_warm_up():
    (w,) = quiet(tps_values=[None, 10.0, 50.0, 51.0, 49.0, 50.0])
    assert w.startswith("1 request(s) ran at less than half the median speed")
