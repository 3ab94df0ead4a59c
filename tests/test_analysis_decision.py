"""Decision rules that keep their promise: the replication unit (prompts and sessions), the selected
candidate confirmed on fresh requests, simultaneous bounds without a confirmation, and 'no draft can
pay' only when the ceiling's upper bound says so. Synthetic rows and units; no servers."""

from __future__ import annotations

import math
import random

import pytest
from draftbench.analysis.before_stages import rule as decision
from draftbench.analysis.draft.ceiling import no_draft_can_pay
from draftbench.analysis.replication import (
    NO_SESSIONS,
    SessionVariance,
    Unit,
    estimate,
    pool_sessions,
    session_component,
)
from draftbench.analysis.summary import verdicts_of
from draftbench.analysis.verdict import analyze
from draftbench.results.file import RequestRecord, ResultsFile, Row
from draftbench.results.speedup import Speedup

# --------------------------------------------------------------------------- prompts and sessions


def test_a_session_effect_is_measured_when_sessions_cross_the_prompts():
    rng = random.Random(7)
    offsets = {"s0": 0.06, "s1": -0.05, "s2": 0.0}          # one offset per server session
    units = [Unit(f"p{p}", 0.1 * math.sin(p) + offsets[s] + rng.gauss(0, 0.002), s)
             for p in range(6) for s in offsets]
    crossed = session_component(units)
    assert crossed.df == 2 and crossed.variance == pytest.approx(0.003, rel=0.2)
    est = estimate(units)
    # the mean over sessions carries their spread: far wider than the prompts' spread alone
    assert est.se > estimate([Unit(u.prompt, u.value - offsets[u.session or ""], u.session) for u in units]).se * 1.3
    assert est.question == "prompts like these" and est.prompts == 6 and est.sessions == 3


def test_with_one_run_the_prompts_split_between_two_sessions_and_the_spread_is_pooled():
    halves = [Unit(f"p{p}", (0.05 if p % 2 else -0.05) + 0.01 * (p % 3), f"s{p % 2}") for p in range(12)]
    nested = session_component(halves)
    assert nested.df == 1 and nested.variance > 0.004
    pooled = pool_sessions([nested, SessionVariance(0.0001, 3), NO_SESSIONS])
    assert pooled.df == 4 and pooled.variance == pytest.approx((nested.variance + 3 * 0.0001) / 4)
    alone, shared = estimate(halves), estimate(halves, pooled)
    assert shared.df > alone.df               # the machine's spread, pooled over a target's rows: more df


# --------------------------------------------------------------------------- confirmation on fresh requests

def speed(ratio: float, low: float, high: float, **kw) -> Speedup:
    return Speedup(ratio=ratio, ci95_low=low, ci95_high=high, significant=low > 1.02 or high < 1 / 1.02,
                   method="paired-log-by-prompt", n_pairs=18, percent=round((ratio - 1) * 100, 2), noise_floor=0.02,
                   question="prompts like these", se_log=abs(math.log(high / low)) / 4, df=5.0, **kw)


def candidate(name: str, s: Speedup, confirmed: Speedup | None = None) -> Row:
    return Row(target="T", draft=name, role="speculative", speculation_active=True, speedup=s, confirmed=confirmed,
               mean_tps=50 * s.ratio)


def test_the_best_estimate_above_the_floor_is_selected_and_its_fresh_block_decides():
    rows = [candidate("a", speed(1.10, 1.03, 1.17)), candidate("b", speed(1.15, 0.98, 1.35)),
            candidate("c", speed(1.01, 0.97, 1.05))]
    assert decision.selected(rows, 0.02).draft == "b"           # the estimate picks; the interval does not
    assert decision.selected([rows[2]], 0.02) is None           # nothing above the floor: nothing to confirm
    confirmed = [candidate("b", rows[1].speedup, speed(1.12, 1.05, 1.20)), rows[0]]
    assert decision.confirmed_winner(confirmed).draft == "b"
    refuted = [candidate("b", rows[1].speedup, speed(1.02, 0.95, 1.10)), rows[0]]
    assert decision.confirmed_row(refuted).draft == "b" and decision.confirmed_winner(refuted) is None
    # a row above its counters is never selected, however fast it looks
    flagged = Row(target="T", draft="x", role="speculative", speculation_active=True, speedup=speed(1.5, 1.3, 1.7),
                  counter_bound={"speed_changed": True})
    assert decision.selected([flagged], 0.02) is None


