"""The best draft length k from one run.

A draft model drafts greedily, so the first j tokens it drafts at k_max are the tokens it would
draft at k = j; the target accepts a prefix of them. The per-position counts measured at k_max
(see :mod:`perpos`) therefore give the accepted tokens per verify step for every k ≤ k_max:

    τ(k) = 1 + Σ_{i<k} accepted_at(i) / steps           tokens per verify step

The cost of a step is modelled as a fixed part and a part linear in the tokens drafted,

    T(k) = t_target + o + c · k̄(k)

where t_target is the target's time per token alone (its baseline, on the same prompts), o the
step's own overhead and c the cost of one more drafted token (drafting it plus verifying it).
Both are fitted to this row's requests by least squares: time = (steps + plain steps) · t_target +
o · steps + c · drafted (plain steps: where nothing was drafted; the same number is assumed at
every k). Where every request drafted the same share per step, o and c cannot be told apart and o
is taken as 0. k̄(k), the tokens drafted per step at k, is what was measured:

* without a p-min (drafts run to k_max, or to the end of the answer): k̄(k) = (drafted / steps) · k / k_max;
* with a p-min above 0 in the row's command (``--spec-draft-p-min``: drafting stops where the draft is
  unsure) and drafts shorter than k_max on average: a draft of length L is cut at k, and L is taken to
  reach one position past the accepted prefix, whose distribution the per-position counts give:
  k̄(k) ∝ 1 + Σ_{i<k−1} accepted_at(i) / steps, scaled to the measured mean;
* a minimum draft length (``--spec-draft-n-min``) bounds k from below: smaller k are not predicted.

Times are the server's own (llama.cpp ``timings``) where every request has them, else the client's.
The prediction is anchored to the measured row: predicted tok/s(k) = measured tok/s · (τ(k)/T(k)) /
(τ(k_max)/T(k_max)).

Linear cost is exact when verifying grows linearly with the batch (CPUs) or not at all (GPUs
below their knee, where c is the draft's own cost); a GPU whose verify cost jumps at some batch
size breaks it — which is why, when a ``draft_max`` list was swept too, every measured k is put
beside its prediction with the error.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from ...results.file import RequestRecord, Row

FULL_DRAFTS = 0.9        # mean drafted per step at least this share of k_max: drafts run to k_max
DRAFT_MIN_FLAGS = ("--spec-draft-n-min", "--draft-min", "--draft-n-min")
P_MIN_FLAGS = ("--spec-draft-p-min", "--draft-p-min")


def tok_s(value: float) -> str:
    """A rate as people read it: one decimal, two below 10 tok/s (slow machines stay readable)."""
    return f"{value:.1f} tok/s" if value >= 10 else f"{value:.2f} tok/s"


def _decode_time_s(r: RequestRecord, server: bool) -> float | None:
    """Seconds from the first token to the last (n − 1 tokens at the request's decode rate)."""
    tps = r.server_decode_tps if server else r.decode_tps
    if not r.completion_tokens or r.completion_tokens < 2 or not tps:
        return None
    return (r.completion_tokens - 1) / tps


def _ok(row: Row) -> list[RequestRecord]:
    return [r for r in row.requests if r.error is None]


def _use_server_times(*rows: Row) -> bool:
    return all(r.server_decode_tps for row in rows for r in _ok(row))


def target_time_per_token_s(baseline: Row, server: bool) -> float | None:
    """The target's time per decoded token alone, token-weighted over the baseline's requests."""
    time_s, tokens = 0.0, 0
    for r in _ok(baseline):
        t = _decode_time_s(r, server)
        if t is not None and r.completion_tokens:
            time_s, tokens = time_s + t, tokens + r.completion_tokens - 1
    return time_s / tokens if tokens else None


def drafts_greedily(row: Row) -> bool:
    """A draft model alone (no n-gram method beside it, whose proposals are not a prefix of the
    longer ones): the case where counts at k_max tell what a smaller k accepts."""
    methods = (row.candidate or {}).get("method") or []
    # llama.cpp's draft-* types; vLLM's draft_model (the method a plain draft gets there)
    return row.draft_path is not None and all(str(m).startswith("draft-") or m == "draft_model" for m in methods)


def predict(row: Row, baseline: Row | None) -> dict | None:
    """Predicted tok/s for every k ≤ the row's k from its per-position counts and timings; None
    when anything needed is missing (no per-position counts, no baseline, a model-free method)."""
    per_pos, steps = row.accepted_per_pos, row.verify_steps
    if (not per_pos or not steps or not row.draft_n or baseline is None or not baseline.mean_tps
            or not row.mean_tps or not drafts_greedily(row)):
        return None
    server = _use_server_times(row, baseline)
    t_target = target_time_per_token_s(baseline, server)
    if not t_target:
        return None
    time_s, tokens, s, a, d = 0.0, 0, 0, 0, 0
    equations = []          # per request: (verify steps, drafted, time beyond the target's own)
    for r in _ok(row):
        t = _decode_time_s(r, server)
        if t is None or r.verify_steps is None or r.draft_n is None or r.draft_n_accepted is None:
            return None
        time_s += t
        tokens += (r.completion_tokens or 1) - 1
        s, a, d = s + r.verify_steps, a + r.draft_n_accepted, d + r.draft_n
        plain_r = max(0, (r.completion_tokens or 1) - 1 - r.verify_steps - r.draft_n_accepted)
        equations.append((r.verify_steps, r.draft_n, t - (r.verify_steps + plain_r) * t_target))
    if not s or not d:
        return None
    plain_steps = max(0, tokens - s - a)        # steps where nothing was drafted (1 token at t_target)
    overhead, cost = step_costs(equations, (time_s - (s + plain_steps) * t_target), s, d)
    k_max = len(per_pos)
    cut_short = (command_value(row, P_MIN_FLAGS) or 0.0) > 0 and d / s < FULL_DRAFTS * k_max
    drafted = drafted_model(per_pos, steps, d / s, cut_short=cut_short)
    k_min = max(1, int(command_value(row, DRAFT_MIN_FLAGS) or 0))

    def rate(k: int) -> float:
        """Tokens per second at k for this row's workload (its speculative and plain steps)."""
        tokens_k = s * (1 + sum(per_pos[:k]) / steps) + plain_steps
        return tokens_k / ((s + plain_steps) * t_target + s * (overhead + cost * drafted(k)))

    anchor = rate(k_max)
    per_k = []
    for k in range(k_min, k_max + 1):
        tps = row.mean_tps * rate(k) / anchor
        per_k.append({"k": k, "tokens_per_step": round(1 + sum(per_pos[:k]) / steps, 4),
                      "predicted_tps": round(tps, 3), "predicted_speedup": round(tps / baseline.mean_tps, 4),
                      "measured_tps": None, "error_pct": None})
    best = max(per_k, key=lambda p: (p["predicted_tps"], -p["k"]))
    pays = best["predicted_tps"] > baseline.mean_tps
    return {"from_k": k_max, "times": "server" if server else "client",
            "target_s_per_token": round(t_target, 6), "cost_per_drafted_token_s": round(cost, 6),
            "cost_per_step_s": round(overhead, 6), "drafted_per_step": round(d / s, 3),
            "drafts": "cut short" if cut_short else "full", "baseline_tps": baseline.mean_tps,
            "per_k": per_k, "recommended_k": best["k"] if pays else None,
            "recommended_tps": best["predicted_tps"] if pays else None, "mean_abs_error_pct": None,
            "compared": 0}


def step_costs(equations: Sequence[tuple[int, int, float]], extra_s: float, steps: int,
               drafted: int) -> tuple[float, float]:
    """(o, c): seconds per verify step beyond the target's own token, and per drafted token, fitted
    by least squares to each request's (steps, drafted, extra time); o = 0 where every request
    drafted the same share per step (the two cannot be told apart), and neither below 0."""
    ratios = [dr / st for st, dr, _ in equations if st]
    spread = statistics.pstdev(ratios) / statistics.fmean(ratios) if len(ratios) >= 3 and statistics.fmean(ratios)         else 0.0
    if spread >= 0.1:
        sxx = sum(st * st for st, _, _ in equations)
        sxy = sum(st * dr for st, dr, _ in equations)
        syy = sum(dr * dr for _, dr, _ in equations)
        bx = sum(st * e for st, _, e in equations)
        by = sum(dr * e for _, dr, e in equations)
        det = sxx * syy - sxy * sxy
        if det > 0:
            o, c = (bx * syy - by * sxy) / det, (by * sxx - bx * sxy) / det
            if o >= 0 and c >= 0:
                return o, c
            if c < 0:
                return max(0.0, extra_s / steps), 0.0
    return 0.0, max(0.0, extra_s / drafted)


def drafted_model(per_pos: Sequence[int], steps: int, mean_drafted: float, *, cut_short: bool):
    """k → tokens drafted per step at k (see the module's docstring)."""
    k_max = len(per_pos)
    if not cut_short:
        return lambda k: mean_drafted * k / k_max       # full drafts; ends of answers cut in proportion

    def reach_len(k: int) -> float:     # E[min(L, k)] with L one past the accepted prefix
        return 1 + sum(per_pos[: k - 1]) / steps
    scale = mean_drafted / reach_len(k_max)
    return lambda k: min(float(k), scale * reach_len(k))


def command_value(row: Row, flags: Sequence[str]) -> float | None:
    """The number the row's server command gives one of ``flags`` (the last one wins), None when unset."""
    command = (row.server or {}).get("command") or []
    value = None
    for i, arg in enumerate(command[:-1]):
        if arg in flags:
            try:
                value = float(command[i + 1])
            except ValueError:
                continue
    return value


def siblings(row: Row, rows: Iterable[Row]) -> list[Row]:
    """The same target and candidate measured at other draft lengths (ok, speculating rows)."""
    return [r for r in rows if r is not row and r.target == row.target and r.draft == row.draft
            and r.counts_as_speedup() and r.draft_max is not None and r.mean_tps]


def with_measured(prediction: dict, others: Iterable[Row]) -> dict:
    """Put every measured k (a swept ``draft_max`` list) beside its prediction, with the error in %
    of the measured tok/s; the mean absolute error covers the k other than the one predicted from."""
    measured = {r.draft_max: r.mean_tps for r in others}
    per_k, errors = [], []
    for p in prediction["per_k"]:
        tps = measured.get(p["k"])
        if tps and p["k"] != prediction["from_k"]:
            error = (p["predicted_tps"] - tps) / tps * 100
            errors.append(abs(error))
            p = dict(p, measured_tps=tps, error_pct=round(error, 2))
        per_k.append(p)
    mean_error = round(sum(errors) / len(errors), 2) if errors else None
    out = dict(prediction, per_k=per_k, mean_abs_error_pct=mean_error, compared=len(errors))
    out["text"] = describe(out)
    return out


def describe(prediction: dict) -> str:
    """One line: the recommended k and its predicted tok/s (or that no k is predicted to pay)."""
    base = f"from the per-position counts at k={prediction['from_k']}"
    if prediction.get("recommended_k") is None:
        return f"no k is predicted to beat the target alone ({base})"
    speedup = prediction["recommended_tps"] / prediction["baseline_tps"] - 1 if prediction["baseline_tps"] else 0.0
    return (f"best k predicted: {prediction['recommended_k']} → {tok_s(prediction['recommended_tps'])} "
            f"({speedup:+.0%} vs the target alone; {base})")


def comparison_lines(prediction: dict) -> list[str]:
    """Predicted vs measured tok/s for each measured k, one line each."""
    lines = []
    for p in prediction["per_k"]:
        if p["measured_tps"] is not None:
            lines.append(f"k={p['k']}: predicted {tok_s(p['predicted_tps'])}, measured {tok_s(p['measured_tps'])} "
                         f"({p['error_pct']:+.1f}%)")
    return lines


def leading_rows(rows: Iterable[Row]) -> list[Row]:
    """Per target and candidate, the row whose prediction reaches furthest (the largest k)."""
    best: dict[tuple, Row] = {}
    for r in rows:
        if r.k_prediction:
            key = (r.target, r.draft)
            if key not in best or r.k_prediction["from_k"] > (best[key].k_prediction or {}).get("from_k", 0):
                best[key] = r
    return list(best.values())
