"""The saving's definitions (bench/speedup.py): paired by seed, with bootstrap intervals that can say 'unknown'."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.speedup import Interval, compute_ratio, compute_to_score, executed_share, score_difference


def curve(points: list[tuple[float, float]]) -> list[dict]:
    return [{"step": i, "compute_cpu_s": c, "heldout_mean": s, "heldout_se": 0.0} for i, (c, s) in enumerate(points)]


def test_the_compute_ratio_is_a_ratio_of_means_with_an_interval_around_it():
    real, mode = [700.0, 800.0, 760.0, 690.0, 720.0], [140.0, 120.0, 160.0, 150.0, 130.0]
    ratio = compute_ratio(real, mode)
    assert ratio.point == pytest.approx(np.mean(real) / np.mean(mode))
    assert ratio.lo < ratio.point < ratio.hi
    assert compute_ratio(real, mode) == ratio  # seeded: the same runs read the same


def test_a_resample_keeps_a_seeds_runs_together():
    # real and the mode move together from seed to seed: the paired interval of the difference is
    # narrower than the spread of either mode's scores.
    base = np.array([0.40, 0.55, 0.70, 0.50, 0.65])
    difference = score_difference(base, base + 0.02)
    assert difference.point == pytest.approx(0.02)
    assert difference.lo == pytest.approx(0.02) and difference.hi == pytest.approx(0.02)


def test_one_seed_has_a_point_and_no_interval():
    one = compute_ratio([700.0], [140.0])
    assert one.point == pytest.approx(5.0) and math.isnan(one.lo)
    assert one.text(1, "x") == "5.0x"
    assert one.to_dict() == {"point": 5.0, "lo": None, "hi": None}
    assert Interval.from_dict(one.to_dict()).text(1, "x") == "5.0x"


def test_unpaired_runs_are_refused():
    with pytest.raises(ValueError, match="paired seeds"):
        compute_ratio([1.0, 2.0], [1.0])


def test_compute_to_a_fixed_score_reads_the_mean_curves_and_says_when_one_never_gets_there():
    real = [curve([(0, 0.4), (400, 0.5), (800, 0.6)])] * 3
    fast = [curve([(0, 0.4), (50, 0.5), (100, 0.6)])] * 3
    assert compute_to_score(real, fast, 0.55).point == pytest.approx(600 / 75)
    never = [curve([(0, 0.4), (50, 0.45), (100, 0.5)])] * 3
    reading = compute_to_score(real, never, 0.55)
    assert math.isnan(reading.point) and reading.text() == "—"


def test_the_executed_share_pools_scripts_over_runs():
    assert executed_share([10, 30], [100, 100]) == pytest.approx(0.2)
    assert math.isnan(executed_share([], []))
