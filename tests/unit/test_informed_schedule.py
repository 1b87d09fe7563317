"""Anchors chosen by information (wmrl_envs/scoring/schedule.py): inclusion probabilities, the
systematic draw, and the schedule that wraps a hash or step schedule."""

from __future__ import annotations

import numpy as np
import pytest

from trainers.wmrl_config import WMRLConfig
from wmrl_envs.errors import ConfigError
from wmrl_envs.scoring import HashSchedule, InformedSchedule, StepSchedule
from wmrl_envs.scoring.schedule import (
    group_information,
    group_price,
    inclusion_probabilities,
    priority_per_cost,
    systematic_draw,
)


def test_probabilities_sum_to_the_budget_keep_the_floor_and_rise_with_information():
    info = np.array([0.0, 0.02, 0.1, 0.4, 0.05, 0.0, 0.3, 0.01])
    p = inclusion_probabilities(info, budget=2.0, floor_share=0.25)
    assert p.sum() == pytest.approx(2.0)
    assert p.min() == pytest.approx(0.25 * 2 / 8)  # the groups with no information keep the floor
    assert np.all(np.diff(p[np.argsort(info)]) >= 0)  # more information, no lower probability
    assert np.all(p <= 1.0)
    capped = inclusion_probabilities([5.0, 0.0, 0.0, 0.0], budget=2.0, floor_share=0.5)
    assert capped[0] == 1.0 and capped.sum() == pytest.approx(2.0)
    assert np.allclose(inclusion_probabilities([0.3] * 5, 1.0, 0.25), 0.2)  # equal information: equal shares
    assert np.allclose(inclusion_probabilities([0.0] * 4, 1.0, 0.25), 0.25)
    assert np.array_equal(inclusion_probabilities([0.1, 0.2], 2.0, 0.25), [1.0, 1.0])
    for bad in (dict(information=[-0.1]), dict(information=[np.nan]), dict(budget=3.0)):
        args = dict(information=[0.1, 0.2], budget=1.0, floor_share=0.25) | bad
        with pytest.raises(ConfigError):
            inclusion_probabilities(**args)


def test_the_systematic_draw_takes_exactly_the_budget_and_each_group_with_its_probability():
    p = inclusion_probabilities([0.0, 0.1, 0.5, 0.01, 0.3, 0.0, 0.0, 0.2], 2.0, 0.25)
    draws = np.array([systematic_draw(p, seed, list(range(8))) for seed in range(20_000)])
    assert set(draws.sum(axis=1)) == {2}
    se = np.sqrt(p * (1 - p) / len(draws))
    assert np.all(np.abs(draws.mean(axis=0) - p) < 4 * se + 1e-9)
    assert np.array_equal(systematic_draw(p, 3, list(range(8))), systematic_draw(p, 3, list(range(8))))
    fractional = inclusion_probabilities([0.1, 0.2, 0.3], 1.5, 0.25)
    assert {int(systematic_draw(fractional, s, ["a", "b", "c"]).sum()) for s in range(200)} == {1, 2}


def test_group_information_is_the_predictive_variance_and_zero_when_exact():
    assert group_information([0.5, 1.0], [0.1, 0.2], [False, False]) == pytest.approx((0.25 + 0.01 + 0.04) / 2)
    assert group_information([0.5, 0.5], [0.3, None], [True, False]) == pytest.approx(0.25 / 2)
    assert group_information([None], [float("nan")], [False]) == 0.0
    assert group_information([], [], []) == 0.0


