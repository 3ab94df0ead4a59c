"""The textbook speculative-decoding model in draftbench.results.theory: closed forms, limits, inversions."""

from __future__ import annotations

import math

import pytest
from draftbench.results import theory
from draftbench.results.theory import (
    alpha_from_acceptance,
    alpha_from_tau,
    best_k,
    evaluate,
    expected_speedup,
    tokens_per_step,
)


def tau_by_sum(alpha: float, k: int) -> float:
    """τ as the sum it comes from: the target's own token plus P(first i drafts all accepted)."""
    return sum(alpha ** i for i in range(k + 1))


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.5, 0.8, 0.95, 0.999])
@pytest.mark.parametrize("k", [0, 1, 2, 4, 8, 16])
def test_tokens_per_step_matches_the_geometric_sum(alpha, k):
    assert tokens_per_step(alpha, k) == pytest.approx(tau_by_sum(alpha, k), rel=1e-9)


def test_tokens_per_step_closed_forms():
    assert tokens_per_step(0.5, 1) == pytest.approx(1.5)
    assert tokens_per_step(0.5, 2) == pytest.approx(1.75)
    assert tokens_per_step(0.8, 4) == pytest.approx((1 - 0.8 ** 5) / 0.2)   # 3.3616
    assert tokens_per_step(0.8, 4) == pytest.approx(3.3616)


def test_k_zero_is_plain_decoding():
    for alpha in (0.0, 0.3, 0.9, 1.0):
        assert tokens_per_step(alpha, 0) == pytest.approx(1.0)
        assert expected_speedup(alpha, 0, c=0.5) == pytest.approx(1.0)


def test_alpha_zero_gives_one_token_per_step():
    for k in (1, 4, 16):
        assert tokens_per_step(0.0, k) == 1.0
        # every drafted token costs time and none is kept: a slow-down of 1 / (1 + c k)
        assert expected_speedup(0.0, k, 0.1) == pytest.approx(1 / (1 + 0.1 * k))


def test_alpha_one_limit_is_k_plus_one():
    for k in (1, 3, 8):
        assert tokens_per_step(1.0, k) == k + 1
        assert tokens_per_step(1 - 1e-9, k) == pytest.approx(k + 1, rel=1e-6)
        assert tokens_per_step(1 - 1e-9, k) <= k + 1 + 1e-9


def test_tokens_per_step_grows_with_alpha_and_k():
    alphas = [i / 20 for i in range(20)]
    values = [tokens_per_step(a, 5) for a in alphas]
    assert values == sorted(values)
    assert [tokens_per_step(0.7, k) for k in range(10)] == sorted(tokens_per_step(0.7, k) for k in range(10))


def test_expected_speedup_formula():
    # Leviathan et al.: S = (1 - a^(k+1)) / ((1 - a)(1 + c k))
    a, k, c = 0.8, 4, 0.05
    assert expected_speedup(a, k, c) == pytest.approx((1 - a ** (k + 1)) / ((1 - a) * (1 + c * k)))
    assert expected_speedup(a, k, 0.0) == pytest.approx(tokens_per_step(a, k))


@pytest.mark.parametrize("alpha", [0.05, 0.3, 0.6, 0.9, 0.99])
@pytest.mark.parametrize("k", [1, 3, 5, 10.5])
def test_alpha_from_tau_round_trips(alpha, k):
    tau = tokens_per_step(alpha, k)
    assert alpha_from_tau(tau, k) == pytest.approx(alpha, abs=1e-9)


def test_alpha_from_tau_clamps_out_of_range_values():
    assert alpha_from_tau(0.5, 4) == pytest.approx(0.0, abs=1e-9)   # below 1 token per step
    assert alpha_from_tau(99.0, 4) == pytest.approx(1.0, abs=1e-6)  # above k + 1 (float cancellation near 1)


def acceptance_rate(alpha: float, k: int) -> float:
    """accepted / drafted when every step drafts k tokens: Σ_{i=1..k} α^i / k."""
    return sum(alpha ** i for i in range(1, k + 1)) / k


