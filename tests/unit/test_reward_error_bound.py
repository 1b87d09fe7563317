"""The split-conformal bound on the fused reward's error (wmrl_envs/calibration/bound.py) and how
the scoring core publishes it: on synthetic streams with a known error distribution."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wmrl_envs.calibration import Calibrator, CalibratorConfig
from wmrl_envs.calibration.bound import RewardErrorBound, smallest_sample, weighted_conformal_quantile
from wmrl_envs.errors import CalibrationDataError, ConfigError
from wmrl_envs.scoring import HashSchedule, InformedSchedule, ScoredGroup, ScoreResult, ScoringCore, StepSchedule
from wmrl_envs.scoring.fusion import FusionConfig


def test_the_unweighted_bound_is_the_conformal_rank():
    residuals = np.array([0.5, 0.1, 0.4, 0.3, 0.2, 0.9, 0.7, 0.6, 0.8])  # n = 9
    # level 0.8: rank ceil(10 * 0.8) = 8 -> the 8th smallest, 0.8
    assert weighted_conformal_quantile(residuals, 0.8) == 0.8
    assert weighted_conformal_quantile(residuals, 0.9) == 0.9  # rank 9 of 9
    assert weighted_conformal_quantile(residuals, 0.95) == math.inf  # rank 10 does not exist
    assert weighted_conformal_quantile(residuals, 0.8, np.full(9, 3.0), 3.0) == 0.8  # equal weights: the same
    assert weighted_conformal_quantile(np.array([]), 0.5) == math.inf
    assert smallest_sample(0.9) == 9 and smallest_sample(0.8) == 4 and smallest_sample(0.5) == 1
    assert weighted_conformal_quantile(np.arange(9.0), 0.9) == 8.0
    assert weighted_conformal_quantile(np.arange(8.0), 0.9) == math.inf


@pytest.mark.parametrize("bad", [dict(residuals=[-0.1]), dict(residuals=[math.nan]), dict(level=1.0),
                                 dict(weights=[0.0]), dict(test_weight=-1.0)])
def test_bad_input_is_a_typed_error(bad):
    args = dict(residuals=[0.1], level=0.5, weights=None, test_weight=None) | bad
    with pytest.raises(CalibrationDataError):
        weighted_conformal_quantile(np.array(args.pop("residuals")), args.pop("level"),
                                    None if args["weights"] is None else np.array(args["weights"]), args["test_weight"])


def test_coverage_is_at_least_nominal_and_not_much_above_on_exchangeable_streams():
    """Anchors and world-model samples drawn alike: over many draws of n anchors, the bound covers
    a fresh sample's error with probability in [level, level + 1/(n + 1)] (the conformal sandwich)."""
    rng = np.random.default_rng(0)
    level, n, draws = 0.9, 39, 20_000
    errors = np.abs(rng.standard_t(3, size=(draws, n + 1)))  # heavy tails: no Gaussian shortcut
    bounds = np.array([weighted_conformal_quantile(row[:n], level) for row in errors])
    covered = float(np.mean(errors[:, n] <= bounds))
    se = math.sqrt(level * (1 - level) / draws)
    assert level - 3 * se <= covered <= level + 1 / (n + 1) + 3 * se


def test_weights_restore_coverage_when_anchors_are_chosen_by_their_error():
    """Anchors drawn with a probability that falls as the error grows (a schedule that executes
    what the world model is sure of): unweighted, the bound undercovers the world-model stream;
    weighted by that stream's density over the anchors' ((1 - p) / p), it holds the level."""
    rng = np.random.default_rng(1)
    level, draws, pool = 0.9, 3000, 400
    hits = {"weighted": [], "unweighted": []}
    for _ in range(draws):
        x = rng.uniform(size=pool)
        error = np.abs(rng.normal(0, 0.05 + 0.5 * x))  # the error grows with x
        p = 0.6 - 0.5 * x  # inclusion probability: high where the error is small
        anchor = rng.uniform(size=pool) < p
        test = np.flatnonzero(~anchor)[0]
        w = (1 - p) / p
        weighted = weighted_conformal_quantile(error[anchor], level, w[anchor], w[test])
        plain = weighted_conformal_quantile(error[anchor], level)
        hits["weighted"].append(error[test] <= weighted)
        hits["unweighted"].append(error[test] <= plain)
    se = math.sqrt(level * (1 - level) / draws)
    assert np.mean(hits["weighted"]) >= level - 3 * se
    assert np.mean(hits["unweighted"]) < level - 10 * se


