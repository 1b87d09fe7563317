"""Task featurisation: a fixed-size float vector describing a task, for policies to condition on.

Every feature is read from the :class:`~wmrl_envs.task_spec.TaskSpec` alone (never from the
data files), so featurising is instant and works for held-out tasks. Dataset statistics come
from ``spec.meta`` when the suite generator recorded them; a missing statistic is encoded as 0
together with a ``has_*`` flag of 0, so "unknown" never looks like "zero rows".

Features, in :data:`FEATURE_NAMES` order (counts are squashed with ``log10`` so that every
feature is of order one):

* ``task_type/<t>``: one-hot over :data:`~wmrl_envs.task_spec.TASK_TYPES`.
* ``prediction/<k>``: one-hot over the metric's prediction kind (``label``, ``probability``,
  ``class_probabilities``, ``value``); it fixes what the submission holds.
* ``metric/higher_is_better``: the metric's direction (1 or 0).
* ``data/log_n_train``, ``data/has_n_train``: ``log10(1 + meta["n_train"]) / 6`` (1.0 at a
  million rows) and whether it is known.
* ``data/log_n_features``, ``data/has_n_features``: ``log10(1 + meta["n_features"]) / 4`` (1.0
  at 10,000 columns) and whether it is known.
* ``data/log_n_classes``: ``log10(n_classes) / 2`` (1.0 at 100 classes, 0 for regression), with
  ``n_classes`` from ``meta["n_classes"]``, else ``len(spec.classes)``.
* ``modality/text``, ``modality/image``, ``modality/timeseries``: the input modality implied by
  the task type (the prefix before ``-``); all zero for tabular tasks.
* ``data/categorical_fraction``, ``data/has_categorical_fraction``: share of categorical input
  columns, from ``meta["categorical_fraction"]``, else ``meta["n_categorical"] / meta["n_features"]``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import torch

from wmrl_envs.grading.metrics import PREDICTION_KINDS, get_metric
from wmrl_envs.task_spec import TASK_TYPES, Task, TaskSpec

MODALITIES: tuple[str, ...] = ("text", "image", "timeseries")

FEATURE_NAMES: tuple[str, ...] = (
    *(f"task_type/{t}" for t in TASK_TYPES),
    *(f"prediction/{k}" for k in PREDICTION_KINDS),
    "metric/higher_is_better",
    "data/log_n_train",
    "data/has_n_train",
    "data/log_n_features",
    "data/has_n_features",
    "data/log_n_classes",
    *(f"modality/{m}" for m in MODALITIES),
    "data/categorical_fraction",
    "data/has_categorical_fraction",
)
FEATURE_DIM: int = len(FEATURE_NAMES)


def as_spec(task: Task | TaskSpec) -> TaskSpec:
    """The spec of a :class:`Task`, or the spec itself (policies accept either as a prompt)."""
    return task.spec if isinstance(task, Task) else task


def modality(spec: TaskSpec) -> str:
    """``"tabular"``, or the modality prefix of the task type (``text-binary`` -> ``text``)."""
    prefix = spec.task_type.split("-", 1)[0]
    return prefix if prefix in MODALITIES else "tabular"


def meta_count(meta: Mapping[str, Any], key: str) -> float | None:
    """A non-negative count from ``meta``, or None when absent or unusable (e.g. ``"?"``)."""
    value = meta.get(key)
    # numbers.Real also admits NumPy scalars, which YAML-free generators may write.
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def n_classes(spec: TaskSpec) -> int:
    """Number of classes of a classification task (0 for regression or when unknown)."""
    if get_metric(spec.metric).prediction == "value":
        return 0
    known = meta_count(spec.meta, "n_classes")
    if known is not None:
        return int(known)
    return len(spec.classes) if spec.classes else 0


def categorical_fraction(spec: TaskSpec) -> float | None:
    """Share of categorical input columns in [0, 1], or None when ``meta`` does not say."""
    fraction = meta_count(spec.meta, "categorical_fraction")
    if fraction is not None:
        return min(fraction, 1.0)
    n_categorical, n_features = meta_count(spec.meta, "n_categorical"), meta_count(spec.meta, "n_features")
    if n_categorical is None or not n_features:
        return None
    return min(n_categorical / n_features, 1.0)


def task_features(task: Task | TaskSpec) -> torch.Tensor:
    """The float32 feature vector ``[FEATURE_DIM]`` of a task (see the module docstring)."""
    spec = as_spec(task)
    metric = get_metric(spec.metric)
    values: dict[str, float] = {f"task_type/{spec.task_type}": 1.0, f"prediction/{metric.prediction}": 1.0}
    values["metric/higher_is_better"] = float(metric.higher_is_better)
    for key, scale in (("n_train", 6.0), ("n_features", 4.0)):
        count = meta_count(spec.meta, key)
        if count is not None:
            values[f"data/log_{key}"] = math.log10(1.0 + count) / scale
            values[f"data/has_{key}"] = 1.0
    k = n_classes(spec)
    values["data/log_n_classes"] = math.log10(k) / 2.0 if k > 0 else 0.0
    if modality(spec) != "tabular":
        values[f"modality/{modality(spec)}"] = 1.0
    fraction = categorical_fraction(spec)
    if fraction is not None:
        values["data/categorical_fraction"] = fraction
        values["data/has_categorical_fraction"] = 1.0
    return torch.tensor([values.get(name, 0.0) for name in FEATURE_NAMES], dtype=torch.float32)