@pytest.mark.parametrize("alpha", [0.1, 0.5, 0.75, 0.95])
@pytest.mark.parametrize("k", [1, 2, 8])
def test_alpha_from_acceptance_round_trips(alpha, k):
    assert alpha_from_acceptance(acceptance_rate(alpha, k), k) == pytest.approx(alpha, abs=1e-9)


def test_alpha_from_acceptance_k1_is_the_rate_itself():
    assert alpha_from_acceptance(0.42, 1) == pytest.approx(0.42, abs=1e-9)


def test_alpha_from_acceptance_rejects_k_zero():
    with pytest.raises(ValueError, match="positive"):
        alpha_from_acceptance(0.5, 0)


def test_best_k_maximises_the_predicted_speedup():
    for alpha, c in ((0.6, 0.05), (0.8, 0.02), (0.9, 0.1), (0.3, 0.2)):
        k = best_k(alpha, c)
        brute = max(range(1, 33), key=lambda j: expected_speedup(alpha, j, c))
        assert k == brute
        assert all(expected_speedup(alpha, k, c) >= expected_speedup(alpha, j, c) for j in range(1, 33))


def test_best_k_free_draft_and_perfect_draft_use_the_longest_draft():
    assert best_k(0.9, 0.0, k_max=16) == 16
    assert best_k(1.0, 0.01, k_max=12) == 12


def test_best_k_costly_or_poor_draft_stays_short():
    assert best_k(0.1, 0.5) == 1
    assert best_k(0.8, 0.05) < best_k(0.95, 0.05)


def test_evaluate_with_measured_tau():
    out = evaluate(acceptance_rate=0.6, mean_accepted_len=3.0, k_mean=4.0, cost_ratio=0.05,
                   cost_source="draft alone", measured_ratio=1.8)
    assert out.tokens_per_step == 3.0
    assert out.tokens_per_step_source.startswith("measured")
    assert tokens_per_step(out.alpha, 4.0) == pytest.approx(3.0, abs=1e-3)
    assert out.predicted_speedup == pytest.approx(3.0 / (1 + 0.05 * 4), abs=1e-4)
    assert out.best_k == best_k(alpha_from_tau(3.0, 4.0), 0.05)
    assert out.predicted_at_best_k >= out.predicted_speedup
    assert out.measured_speedup == 1.8 and out.cost_source == "draft alone"


def test_evaluate_derives_tau_from_the_acceptance_rate():
    out = evaluate(acceptance_rate=acceptance_rate(0.8, 4), mean_accepted_len=None, k_mean=4, cost_ratio=None,
                   cost_source=None, measured_ratio=None)
    assert out.alpha == pytest.approx(0.8, abs=1e-4)
    assert out.tokens_per_step == pytest.approx(tokens_per_step(0.8, 4), abs=1e-3)
    assert out.tokens_per_step_source.startswith("derived")
    # no cost ratio: nothing is predicted (never a made-up number)
    assert out.predicted_speedup is None and out.best_k is None and out.cost_ratio is None


@pytest.mark.parametrize("kwargs", [dict(k_mean=None, acceptance_rate=0.5), dict(k_mean=0, acceptance_rate=0.5),
                                    dict(k_mean=4, acceptance_rate=None)])
def test_evaluate_returns_none_without_inputs(kwargs):
    assert evaluate(mean_accepted_len=None, cost_ratio=0.1, cost_source=None, measured_ratio=None, **kwargs) is None


def test_module_formula_text_matches_the_code():
    out = evaluate(acceptance_rate=0.5, mean_accepted_len=None, k_mean=2, cost_ratio=0.1, cost_source=None,
                   measured_ratio=None)
    a, k, c = out.alpha, 2, 0.1
    assert out.formula == "S = (1 - a^(k+1)) / ((1 - a) * (1 + c*k))"
    assert out.predicted_speedup == pytest.approx((1 - a ** (k + 1)) / ((1 - a) * (1 + c * k)), abs=1e-3)
    assert math.isfinite(theory.expected_speedup(0.999999, 8, 0.1))
