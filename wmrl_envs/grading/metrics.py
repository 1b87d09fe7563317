"""The metric registry: every metric a task may name, with its direction and input kind.

A :class:`Metric` is a pure function of two NumPy arrays plus what the grader needs to know
about it: which way is better and what a submission must hold. The grader
(:mod:`wmrl_envs.grading.grader`) turns submission and answers into these arrays:

* ``"label"``: ``y_true`` and ``y_pred`` are integer class codes, i.e. positions in the
  task's class order (``spec.classes``, else the sorted answer labels).
* ``"probability"``: binary tasks; ``y_true`` holds codes in {0, 1} and ``y_pred`` the
  probability of the positive class (code 1 = ``spec.classes[1]`` or the sorted-second label).
* ``"class_probabilities"``: ``y_true`` holds codes and ``y_pred`` is an ``(n, k)`` matrix,
  one column per class in class order.
* ``"value"``: regression; both arrays are floats.

``n_classes`` is the number of classes for the first three kinds and ``None`` for ``"value"``.
A metric may also take task conventions as keywords (:attr:`Metric.params`, values from
:func:`wmrl_envs.grading.conventions.conventions`), e.g. the log losses' clipping ``log_loss_eps``.

scikit-learn is imported inside the functions that use it: importing ``sklearn.metrics``
takes seconds, and environments import this module whether or not they grade.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, get_args

import numpy as np

from wmrl_envs.errors import TaskFormatError

PredictionKind = Literal["label", "probability", "class_probabilities", "value"]
PREDICTION_KINDS: tuple[str, ...] = get_args(PredictionKind)
CLASSIFICATION_KINDS: tuple[str, ...] = ("label", "probability", "class_probabilities")
MetricFn = Callable[..., float]

# Probabilities are clipped into [eps, 1 - eps] so one confident mistake costs a finite loss.
# The default is scikit-learn's since 1.5, float64 machine epsilon (36.0 nats per certain
# mistake), which MLE-bench's graders inherit; Kaggle and older scikit-learn used 1e-15 (34.5
# nats), which a task can record as its convention (meta.log_loss_eps).
LOG_LOSS_EPS = float(np.finfo(np.float64).eps)


class UnknownMetricError(TaskFormatError, KeyError):
    """A task (or caller) named a metric that is not in the registry."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class Metric:
    """A named scoring function with its direction and the prediction kind it scores.

    Attributes:
        name: Registry name, as written in ``task.yaml``'s ``metric`` field.
        higher_is_better: The metric's direction; leaderboards and RPG follow it.
        prediction: What a submission holds (see the module docstring).
        fn: ``fn(y_true, y_pred, n_classes, **params) -> float``.
        ideal: The best value the metric can take (a perfect submission scores it).
        description: One line for humans.
        non_negative: Predictions (and answers) must be ``>= 0`` (e.g. rmsle).
        binary: Only defined for exactly two classes.
        ordinal: Class order is meaningful (distances between positions are used).
        params: Task conventions ``fn`` takes as keywords (names of
            :class:`~wmrl_envs.grading.conventions.Conventions` fields).
    """

    name: str
    higher_is_better: bool
    prediction: PredictionKind
    fn: MetricFn
    ideal: float
    description: str = ""
    non_negative: bool = False
    binary: bool = False
    ordinal: bool = False
    params: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.prediction not in PREDICTION_KINDS:
            raise ValueError(f"metric {self.name}: prediction must be one of {PREDICTION_KINDS}")

    def __call__(self, y_true: np.ndarray, y_pred: np.ndarray, n_classes: int | None = None, **params: float) -> float:
        return float(self.fn(np.asarray(y_true), np.asarray(y_pred), n_classes, **params))

    @property
    def is_classification(self) -> bool:
        return self.prediction in CLASSIFICATION_KINDS

    def is_better(self, a: float, b: float) -> bool:
        """Whether score ``a`` is strictly better than ``b`` in this metric's direction."""
        return a > b if self.higher_is_better else a < b


def _accuracy(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int | None) -> float:
    return float(np.mean(y_true == y_pred))


def _balanced_accuracy(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int | None) -> float:
    # Mean recall over the classes present in the answers (scikit-learn's definition),
    # written out so predictions of absent classes do not trigger warnings.
    recalls = [np.mean(y_pred[y_true == c] == c) for c in np.unique(y_true)]
    return float(np.mean(recalls))


def _macro_f1(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int | None) -> float:
    from sklearn.metrics import f1_score  # noqa: PLC0415 - sklearn.metrics would add ~40 ms to gym.make and wmrl --help

    # A class that is never predicted has undefined precision; it counts as F1 = 0.
    return float(f1_score(y_true, y_pred, average="macro", zero_division=0.0))


