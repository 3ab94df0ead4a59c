"""Which prompts each stage measures: fresh, stratified, conversations together, and the whole set at every
stage when it is too small for fresh ones."""

from __future__ import annotations

from collections import Counter

from draftbench.sweep.stage_plan import plan_stages


def test_stages_draw_fresh_prompts_in_proportion_to_the_categories():
    categories = ["code"] * 40 + ["prose"] * 20 + ["chat"] * 10 + ["json"] * 2
    plan = plan_stages(categories, [str(i) for i in range(len(categories))], horizon=6, size=6, seed=42)
    assert not plan.fixed and plan.horizon == 6
    seen = [i for k in range(plan.horizon) for i in plan.stage(k)]
    assert len(seen) == len(set(seen)) == 36              # never a prompt twice
    first = Counter(categories[i] for k in range(3) for i in plan.stage(k))
    assert first["code"] >= 8 and first["prose"] >= 4 and first["chat"] >= 2   # about 4:2:1
    again = plan_stages(categories, [str(i) for i in range(len(categories))], horizon=6, size=6, seed=42)
    assert again == plan                                   # a pure function of the seed
    assert plan_stages(categories, [str(i) for i in range(len(categories))], horizon=6, size=6, seed=7) != plan


def test_a_conversation_stays_in_one_stage_in_its_order():
    categories = ["mt"] * 8 + ["code"] * 8
    groups = ["q1", "q1", "q2", "q2", "q3", "q3", "q4", "q4"] + [f"c{i}" for i in range(8)]
    plan = plan_stages(categories, groups, horizon=4, size=4, seed=1)
    for k in range(plan.horizon):
        stage = plan.stage(k)
        for first in (0, 2, 4, 6):
            if first in stage:
                assert first + 1 in stage and stage.index(first) < stage.index(first + 1)


def test_a_small_set_is_measured_whole_at_every_stage_about_these_prompts():
    plan = plan_stages(["code", "prose", "json", "code-edit"], ["a", "b", "c", "d"], horizon=6, size=6, seed=42)
    assert plan.fixed and plan.horizon == 6 and plan.stage(0) == plan.stage(5) == (0, 1, 2, 3)
    assert plan.run_of(3) == 3 and "these prompts" in plan.describe()


def test_a_set_that_runs_out_plans_fewer_stages_and_more_stages_start_over():
    plan = plan_stages(["x"] * 14, [str(i) for i in range(14)], horizon=6, size=6, seed=3)
    assert plan.horizon == 2 and not plan.fixed
    assert plan.stage(2) == plan.stage(0) and plan.run_of(2) == 1


def test_a_stage_grows_where_a_server_load_costs_much_against_a_request_and_never_shrinks_below_the_plan():
    """Issue 43: the stage's size follows the measured variance components and the cost of a load against a
    request — n* = √(σ²_w·load / (τ²·request)), within [planned, 2·planned]."""
    from draftbench.sweep.stage_plan import stage_size
    assert stage_size(0.02, 0.002, 60.0, 10.0, planned=6) == 8            # √(0.02·60 / (0.002·10)) ≈ 7.7
    assert stage_size(0.02, 0.002, 600.0, 10.0, planned=6) == 12          # at most twice the plan
    assert stage_size(0.02, 0.002, 5.8, 8.6, planned=6) == 6              # cheap loads: never below the plan
    assert stage_size(0.02, 0.0, 5.0, 5.0, planned=6) == 12               # no session spread: the largest
    assert stage_size(0.0, 0.002, 5.0, 5.0, planned=6) == 6               # not measured: as planned


def test_a_resized_plan_keeps_the_stages_measured_and_cuts_the_rest_afresh():
    categories = ["code"] * 30 + ["prose"] * 30
    plan = plan_stages(categories, [str(i) for i in range(60)], horizon=6, size=6, seed=5)
    grown = plan.resized(2, 9)
    assert grown.stage(0) == plan.stage(0) and grown.stage(1) == plan.stage(1)
    assert len(grown.stage(2)) == 9 and grown.horizon == plan.horizon
    seen = [i for k in range(5) for i in grown.stage(k)]
    assert len(seen) == len(set(seen))                    # still never a prompt twice while the set lasts
    assert plan.resized(2, 6) is plan and plan_stages(["a"] * 4, list("abcd"), horizon=3, size=6, seed=1
                                                        ).resized(1, 9).fixed
