"""Potential-shaped rewards (wmrl_envs/scoring/shaping.py) through the scoring core."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_envs.calibration import Calibrator, CalibratorConfig
from wmrl_envs.scoring import HashSchedule, ScoredGroup, ScoreResult, ScoringCore
from wmrl_envs.scoring.shaping import shaped_return


def shaped(stream: str, gid: int, real: list[float], end: list[float], start: float) -> ScoredGroup:
    """A group of finished, shaped episodes from one state (so one ``Phi_0``)."""
    samples = [ScoreResult("t", stream, real_score=r, raw_score=r, valid=True, wm_score_raw=e, potential_start=start)
               for r, e in zip(real, end)]
    return ScoredGroup("t", gid, stream, samples)


def test_the_shaped_return_telescopes_the_per_step_differences():
    potentials = np.array([0.2, 0.25, 0.1, 0.6, 0.55])  # Phi_0 .. Phi_T of one episode
    per_step = potentials[1:] - potentials[:-1]  # r_t = gamma Phi_{t+1} - Phi_t with gamma 1
    assert shaped_return([1.0], [potentials[-1]], [potentials[0]]) == pytest.approx(1.0 + per_step.sum())
    with pytest.raises(ValueError, match="success"):
        shaped_return([np.nan], [0.5], [0.2])  # the sparse reward counts on every rollout
    with pytest.raises(ValueError, match="shapes"):
        shaped_return([1.0, 0.0], [0.5], [0.2])


def test_world_model_groups_get_success_plus_the_calibrated_potentials_rise():
    calibrator = Calibrator(CalibratorConfig(min_pairs_global=4))
    core = ScoringCore(HashSchedule(), calibrator)
    # The model's final reading is half the success probability: anchors teach the map that.
    anchor = shaped("anchor", 1, real=[0.0, 0.0, 1.0, 1.0, 0.0, 1.0], end=[0.05, 0.1, 0.45, 0.5, 0.15, 0.4], start=0.1)
    world = shaped("world_model", 2, real=[1.0, 0.0, 0.0], end=[0.45, 0.3, 0.1], start=0.2)
    core.fuse([world, anchor])
    assert calibrator.n_pairs == 6  # (Phi_T, success) pairs of the anchors only
    assert anchor.rewards.tolist() == [0.0, 0.0, 1.0, 1.0, 0.0, 1.0]  # anchors: the real success alone
    f = lambda x: calibrator.calibrate(np.array([x]), ["t"])[0]  # noqa: E731  (the map after the anchors)
    expected = [r + f(e) - f(0.2) for r, e in zip([1.0, 0.0, 0.0], [0.45, 0.3, 0.1])]
    assert world.rewards.tolist() == pytest.approx(expected)
    assert [s.wm_score_calibrated for s in world.samples] == pytest.approx([f(e) for e in [0.45, 0.3, 0.1]])
    assert world.rewards[0] > 1.0  # a success that also ends where the model is sure
    assert f(0.45) > f(0.1)  # the map rises, so the shaping orders the failures too


def test_without_debiasing_the_raw_potentials_are_clipped_to_range():
    core = ScoringCore(HashSchedule(), Calibrator(), debias=False)
    world = shaped("world_model", 2, real=[0.0, 1.0], end=[1.3, 0.6], start=-0.2)
    core.fuse([world])
    assert world.rewards.tolist() == pytest.approx([0.0 + 1.0 - 0.0, 1.0 + 0.6 - 0.0])
