"""Metric registry: values against hand computations and scikit-learn, directions, lookup."""

import math

import numpy as np
import pytest
from sklearn import metrics as skm

from wmrl_envs.errors import TaskFormatError
from wmrl_envs.grading import METRICS, Metric, UnknownMetricError, get_metric

EXPECTED_DIRECTIONS = {
    "accuracy": True,
    "balanced_accuracy": True,
    "macro_f1": True,
    "qwk": True,
    "roc_auc": True,
    "log_loss": False,
    "multiclass_log_loss": False,
    "rmse": False,
    "rmsle": False,
    "mae": False,
    "median_ae": False,
    "mape": False,
    "r2": True,
}


def test_registry_holds_the_required_metrics_with_their_directions():
    assert {name: m.higher_is_better for name, m in METRICS.items()} == EXPECTED_DIRECTIONS


@pytest.mark.parametrize("name", sorted(EXPECTED_DIRECTIONS))
def test_is_better_follows_the_direction(name):
    metric = get_metric(name)
    worse = metric.ideal - 1 if metric.higher_is_better else metric.ideal + 1
    assert metric.is_better(metric.ideal, worse)
    assert not metric.is_better(worse, metric.ideal)
    assert not metric.is_better(metric.ideal, metric.ideal)


def test_get_metric_is_case_insensitive_and_unknown_names_list_known_ones():
    assert get_metric(" RMSE ") is METRICS["rmse"]
    with pytest.raises(UnknownMetricError, match=r"unknown metric 'f2'.*accuracy.*rmse") as info:
        get_metric("f2")
    assert isinstance(info.value, TaskFormatError) and isinstance(info.value, KeyError)


def test_metric_rejects_an_unknown_prediction_kind():
    with pytest.raises(ValueError, match="prediction"):
        Metric("x", True, "ranking", lambda y, p, k: 0.0, 1.0)  # type: ignore[arg-type]


def _m(name, y, p, n_classes=None):
    return get_metric(name)(np.asarray(y), np.asarray(p), n_classes)


def test_accuracy():
    assert _m("accuracy", [0, 1, 1, 0], [0, 1, 0, 0], 2) == 0.75


def test_balanced_accuracy_is_mean_recall_over_true_classes():
    # recall(0) = 2/3, recall(1) = 1
    y, p = [0, 0, 0, 1], [0, 0, 1, 1]
    assert _m("balanced_accuracy", y, p, 2) == pytest.approx(5 / 6)
    assert _m("balanced_accuracy", y, p, 2) == pytest.approx(skm.balanced_accuracy_score(y, p))


def test_macro_f1():
    # class 0: P=1, R=1/2, F1=2/3; class 1: P=2/3, R=1, F1=4/5
    y, p = [0, 0, 1, 1], [0, 1, 1, 1]
    assert _m("macro_f1", y, p, 2) == pytest.approx((2 / 3 + 4 / 5) / 2)


def test_macro_f1_counts_a_never_predicted_class_as_zero():
    assert _m("macro_f1", [0, 1, 2], [0, 1, 1], 3) == pytest.approx((1 + 2 / 3 + 0) / 3)


def test_qwk_hand_computed():
    # O has one count at (0,0), (1,2), (2,2): sum(w*O) = 1.
    # E = outer([1,1,1], [1,0,2]) / 3: sum(w*E) = (8 + 3 + 4) / 3 = 5.  kappa = 1 - 1/5.
    assert _m("qwk", [0, 1, 2], [0, 2, 2], 3) == pytest.approx(0.8)


def test_qwk_keeps_absent_classes_in_the_scale():
    y, p = [0, 1, 3, 3], [0, 3, 3, 1]
    expected = skm.cohen_kappa_score(y, p, labels=[0, 1, 2, 3], weights="quadratic")
    assert _m("qwk", y, p, 4) == pytest.approx(expected)
    assert expected != pytest.approx(skm.cohen_kappa_score(y, p, weights="quadratic"))


def test_roc_auc():
    assert _m("roc_auc", [0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], 2) == pytest.approx(0.75)


def test_roc_auc_with_one_class_in_the_answers_is_a_task_error():
    with pytest.raises(TaskFormatError, match="single class"):
        _m("roc_auc", [1, 1], [0.2, 0.9], 2)


def test_binary_log_loss():
    expected = -(math.log(0.8) + math.log(0.6)) / 2
    assert _m("log_loss", [1, 0], [0.8, 0.4], 2) == pytest.approx(expected)
    assert _m("log_loss", [1, 0], [0.8, 0.4], 2) == pytest.approx(skm.log_loss([1, 0], [0.8, 0.4]))


def test_log_losses_clip_certain_mistakes_at_machine_epsilon_unless_told_otherwise():
    # scikit-learn >= 1.5 clips at float64 machine epsilon; Kaggle used 1e-15 (a task convention).
    eps = np.finfo(np.float64).eps
    assert _m("log_loss", [1], [0.0], 2) == pytest.approx(-math.log(eps))
    assert _m("log_loss", [1], [0.0], 2) == pytest.approx(skm.log_loss([1, 0], [0.0, 0.0]) * 2)
    assert get_metric("log_loss")(np.array([1]), np.array([0.0]), 2, log_loss_eps=1e-15) == pytest.approx(-math.log(1e-15))
    assert _m("multiclass_log_loss", [0], [[0.0, 1.0]], 2) == pytest.approx(-math.log(eps))


def test_multiclass_log_loss():
    y = [0, 2]
    p = [[0.7, 0.2, 0.1], [0.2, 0.2, 0.6]]
    assert _m("multiclass_log_loss", y, p, 3) == pytest.approx(-(math.log(0.7) + math.log(0.6)) / 2)
    assert _m("multiclass_log_loss", y, p, 3) == pytest.approx(skm.log_loss(y, p, labels=[0, 1, 2]))


def test_multiclass_log_loss_renormalises_rows():
    assert _m("multiclass_log_loss", [0], [[0.5, 0.5, 0.5]], 3) == pytest.approx(math.log(3))
    # An all-zero row becomes uniform after clipping.
    assert _m("multiclass_log_loss", [1], [[0.0, 0.0]], 2) == pytest.approx(math.log(2))


def test_rmse_mae_median_ae():
    y, p = [1.0, 2.0, 3.0], [2.0, 2.0, 5.0]
    assert _m("rmse", y, p) == pytest.approx(math.sqrt(5 / 3))
    assert _m("mae", y, p) == pytest.approx(1.0)
    assert _m("median_ae", y, p) == pytest.approx(1.0)


def test_rmsle():
    # log1p(e - 1) = 1, so the squared log errors are 0 and 1.
    assert _m("rmsle", [0.0, math.e - 1], [0.0, 0.0]) == pytest.approx(math.sqrt(0.5))
    y, p = [3.0, 5.0, 2.5], [2.5, 5.0, 4.0]
    assert _m("rmsle", y, p) == pytest.approx(skm.root_mean_squared_log_error(y, p))


def test_mape_is_a_fraction():
    assert _m("mape", [1.0, 2.0, 4.0], [2.0, 2.0, 3.0]) == pytest.approx((1 + 0 + 0.25) / 3)


def test_r2():
    # SS_res = 1, SS_tot = 2
    assert _m("r2", [1.0, 2.0, 3.0], [1.0, 2.0, 4.0]) == pytest.approx(0.5)