def test_the_budget_follows_the_base_schedule_and_a_group_has_no_stream_before_it_is_scored():
    step = StepSchedule(8, anchor_fraction=0.125, seed=3, warmup_steps=1, warmup_anchor_fraction=0.5)
    informed = InformedSchedule(step)
    assert informed.budget(step.group_ids(0)) == 4.0  # warmup: half of 8
    assert informed.budget(step.group_ids(1)) == 1.0
    assert informed.budget(step.group_ids(1)[:4]) == 0.5  # half a step's groups: half its anchors
    assert InformedSchedule(HashSchedule(0.1)).budget(list(range(30))) == pytest.approx(3.0)
    # A fractional share: each step's budget is the hash schedule's count of that step, so informed
    # and hash anchors execute as many groups, step by step.
    sparse = StepSchedule(8, anchor_fraction=0.1, seed=3, min_anchor_groups=0)
    counts = [InformedSchedule(sparse).budget(sparse.group_ids(s)) for s in range(20)]
    assert counts == [float(sparse.streams(s).count("anchor")) for s in range(20)] and set(counts) == {0.0, 1.0}
    empty = next(s for s in range(20) if counts[s] == 0)
    chosen_none, p_none = InformedSchedule(sparse).choose(sparse.group_ids(empty), [0.2] * 8)
    assert not chosen_none.any() and not p_none.any()
    with pytest.raises(ConfigError, match="scored members"):
        informed.stream(0)
    chosen, p = informed.choose(step.group_ids(1), [0.0, 0.3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert chosen.sum() == 1 and p[1] == p.max() and p.sum() == pytest.approx(1.0)
    assert InformedSchedule(step).choose(step.group_ids(1), [0.0, 0.3] + [0.0] * 6)[0].tolist() == chosen.tolist()
    with pytest.raises(ConfigError, match="floor_share"):
        InformedSchedule(step, floor_share=0.0)
    with pytest.raises(ConfigError, match="adaptive anchoring needs a step schedule"):
        InformedSchedule(HashSchedule()).adapt(0, True, 0.1)


def test_the_trainer_config_checks_the_anchor_choice():
    assert WMRLConfig.from_flat(anchor_choice="informed").schedule.anchor_choice == "informed"
    with pytest.raises(ConfigError, match="anchor_choice"):
        WMRLConfig.from_flat(anchor_choice="greedy")
    with pytest.raises(ConfigError, match="inclusion_floor_share"):
        WMRLConfig.from_flat(inclusion_floor_share=1.5)
    with pytest.raises(ConfigError, match="informed anchors"):
        WMRLConfig.from_flat(anchor_choice="informed", env_id="wmrl/LIBERO-Long-v0", policy="vla")


def test_a_groups_price_counts_the_members_that_would_run():
    assert group_price([0.5, 1.5, None], [False, False, True]) == pytest.approx(2.0)  # the proved one does not run
    assert group_price([None, None], [True, True]) == 0.0
    assert np.isnan(group_price([0.5, None], [False, False]))  # a member that would run has no price
    assert group_price([0.5, 0.7], [False, True]) == pytest.approx(1.2)  # a proved failure the scorer executes


def test_the_priority_per_cost_is_neymans_and_prices_the_unpriced_at_the_median():
    assert np.allclose(priority_per_cost([0.04, 0.04, 0.16], [1.0, 4.0, 4.0]), [0.2, 0.1, 0.2])
    # No price (NaN) or a zero price (every member exact) takes the median of the known ones.
    assert np.allclose(priority_per_cost([0.04] * 5, [0.25, 1.0, 4.0, np.nan, 0.0]), [0.4, 0.2, 0.1, 0.2, 0.2])
    assert np.allclose(priority_per_cost([0.09, 0.01], [np.nan, np.nan]), [0.3, 0.1])
    with pytest.raises(ConfigError, match="prices"):
        priority_per_cost([0.1, 0.2], [1.0])
    with pytest.raises(ConfigError, match=">= 0"):
        priority_per_cost([0.1], [-1.0])


def test_informed_anchors_per_cost_buy_the_same_count_for_less_and_stay_unbiased():
    """Information rises with price, as it does when the scripts a world model is least sure of are
    the slow ones: weighing them against their price keeps the number of anchor groups, lowers
    their expected cost, and the inverse-probability estimate of the groups' mean error stays
    unbiased over draws."""
    rng = np.random.default_rng(0)
    step = StepSchedule(8, anchor_fraction=0.25, seed=5)
    price = rng.lognormal(0.0, 1.0, size=8)
    info = 0.02 * price / price.mean() + 0.005
    error = np.sqrt(info) * rng.standard_normal(8)  # each group's (unknown) calibration error
    plain, per_cost = InformedSchedule(step), InformedSchedule(step, per_cost=True)
    _, p_plain = plain.choose(step.group_ids(1), info, price)
    _, p_cost = per_cost.choose(step.group_ids(1), info, price)
    assert p_plain.sum() == pytest.approx(p_cost.sum()) == pytest.approx(2.0)
    assert (p_cost * price).sum() < (p_plain * price).sum()
    estimates = []
    for draw in range(4000):
        ids = [draw * 8 + j for j in range(8)]  # a new batch: a new systematic draw
        chosen, p = per_cost.choose(ids, info, price)
        estimates.append(np.sum(error[chosen] / p[chosen]) / 8)
    assert np.mean(estimates) == pytest.approx(error.mean(), abs=4 * np.std(estimates) / np.sqrt(len(estimates)))
    with pytest.raises(ConfigError, match="price"):
        per_cost.choose(step.group_ids(1), info)


def test_the_trainer_config_takes_informed_anchors_per_cost():
    config = WMRLConfig.from_flat(anchor_choice="informed_per_cost")
    assert config.schedule.anchor_choice == "informed_per_cost"
    with pytest.raises(ConfigError, match="informed anchors"):
        WMRLConfig.from_flat(anchor_choice="informed_per_cost", env_id="wmrl/LIBERO-Long-v0", policy="vla")
