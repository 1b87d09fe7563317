"""Grading conventions a task records in ``meta``, where the peers' graders differ.

Each key is optional, and a task without it gets the default. The foreign layouts
(:mod:`wmrl_envs.tasks.layout`) write the peer's convention into the meta of the tasks they load,
and an overlay (``wmrl.yaml``, ``meta:``) may set any of them.

``log_loss_eps``
    Probabilities are clipped into ``[eps, 1 - eps]`` before the log. Default: float64 machine
    epsilon, as scikit-learn >= 1.5 clips and so MLE-bench's graders; ``1e-15`` is Kaggle's and
    older scikit-learn's convention (one certain mistake costs 34.5 nats instead of 36.0). The
    built-in suites' tasks (``meta.generator: 1``) default to ``1e-15``: version 1 of WMRL's
    suite generator wrote their recorded scores and their leaderboards were scored under it, and
    keeping it keeps those files, their locks and the boards consistent with grading.
``ordinal_labels``
    The class set of an ordinal metric (QWK). ``"range"`` (default): the task's ``classes``, else
    every integer from the answers' smallest to their largest rating; a label outside it is
    invalid. ``"present"``: the sorted labels present in the answers or the submission, which is
    what ``cohen_kappa_score`` without ``labels`` uses, as the MLE-bench, MLE-Dojo and DSBench
    graders call it; any label of the answers' kind (numbers for numeric ratings) is valid. Its
    quadratic weights follow positions in that list, so a rating absent from both takes no place
    in the scale. The foreign layouts set ``"present"`` unless the overlay declares ``classes``
    (the scale); the ``classes`` they infer from the answers then only inform policies.
``score_decimals``
    Round the raw score to this many decimals before a leaderboard ranks it (position, medals,
    above median). The MLE-bench layout sets 5, as MLE-bench's grader rounds; default: no rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Literal, get_args

from wmrl_envs.errors import TaskFormatError
from wmrl_envs.grading.metrics import LOG_LOSS_EPS
from wmrl_envs.task_spec import TaskSpec

OrdinalLabels = Literal["range", "present"]
ORDINAL_LABELS: tuple[str, ...] = get_args(OrdinalLabels)
#: Kaggle's (and scikit-learn < 1.5's) log-loss clipping.
KAGGLE_LOG_LOSS_EPS = 1e-15
# The suite-generator version whose tasks were built and scored with KAGGLE_LOG_LOSS_EPS.
_KAGGLE_CLIPPING_GENERATOR = 1


@dataclass(frozen=True)
class Conventions:
    """A task's grading conventions (see the module docstring for each field)."""

    log_loss_eps: float = LOG_LOSS_EPS
    ordinal_labels: OrdinalLabels = "range"
    score_decimals: int | None = None


CONVENTION_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Conventions))


def conventions(spec: TaskSpec) -> Conventions:
    """The conventions recorded in ``spec.meta``; a malformed value raises :class:`TaskFormatError`."""
    meta = spec.meta
    where = f"task {spec.id}: meta"
    built_with_kaggle_clipping = meta.get("generator") == _KAGGLE_CLIPPING_GENERATOR
    eps = meta.get("log_loss_eps", KAGGLE_LOG_LOSS_EPS if built_with_kaggle_clipping else LOG_LOSS_EPS)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (0 < eps < 0.5 and math.isfinite(eps)):
        raise TaskFormatError(f"{where}.log_loss_eps must be a number in (0, 0.5), got {eps!r}")
    ordinal = meta.get("ordinal_labels", "range")
    if ordinal not in ORDINAL_LABELS:
        raise TaskFormatError(f"{where}.ordinal_labels must be one of {ORDINAL_LABELS}, got {ordinal!r}")
    decimals = meta.get("score_decimals")
    if decimals is not None and (isinstance(decimals, bool) or not isinstance(decimals, int) or decimals < 0):
        raise TaskFormatError(f"{where}.score_decimals must be a whole number >= 0 or null, got {decimals!r}")
    return Conventions(log_loss_eps=float(eps), ordinal_labels=ordinal, score_decimals=decimals)
