"""The stratum check: does the world model over- or under-score one kind of solution?

One home for the statistic and its alarm: the audit reports it (:mod:`.audit`), and
``debias_flagged_strata`` corrects the strata it flags (:mod:`.maps`).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from wmrl_envs.calibration.config import CalibratorConfig


def stratum_residuals(residual: np.ndarray, strata: np.ndarray,
                      min_pairs: int) -> tuple[dict[str, float], dict[str, float]]:
    """Mean residual and its z (mean / standard error) of each stratum with ``min_pairs`` pairs."""
    bias: dict[str, float] = {}
    z: dict[str, float] = {}
    for name, count in Counter(s for s in strata if s is not None).items():
        if count < min_pairs:
            continue
        values = residual[strata == name]
        mean = float(values.mean())
        se = float(values.std(ddof=1) / math.sqrt(values.size)) if values.size > 1 else 0.0
        bias[name] = mean
        z[name] = mean / se if se > 0 else (0.0 if mean == 0 else math.copysign(math.inf, mean))
    return bias, z


def flagged_strata(bias: dict[str, float], z: dict[str, float], config: CalibratorConfig) -> dict[str, float]:
    """The strata the alarm flags, with their bias: ``|z| > stratum_z`` and ``|bias| >= stratum_min_bias``."""
    return {name: value for name, value in bias.items()
            if abs(z[name]) > config.stratum_z and abs(value) >= config.stratum_min_bias}
