"""Per-method speculative statistics: what each speculative implementation (a draft model, an
n-gram method; both parts of a hybrid) drafted and had accepted.

Backends that report them (llama.cpp at trace verbosity: :mod:`backends.llamacpp_stats`) put one
request's figures in its ``draft_details["methods"]`` as ``{impl: {counters…}}``; :func:`aggregate`
sums a row's requests into its ``method_stats`` field. A leaf: it imports nothing of draftbench's.
"""

from __future__ import annotations

from collections.abc import Iterable

COUNTERS = ("calls_begin", "calls_draft", "calls_accept", "gen_drafts", "acc_drafts", "gen_tokens", "acc_tokens")
DURATIONS = ("begin_ms", "draft_ms", "accept_ms")
METHODS_KEY = "methods"        # the key in a request's draft_details


def with_derived(figures: dict, accepted_per_pos: list[float]) -> dict:
    """Add acceptance (accepted / generated tokens), mean accepted length (1 + accepted tokens per
    accept call, llama.cpp's definition) and per-position acceptance to counters."""
    gen, acc, calls = figures.get("gen_tokens"), figures.get("acc_tokens"), figures.get("calls_accept")
    out = dict(figures)
    out["acceptance_rate"] = round(acc / gen, 4) if gen and acc is not None else None
    out["mean_accepted_len"] = round(1 + acc / calls, 3) if calls and acc is not None else None
    out["accepted_per_pos"] = [round(x, 1) for x in accepted_per_pos]
    out["acc_rate_per_pos"] = [round(x / calls, 3) for x in accepted_per_pos] if calls else []
    return out


def request_methods(details: dict | None) -> dict[str, dict]:
    """The per-method figures a request recorded ({} when it has none)."""
    methods = (details or {}).get(METHODS_KEY)
    return {k: v for k, v in methods.items() if isinstance(v, dict)} if isinstance(methods, dict) else {}


def aggregate(per_request: Iterable[dict | None]) -> dict[str, dict] | None:
    """Sum per-request method figures (``draft_details`` of each measured request) per method;
    None when no request recorded any."""
    sums: dict[str, dict] = {}
    per_pos: dict[str, list[float]] = {}
    requests: dict[str, int] = {}
    for details in per_request:
        for impl, fig in request_methods(details).items():
            total = sums.setdefault(impl, {})
            for name in COUNTERS + DURATIONS:
                value = fig.get(name)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    total[name] = total.get(name, 0) + value
                else:
                    total.setdefault(name, None)
            pos = per_pos.setdefault(impl, [])
            for i, x in enumerate(fig.get("accepted_per_pos") or []):
                if i >= len(pos):
                    pos.append(0.0)
                pos[i] += float(x)
            requests[impl] = requests.get(impl, 0) + 1
    if not sums:
        return None
    out = {}
    for impl, total in sums.items():
        for name in DURATIONS:
            if total.get(name) is not None:
                total[name] = round(total[name], 3)
        out[impl] = dict(with_derived(total, per_pos[impl]), requests=requests[impl])
    return out


def describe(stats: dict[str, dict] | None) -> str:
    """'ngram-mod: 74 drafted, 10 accepted (14%), 2.67 per step; draft-simple: …' for people."""
    parts = []
    for impl, fig in (stats or {}).items():
        gen, acc = fig.get("gen_tokens"), fig.get("acc_tokens")
        text = f"{impl}: {gen if gen is not None else 'n/a'} drafted, {acc if acc is not None else 'n/a'} accepted"
        if fig.get("acceptance_rate") is not None:
            text += f" ({fig['acceptance_rate']:.0%})"
        if fig.get("mean_accepted_len") is not None:
            text += f", {fig['mean_accepted_len']:.2f} tokens per step"
        parts.append(text)
    return "; ".join(parts)
