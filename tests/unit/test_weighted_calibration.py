"""Design-weighted calibration: anchors drawn with unequal inclusion probabilities, each pair
weighing 1 / its probability (wmrl_envs/calibration/maps.py), on synthetic streams whose
selection depends on the world model's error."""

from __future__ import annotations

import numpy as np
import pytest

from wmrl_envs.calibration import Calibrator, CalibratorConfig
from wmrl_envs.errors import CalibrationDataError


def selected_stream(seed: int, n: int = 4000):
    """A population whose real score is the world-model score plus an error that grows with a
    hidden uncertainty ``u``, and anchors drawn with probability rising with ``u``: the anchors
    see mostly the scripts the world model under-scores."""
    rng = np.random.default_rng(seed)
    wm = rng.uniform(0.1, 0.9, n)
    u = rng.uniform(size=n)
    real = np.clip(wm + 0.4 * (u - 0.5), 0, 1)
    p = 0.05 + 0.6 * u
    drawn = rng.uniform(size=n) < p
    return wm[drawn], real[drawn], 1 / p[drawn], wm, real


@pytest.mark.parametrize("form", ["affine", "isotonic"])
def test_weighted_maps_recover_the_population_and_unweighted_ones_do_not(form):
    wm, real, weights, population_wm, population_real = selected_stream(0)
    config = CalibratorConfig(global_form=form)
    weighted, plain = Calibrator(config), Calibrator(config)
    weighted.add_pairs(wm, real, "t", weights=weights)
    plain.add_pairs(wm, real, "t")
    bias = {name: float(np.mean(c.calibrate(population_wm, "t") - population_real))
            for name, c in (("weighted", weighted), ("plain", plain))}
    assert abs(bias["weighted"]) < 0.015
    assert bias["plain"] > 0.04  # the anchors' own conditional mean: too high for the population
    assert weighted.eta2 > 0 and np.isfinite(weighted.eta2)


def test_unit_weights_are_the_unweighted_calibrator_exactly_and_weights_survive_a_state():
    wm, real, weights, *_ = selected_stream(1, n=400)
    config = CalibratorConfig(task_prior_pairs=None)
    tasks = [f"t{i % 3}" for i in range(wm.size)]
    ones, plain = Calibrator(config), Calibrator(config)
    ones.add_pairs(wm, real, tasks, weights=np.ones(wm.size))
    plain.add_pairs(wm, real, tasks)
    grid = np.linspace(0, 1, 11)
    assert np.array_equal(ones.calibrate(grid, "t0"), plain.calibrate(grid, "t0"))
    assert ones.eta2 == plain.eta2 and "weights" not in ones.state_dict()
    weighted = Calibrator(config)
    weighted.add_pairs(wm, real, tasks, weights=weights)
    copy = Calibrator.from_json(weighted.to_json())
    assert np.array_equal(copy.calibrate(grid, "t1"), weighted.calibrate(grid, "t1"))
    assert not np.array_equal(weighted.calibrate(grid, "t1"), plain.calibrate(grid, "t1"))


@pytest.mark.parametrize("bad", [[0.0, 1.0], [1.0, -2.0], [1.0], [1.0, float("nan")]])
def test_bad_weights_are_a_typed_error_and_keep_the_state(bad):
    calibrator = Calibrator()
    with pytest.raises(CalibrationDataError, match="weights"):
        calibrator.add_pairs([0.2, 0.4], [0.3, 0.5], weights=bad)
    assert calibrator.n_pairs == 0
