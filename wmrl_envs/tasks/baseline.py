"""WMRL's trivial baseline submission of a task and the RPG references built from it.

This baseline is WMRL's own, not DSBench's: DSBench records its baseline's scores in its own
files, which the DSBench layout prefers when they are present. Shared by the built-in suite
generator (which writes the baseline as ``sample_submission.csv``) and the DSBench layout (which
falls back to it for folders without DSBench's baseline file), so both measure RPG against the
same ``b``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from wmrl_envs.errors import TaskFormatError
from wmrl_envs.grading import best_possible, get_metric, grade, relative_performance_gap
from wmrl_envs.grading.grader import label_key
from wmrl_envs.task_spec import TaskSpec

#: What :func:`sample_submission` predicts, by prediction kind: the trivial baseline RPG measures against.
BASELINE_NAMES = {"label": "majority class of train", "probability": "positive-class share of train",
                  "class_probabilities": "class shares of train", "value": "mean of train"}


def sample_submission(spec: TaskSpec, prediction: str, train: pd.DataFrame, test_ids: pd.Series) -> pd.DataFrame:
    """A trivial but valid submission: the majority class, class priors or the train mean."""
    target = train[spec.answer_columns[0]]
    out = pd.DataFrame({spec.id_column: test_ids.to_numpy()})
    if prediction == "value":
        out[spec.target_columns[0]] = round(float(target.mean()), 6)
        return out
    keys = target.map(label_key)
    shares = [float((keys == label_key(c)).mean()) for c in spec.classes]
    if prediction == "label":
        out[spec.target_columns[0]] = spec.classes[int(np.argmax(shares))]
    elif prediction == "probability":
        out[spec.target_columns[0]] = round(shares[1], 6)
    else:
        for col, share in zip(spec.target_columns, shares):
            out[col] = round(share, 6)
    return out


def rpg_references(spec: TaskSpec, train: pd.DataFrame, answers: pd.DataFrame) -> dict[str, Any]:
    """A task's RPG references with WMRL's trivial baseline as ``b``, as ``meta`` entries.

    ``rpg_perfect`` (g) is the answers graded against themselves and ``rpg_baseline`` (b) the score
    of :func:`sample_submission` built from ``train``. Raises :class:`TaskFormatError` when g does
    not beat b (the gap would be undefined).
    """
    metric = get_metric(spec.metric)
    label = spec.answer_columns[0]
    if label not in train.columns:
        raise TaskFormatError(f"task {spec.id}: train data lacks the target column {label!r}, so the trivial "
                              "baseline cannot be computed; record meta.rpg_baseline instead")
    baseline = sample_submission(spec, metric.prediction, train, answers[spec.id_column])
    perfect, base = best_possible(answers, spec), grade(baseline, answers, spec)
    relative_performance_gap(perfect, perfect, base, metric.higher_is_better)  # checks that g beats b
    return {"reward": "rpg", "rpg_perfect": perfect, "rpg_baseline": base,
            "rpg_baseline_name": BASELINE_NAMES[metric.prediction]}
