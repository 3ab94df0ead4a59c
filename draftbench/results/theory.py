"""The textbook model of speculative decoding, to put beside the measurement.

With per-token acceptance probability α, draft length k and draft cost ratio c (time of one
draft token / time of one target token), one verify step yields on average

    τ(α, k) = (1 − α^(k+1)) / (1 − α)        tokens (accepted drafts + the target's own token)

and costs (1 + c·k) target-token times, so the expected speed-up is

    S = τ / (1 + c·k)                       (Leviathan et al., 2023)

It assumes verifying k+1 tokens costs the same as generating one, true when decoding is
memory-bound (GPUs, Apple silicon); on CPUs, which are compute-bound, verification costs
more and the measured speed-up falls short of S. When the server reports verify steps we
use the measured τ (mean accepted length) and k̄ (mean drafted per step) directly; α is
recovered from τ to find the best k.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .json_types import (
    NUM,
    STR,
    Int,
    check_fields,
    checked_instance,
    checked_values,
    declare,
    read_fields,
    write_fields,
)

FORMULA = "S = (1 - a^(k+1)) / ((1 - a) * (1 + c*k))"


@dataclass(frozen=True)
class Theory:
    """The model's prediction for one speculative row (``Row.theory``), beside the measured speed-up.

    Every field may be None so that any file that passed the results schema still loads; the file's
    keys and their order are the declarations' (unchanged since schema 1)."""

    formula: str | None = declare(STR)
    alpha: float | None = declare(NUM, "probability")         # per-token acceptance probability
    k_mean: float | None = declare(NUM, "tokens/step")        # drafted tokens per verify step
    tokens_per_step: float | None = declare(NUM, "tokens/step")   # τ
    tokens_per_step_source: str | None = declare(STR)
    cost_ratio: float | None = declare(NUM, "×")              # c: a draft token's time / a target token's time
    cost_source: str | None = declare(STR)
    predicted_speedup: float | None = declare(NUM, "×")       # S at k_mean
    best_k: int | None = declare(Int(minimum=1), "tokens")
    predicted_at_best_k: float | None = declare(NUM, "×")
    measured_speedup: float | None = declare(NUM, "×")        # the row's measured ratio

    def __post_init__(self) -> None:
        check_fields(self, "theory")

    def to_dict(self) -> dict[str, Any]:
        return write_fields(self)

    @classmethod
    def from_dict(cls, data: dict) -> Theory:
        """Read what :meth:`to_dict` wrote (unknown keys are ignored, as in request records)."""
        if not isinstance(data, dict):
            raise ValueError(f"a theory must be an object, not {type(data).__name__}")
        return cls(**read_fields(cls, data))

    @classmethod
    def from_checked(cls, data: dict) -> Theory:
        """A theory from an object the results schema has accepted (not checked again: see
        :func:`json_types.checked_instance`)."""
        return checked_instance(cls, checked_values(cls, data))


def tokens_per_step(alpha: float, k: float) -> float:
    if alpha >= 1.0:
        return k + 1
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def expected_speedup(alpha: float, k: float, c: float) -> float:
    return tokens_per_step(alpha, k) / (1 + c * k)


def alpha_from_tau(tau: float, k: float) -> float:
    """Invert τ(α, k) by bisection (τ grows with α from 1 to k+1)."""
    tau = min(max(tau, 1.0), k + 1)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2       # always below 1: tokens_per_step's formula, inlined (one call per row, not 60)
        if (1 - mid ** (k + 1)) / (1 - mid) < tau:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def alpha_from_acceptance(rate: float, k: float) -> float:
    """Invert accepted/drafted = α(1 − α^k) / (k(1 − α)) (every step drafts k tokens)."""
    if k <= 0:
        raise ValueError(f"draft length k must be positive, not {k}")
    def rate_of(a: float) -> float:
        if a >= 1.0:
            return 1.0
        return a * (1 - a ** k) / (k * (1 - a))
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if rate_of(mid) < rate:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def best_k(alpha: float, c: float, k_max: int = 32) -> int:
    """The k of the highest expected_speedup (the first, on a tie); the formula inlined, as above."""
    if alpha >= 1.0:
        speeds = [(k + 1) / (1 + c * k) for k in range(1, k_max + 1)]
    else:
        speeds = [(1 - alpha ** (k + 1)) / (1 - alpha) / (1 + c * k) for k in range(1, k_max + 1)]
    return speeds.index(max(speeds)) + 1


def evaluate(*, acceptance_rate: float | None, mean_accepted_len: float | None, k_mean: float | None,
             cost_ratio: float | None, cost_source: str | None, measured_ratio: float | None) -> Theory | None:
    """Predicted speed-up and best k for one speculative row; None where inputs are missing."""
    if k_mean is None or k_mean <= 0 or acceptance_rate is None:
        return None
    if mean_accepted_len is not None:
        tau = mean_accepted_len
        alpha = alpha_from_tau(tau, k_mean)
        tau_source = "measured (server's verify-step count)"
    else:
        alpha = alpha_from_acceptance(acceptance_rate, k_mean)
        tau = tokens_per_step(alpha, k_mean)
        tau_source = "derived from the acceptance rate"
    known: dict[str, Any] = {}
    if cost_ratio is not None:
        k_best = best_k(alpha, cost_ratio)
        known = {"cost_ratio": round(cost_ratio, 4), "predicted_speedup": round(tau / (1 + cost_ratio * k_mean), 4),
                 "best_k": k_best, "predicted_at_best_k": round(expected_speedup(alpha, k_best, cost_ratio), 4)}
    return Theory(formula=FORMULA, alpha=round(alpha, 4), k_mean=round(k_mean, 3), tokens_per_step=round(tau, 3),
                  tokens_per_step_source=tau_source, cost_source=cost_source, measured_speedup=measured_ratio, **known)
