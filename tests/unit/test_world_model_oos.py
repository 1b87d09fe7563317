"""The out-of-sample bench's metrics (``bench/world_model_metrics.py``, ``bench/world_model_oos.py``)
on small synthetic cases whose answers are worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench import world_model_metrics as m
from bench.world_model_oos import pair_steps
from wmrl_envs.errors import ConfigError


def arr(*values):
    return np.array(values, dtype=object)


def test_ece_weighs_each_bin_by_its_scripts():
    # Bin [0, 0.1): mean p 0.05, half valid -> 0.45 over 2 scripts; bin [0.9, 1]: 0.95 vs 1 -> 0.05 over 4.
    p = np.array([0.05, 0.05, 0.95, 0.95, 0.95, 0.95])
    y = np.array([0.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    assert m.ece(p, y) == pytest.approx((0.45 * 2 + 0.05 * 4) / 6)
    assert m.ece(np.array([0.0, 1.0]), np.array([0.0, 1.0])) == 0.0


def test_pairwise_accuracy_compares_scripts_of_one_task_only():
    # Task a: 2 of its 3 ordered pairs right; task b: a tied prediction counts half. A pooled count
    # would add the cross-task pairs.
    score = np.array([1.0, 2.0, 3.0, 5.0, 5.0])
    real = np.array([1.0, 3.0, 2.0, 0.0, 1.0])
    tasks = arr("a", "a", "a", "b", "b")
    assert m.pairwise_accuracy(score, real, tasks) == pytest.approx((2 + 0.5) / 4)


def test_spearman_conventions():
    assert m.spearman(np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0])) == pytest.approx(-1.0)
    assert m.spearman(np.array([0.5, 0.5, 0.5]), np.array([1.0, 2.0, 3.0])) == 0.0  # ranks nothing
    assert math.isnan(m.spearman(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 1.0])))
    assert math.isnan(m.spearman(np.array([1.0, 2.0]), np.array([1.0, 2.0])))


def test_mean_within_task_spearman():
    # a: ordered right (+1); b: two scripts ordered wrong (-1); c: its real scores tie (left out);
    # d: a constant prediction (0).
    score = np.array([1, 2, 3, 2, 1, 4, 5, 7, 7], dtype=float)
    real = np.array([1, 2, 3, 1, 2, 9, 9, 1, 2], dtype=float)
    tasks = arr("a", "a", "a", "b", "b", "c", "c", "d", "d")
    assert m.mean_within_task_spearman(score, real, tasks) == pytest.approx(0.0)
    assert m.mean_within_task_spearman(score[:5], real[:5], tasks[:5]) == pytest.approx(0.0)
    a_c_d = np.r_[0:3, 5:9]
    assert m.mean_within_task_spearman(score[a_c_d], real[a_c_d], tasks[a_c_d]) == pytest.approx(0.5)
    assert math.isnan(m.mean_within_task_spearman(score[5:7], real[5:7], tasks[5:7]))


def test_failure_recall_counts_real_failures_predicted_to_fail_any_way():
    real = arr("valid", "runtime_error", "timeout", "invalid_submission")
    pred = arr("runtime_error", "runtime_error", "valid", "no_submission")
    assert m.failure_recall(pred, real) == pytest.approx(2 / 3)
    assert math.isnan(m.failure_recall(arr("valid"), arr("valid")))


def test_exception_match_is_read_on_scripts_that_raised():
    real = arr("", "KeyError", "TypeError")
    pred = arr("KeyError", "KeyError", "ValueError")
    assert m.exception_match(pred, real) == pytest.approx(0.5)


def test_failing_above_median_valid_reward():
    # Task a: valid real rewards 0.2, 0.6, 0.9 (median 0.6); its failures are rewarded 0.7 (above)
    # and 0.6 (not above). Task b has no valid script, so its failure is not counted.
    status = arr("valid", "valid", "valid", "runtime_error", "timeout", "runtime_error")
    real = np.array([0.2, 0.6, 0.9, 0.0, 0.0, 0.0])
    pred = np.array([0.8, 0.8, 0.8, 0.7, 0.6, 0.99])
    tasks = arr("a", "a", "a", "a", "a", "b")
    assert m.failing_above_median(pred, status, real, tasks) == (1, 2)
    # Against the world model's own rewards of the valid scripts (median 0.8), none is above.
    assert m.failing_above_median(pred, status, real, tasks, reference=pred) == (0, 2)


def test_false_proofs_count_a_proved_failure_that_ran_otherwise():
    proved = np.array([True, True, True, False])
    pred_status = arr("runtime_error", "runtime_error", "import_error", "runtime_error")
    pred_exception = arr("KeyError", "KeyError", "ModuleNotFoundError", "NameError")
    real_status = arr("runtime_error", "valid", "import_error", "valid")
    real_exception = arr("KeyError", "", "ImportError", "")
    # Right; ran valid; another exception class; not proved (an estimate may be wrong).
    assert m.false_proofs(proved, pred_status, pred_exception, real_status, real_exception) == 2


def test_bootstrap_interval_and_undefined_resamples():
    values = np.array([0.0, 1.0])
    whole = m.bootstrap(lambda i: float(values[i].mean()), 2, 400, seed=0)
    assert (whole["value"], whole["lo"], whole["hi"], whole["undefined"]) == (0.5, 0.0, 1.0, 0)
    assert m.bootstrap(lambda i: float(values[i].mean()), 2, 400, seed=0) == whole  # the seed fixes it
    # Defined only where both scripts are drawn: about half the resamples, each giving 0.5.
    both = m.bootstrap(lambda i: float(values[i].mean()) if len(set(i)) == 2 else math.nan, 2, 400, seed=0)
    assert (both["lo"], both["hi"]) == (0.5, 0.5)
    assert 120 < both["undefined"] < 280


def test_pair_steps_dates_each_anchor_pair():
    # 2 pairs at step 0, none at step 1, 3 at step 2.
    assert pair_steps(np.array([0, 1, 2]), np.array([2, 2, 5])).tolist() == [0, 0, 2, 2, 2]
    with pytest.raises(ConfigError):
        pair_steps(np.array([0, 1]), np.array([3, 2]))