def _roc_auc(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int | None) -> float:
    if np.unique(y_true).size < 2:
        raise TaskFormatError("roc_auc is undefined when the answers hold a single class")
    from sklearn.metrics import roc_auc_score  # noqa: PLC0415 - sklearn.metrics would add ~40 ms to gym.make and wmrl --help

    return float(roc_auc_score(y_true, y_pred))


def _binary_log_loss(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int | None,
                     log_loss_eps: float = LOG_LOSS_EPS) -> float:
    p = np.clip(y_pred.astype(float), log_loss_eps, 1 - log_loss_eps)
    return float(-np.mean(np.where(y_true == 1, np.log(p), np.log1p(-p))))


def _multiclass_log_loss(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int | None,
                         log_loss_eps: float = LOG_LOSS_EPS) -> float:
    # Clip each probability, then renormalise every row to sum to one (Kaggle): without it a row
    # of all ones would score a perfect 0. A row that already sums to one moves by ~eps only.
    p = np.clip(y_pred.astype(float), log_loss_eps, 1 - log_loss_eps)
    p = p / p.sum(axis=1, keepdims=True)
    return float(-np.mean(np.log(p[np.arange(len(y_true)), y_true])))


def _qwk(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int | None) -> float:
    from sklearn.metrics import cohen_kappa_score  # noqa: PLC0415 - sklearn.metrics would add ~40 ms to gym.make and wmrl --help

    # Fixing the labels to every class position keeps the quadratic weights tied to the
    # declared order even when some classes appear in neither array.
    labels = np.arange(n_classes) if n_classes else None
    return float(cohen_kappa_score(y_true, y_pred, labels=labels, weights="quadratic"))


def _rmse(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int | None) -> float:
    return float(np.sqrt(np.mean((y_true - y_pred) ** 2)))


def _rmsle(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int | None) -> float:
    return float(np.sqrt(np.mean((np.log1p(y_true) - np.log1p(y_pred)) ** 2)))


def _mae(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int | None) -> float:
    return float(np.mean(np.abs(y_true - y_pred)))


def _median_ae(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int | None) -> float:
    return float(np.median(np.abs(y_true - y_pred)))


def _r2(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int | None) -> float:
    from sklearn.metrics import r2_score  # noqa: PLC0415 - sklearn.metrics would add ~40 ms to gym.make and wmrl --help

    return float(r2_score(y_true, y_pred))


def _mape(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int | None) -> float:
    from sklearn.metrics import mean_absolute_percentage_error  # noqa: PLC0415 - sklearn.metrics would add ~40 ms to gym.make and wmrl --help

    # scikit-learn divides by max(|y|, machine eps), so a zero answer gives a huge, finite error.
    return float(mean_absolute_percentage_error(y_true, y_pred))


_ALL: tuple[Metric, ...] = (
    Metric("accuracy", True, "label", _accuracy, 1.0, "fraction of rows with the right label"),
    Metric("balanced_accuracy", True, "label", _balanced_accuracy, 1.0, "mean per-class recall"),
    Metric("macro_f1", True, "label", _macro_f1, 1.0, "unweighted mean of per-class F1"),
    Metric("qwk", True, "label", _qwk, 1.0, "quadratic weighted kappa on ordered labels", ordinal=True),
    Metric("roc_auc", True, "probability", _roc_auc, 1.0, "area under the ROC curve", binary=True),
    Metric("log_loss", False, "probability", _binary_log_loss, 0.0, "binary cross-entropy of P(positive)", binary=True,
           params=("log_loss_eps",)),
    Metric("multiclass_log_loss", False, "class_probabilities", _multiclass_log_loss, 0.0,
           "cross-entropy of per-class probabilities (rows renormalised)", params=("log_loss_eps",)),
    Metric("rmse", False, "value", _rmse, 0.0, "root mean squared error"),
    Metric("rmsle", False, "value", _rmsle, 0.0, "root mean squared log(1 + x) error", non_negative=True),
    Metric("mae", False, "value", _mae, 0.0, "mean absolute error"),
    Metric("median_ae", False, "value", _median_ae, 0.0, "median absolute error"),
    Metric("mape", False, "value", _mape, 0.0, "mean absolute percentage error (a fraction, not %)"),
    Metric("r2", True, "value", _r2, 1.0, "coefficient of determination"),
)

METRICS: Mapping[str, Metric] = MappingProxyType({m.name: m for m in _ALL})


def get_metric(name: str) -> Metric:
    """Look a metric up by name (case-insensitive); unknown names list the known ones."""
    try:
        return METRICS[name.strip().lower()]
    except KeyError:
        raise UnknownMetricError(f"unknown metric {name!r}; known metrics: {sorted(METRICS)}") from None
