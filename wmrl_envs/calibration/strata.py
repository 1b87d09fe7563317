"""The stratum check: does the world model over- or under-score one kind of solution?

One home for the statistic and its alarm: the audit reports it (:mod:`.audit`), and
``debias_flagged_strata`` corrects the strata it flags (:mod:`.maps`).

A stratum is checked from 8 distinct pairs on, where a mean over its standard error follows a
Student t with few degrees of freedom, not a normal: at 10 pairs, |t| > 3.5 happens 14 times as
often as |z| > 3.5. The check reports each stratum's t on the normal scale (the z with the same
tail probability), so ``stratum_z`` is one false-alarm rate whatever a stratum's size.

A policy samples the same script again and again, and each copy adds an anchor pair with the
same task, world-model score and real score. The copies are one piece of evidence about the
world model, not many: the check counts a stratum's distinct pairs, and its standard error is
clustered over them. Counting copies as independent pairs shrinks the standard error by up to
the square root of the copies, and the alarm then sounds on an unbiased world model.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t

from wmrl_envs.calibration.config import CalibratorConfig

#: Decimals to which two pairs' scores must agree to repeat one another. A world model scores one
#: script a few units in the last place apart in different batches (its arithmetic depends on
#: the batch), so exact equality would miss the copies.
REPEAT_DECIMALS = 9


def repeat_groups(wm: np.ndarray, real: np.ndarray, tasks: np.ndarray) -> np.ndarray:
    """One label per pair, shared by the pairs that repeat one another: the same task, and the
    same world-model and real scores to ``REPEAT_DECIMALS`` (in practice, one script sampled again)."""
    index: dict[tuple, int] = {}
    keys = zip(tasks.tolist(), np.round(wm, REPEAT_DECIMALS).tolist(), np.round(real, REPEAT_DECIMALS).tolist())
    return np.array([index.setdefault(key, len(index)) for key in keys], dtype=np.int64)


def distinct_pairs(strata: np.ndarray, repeats: np.ndarray, names: Iterable[str]) -> dict[str, int]:
    """How many distinct pairs (groups of :func:`repeat_groups`) each named stratum holds."""
    return {name: int(np.unique(repeats[strata == name]).size) for name in names}


def stratum_residuals(residual: np.ndarray, strata: np.ndarray, repeats: np.ndarray,
                      min_pairs: int) -> tuple[dict[str, float], dict[str, float]]:
    """Mean residual and its z of each stratum with ``min_pairs`` distinct pairs.

    The mean is over every pair, as the rewards see them. Its standard error is clustered
    over the groups of :func:`repeat_groups` (CR1): without repeats it is the plain
    standard error of the mean. The z is the t statistic mean / SE moved to the normal scale
    through its tail probability under G - 1 degrees of freedom, for G distinct pairs."""
    bias: dict[str, float] = {}
    z: dict[str, float] = {}
    for name in dict.fromkeys(s for s in strata if s is not None):
        members = strata == name
        _, group = np.unique(repeats[members], return_inverse=True)
        n_groups = int(group.max()) + 1
        if n_groups < min_pairs:
            continue
        values = residual[members]
        mean = float(values.mean())
        per_group = np.bincount(group, weights=values - mean)
        se = (math.sqrt(n_groups / (n_groups - 1) * float(per_group @ per_group)) / values.size
              if n_groups > 1 else 0.0)
        bias[name] = mean
        z[name] = _normal_scale(mean / se, n_groups - 1) if se > 0 else (
            0.0 if mean == 0 else math.copysign(math.inf, mean))
    return bias, z


def _normal_scale(t_value: float, dof: int) -> float:
    """The z with the tail probability of ``t_value`` under ``dof`` degrees of freedom."""
    z = float(norm.isf(student_t.sf(abs(t_value), dof)))
    return math.copysign(z if math.isfinite(z) else abs(t_value), t_value)  # beyond float tails: |t| bounds it


def flagged_strata(bias: dict[str, float], z: dict[str, float], config: CalibratorConfig) -> dict[str, float]:
    """The strata the alarm flags, with their bias: ``|z| > stratum_z`` and ``|bias| >= stratum_min_bias``."""
    return {name: value for name, value in bias.items()
            if abs(z[name]) > config.stratum_z and abs(value) >= config.stratum_min_bias}