def test_the_verdict_quotes_the_confirmation_and_says_when_it_failed():
    requests = tuple(RequestRecord(prompt_id=f"p{i}", category="c", run=r, decode_tps=50.0 * (1 + 0.01 * i),
                                   completion_tokens=64, text="t") for r in range(2) for i in range(4))
    base = Row(target="T", role="baseline", mean_tps=50.0, requests=requests)

    def spec(gain_stage: float, gain_fresh: float) -> Row:
        reqs = tuple(RequestRecord(prompt_id=q.prompt_id, category="c", run=q.run, block=q.run,
                                   decode_tps=q.decode_tps * (gain_fresh if q.run == 1 else gain_stage) *
                                   (1 + 0.004 * (int(q.prompt_id[1]) % 2)), completion_tokens=64,
                                   draft_n=40, draft_n_accepted=38, text="t") for q in requests)
        return Row(target="T", draft="d", role="speculative", speculation_active=True, requests=reqs,
                   design={"name": "interleaved", "blocks": 1, "confirmation_block": 1}, mean_tps=60.0)

    settings = {"noise_floor": 0.02, "temperature": 0.0}
    good = analyze(ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="", settings=settings,
                               results=(base, spec(1.30, 1.25))))
    row, entry = good.results[1], verdicts_of(good)[0]
    assert row.speedup.ratio == pytest.approx(1.30, abs=0.01) and row.confirmed.ratio == pytest.approx(1.25, abs=0.01)
    assert entry.recommended_draft == "d" and entry.speedup.ratio == row.confirmed.ratio
    assert "confirmed on fresh requests" in entry.verdict
    bad = analyze(ResultsFile(name="n", hardware="h", backend="llamacpp", model_family="", settings=settings,
                              results=(base, spec(1.30, 1.0))))
    entry = verdicts_of(bad)[0]
    assert entry.recommended_draft is None and "was not confirmed" in entry.verdict


def test_without_a_confirmation_the_best_of_many_needs_simultaneous_bounds():
    s = Speedup(ratio=1.06, ci95_low=1.027, ci95_high=1.094, significant=True, se_log=0.012, df=5.0, noise_floor=0.02)
    rows = [Row(target="T", draft=f"d{i}", role="speculative", speculation_active=True, speedup=s) for i in range(22)]
    one = decision.simultaneous_bounds(s, 1)
    many = decision.simultaneous_bounds(s, 22)
    assert one[0] == pytest.approx(math.exp(math.log(1.06) - 2.5706 * 0.012), abs=1e-4) and many[0] < 1.0 < one[0]
    assert decision.recommendable(rows[:1], 0.02) and not decision.recommendable(rows, 0.02)


# --------------------------------------------------------------------------- no draft can pay

def ceiling_row(low: float, ratio: float, high: float) -> Row:
    return Row(target="T", draft="d", role="ceiling", speculation_active=True, synthetic={"level": "full"},
               speedup=Speedup(ratio=ratio, ci95_low=low, ci95_high=high, significant=False), mean_tps=40.0)


def test_no_draft_can_pay_only_when_the_ceilings_upper_bound_is_below_the_floor():
    assert no_draft_can_pay([ceiling_row(0.85, 0.90, 0.95)], "T").startswith("No draft can pay")
    assert no_draft_can_pay([ceiling_row(0.97, 1.15, 1.36)], "T") is None       # not significant: unresolved
    assert no_draft_can_pay([ceiling_row(0.95, 0.99, 1.03)], "T") is None       # cannot exclude +2%