def test_the_window_keeps_the_most_recent_residuals_and_state_round_trips():
    bound = RewardErrorBound(level=0.5, window=3)
    bound.observe(np.array([0.0, 0.0, math.nan]), np.array([0.9, 0.8, 0.5]))  # a missing reward is left out
    assert len(bound) == 2 and bound.bound() == pytest.approx(0.9)
    bound.observe(np.array([0.1, 0.2]), np.array([0.1, 0.1]))  # residuals 0, 0.1; 0.9 falls out
    assert len(bound) == 3 and bound.bound() == pytest.approx(0.1)
    copy = RewardErrorBound(level=0.5, window=3)
    copy.load_state_dict(bound.state_dict())
    assert copy.bound() == bound.bound()
    with pytest.raises(CalibrationDataError, match="never give a finite bound"):
        RewardErrorBound(level=0.9, window=8)
    with pytest.raises(ConfigError, match="error_bound_window"):
        FusionConfig(error_bound_level=0.9, error_bound_window=8)
    with pytest.raises(ConfigError, match="error_bound_level"):
        FusionConfig(error_bound_level=1.0)


def test_the_core_publishes_the_bound_from_anchors_calibrated_before_their_pairs():
    """Each anchor's residual is its world-model reward from maps that had not seen it; every
    world-model sample then carries the bound, and a resumed core publishes the same."""
    rng = np.random.default_rng(2)
    fusion = FusionConfig(error_bound_level=0.8, error_bound_window=64)
    core = ScoringCore(HashSchedule(), Calibrator(CalibratorConfig(min_pairs_global=4)), fusion)
    expected = RewardErrorBound(0.8, 64)
    replay = Calibrator(CalibratorConfig(min_pairs_global=4))
    for gid in range(6):
        real = rng.uniform(size=4)
        wm = np.clip(real + rng.normal(0, 0.2, 4), 0, 1)
        before = replay.calibrate(wm, ["t"] * 4)
        expected.observe(before, real)
        replay.add_pairs(wm, real, ["t"] * 4)
        anchor = ScoredGroup("t", gid, "anchor", [ScoreResult("t", "anchor", real_score=r, wm_score_raw=w, valid=True)
                                                  for r, w in zip(real, wm)])
        world = ScoredGroup("t", 100 + gid, "world_model", [ScoreResult("t", "world_model", wm_score_raw=w)
                                                              for w in wm])
        anchor, world = core.fuse([anchor, world])
        published = expected.bound()
        assert [s.reward_error_bound for s in anchor.samples] == [None] * 4
        if math.isfinite(published):
            assert [s.reward_error_bound for s in world.samples] == [pytest.approx(published)] * 4
            assert core.metrics()["bound/reward_error"] == pytest.approx(published)
        else:
            assert [s.reward_error_bound for s in world.samples] == [None] * 4
    assert core.metrics()["bound/residuals"] == 24
    resumed = ScoringCore(HashSchedule(), Calibrator(CalibratorConfig(min_pairs_global=4)), fusion)
    resumed.load_state_dict(core.state_dict())
    assert resumed.reward_error_bound() == core.reward_error_bound() is not None


def test_a_group_its_step_could_not_draw_has_no_weighted_bound():
    """An informed step whose anchor count rounded to none gives every group probability 0: no
    weighted bound can cover them (their odds against being drawn are infinite), and none is claimed."""
    core = ScoringCore(InformedSchedule(StepSchedule(8, anchor_fraction=0.1, seed=0)), Calibrator())
    rng = np.random.default_rng(0)
    wm = rng.uniform(0, 1, 40)
    core.error_bound.observe(wm, np.clip(wm + rng.normal(0, 0.1, 40), 0, 1), np.full(40, 3.0))

    def world_model_group(probability: float) -> ScoredGroup:
        samples = [ScoreResult(task_id="t", stream="world_model", wm_score_raw=0.5, inclusion_probability=probability)]
        return ScoredGroup("t", 0, "world_model", samples)

    undrawable, drawable = core.fuse([world_model_group(0.0), world_model_group(0.2)])
    assert undrawable.samples[0].reward_error_bound is None and np.isfinite(undrawable.samples[0].score)
    assert drawable.samples[0].reward_error_bound is not None
