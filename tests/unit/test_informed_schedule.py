"""Anchors chosen by information (wmrl_envs/scoring/schedule.py): inclusion probabilities, the
systematic draw, and the schedule that wraps a hash or step schedule."""

from __future__ import annotations

import numpy as np
import pytest

from trainers.wmrl_config import WMRLConfig
from wmrl_envs.errors import ConfigError
from wmrl_envs.scoring import HashSchedule, InformedSchedule, StepSchedule
from wmrl_envs.scoring.schedule import group_information, inclusion_probabilities, systematic_draw


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
