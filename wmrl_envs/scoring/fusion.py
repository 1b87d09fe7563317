"""The inverse-variance anchor weight: one rule, called by the envs, the trainer and the adapters.

An anchor sample's advantage comes from its real reward; a world-model sample's from the
calibrated score, whose error has variance η² (the calibrator's cross-fitted residual). The
world-model stream's per-sample gradient variance is therefore inflated by about ``1 + c·η²``,
and inverse-variance weighting gives each anchor sample the weight

    w_A = clip(1 + c·η̂², 1, w_max)

relative to a world-model sample's 1 (:func:`anchor_weight`). Weights are then rescaled to mean
1 over a batch (:func:`sample_weights`), so the step size does not depend on the anchor share.
``trainers/fusion.py`` derives the rule and measures ``c`` in the trainer's warmup; without a
measurement, ``c = 1/η̂²_cal`` at the first residual (:attr:`FusionConfig.c`), the paper's choice,
which pins the weight to 2 at calibration time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from wmrl_envs.errors import ConfigError


@dataclass(frozen=True)
class FusionConfig:
    """Settings of the anchor weight.

    Attributes:
        w_max: Upper clip of ``w_A``; it bounds the harm of an overestimated residual.
        c: Slope of ``w_A`` in the residual. ``None``: the trainer measures it in warmup
            (weight 1 until then); an env without a trainer takes ``1/η̂²`` at the first
            residual (the paper's default).
    """

    w_max: float = field(default=4.0, metadata={"help": "upper clip of the anchor weight w_A = clip(1 + c*eta2, 1, w_max)"})
    c: float | None = field(default=None, metadata={
        "help": "slope of w_A in the calibrator residual eta2; default: measured in warmup "
                "(trainer) or 1/eta2 at the first measurement (env)"})

    def __post_init__(self) -> None:
        if not math.isfinite(self.w_max) or self.w_max < 1:
            raise ConfigError(f"w_max must be a finite number >= 1, got {self.w_max}")
        if self.c is not None and (not math.isfinite(self.c) or self.c < 0):
            raise ConfigError(f"c must be None or a finite number >= 0, got {self.c}")


def anchor_weight(eta2: float, c: float, w_max: float) -> float:
    """Anchor sample weight ``w_A = clip(1 + c·eta2, 1, w_max)`` relative to world-model samples."""
    if not math.isfinite(eta2) or eta2 < 0:
        raise ValueError(f"eta2 must be finite and >= 0, got {eta2}")
    if not math.isfinite(c) or c < 0:
        raise ValueError(f"c must be finite and >= 0, got {c}")
    if not math.isfinite(w_max) or w_max < 1:
        raise ValueError(f"w_max must be finite and >= 1, got {w_max}")
    return min(max(1.0 + c * eta2, 1.0), w_max)


def sample_weights(is_anchor: np.ndarray, w_anchor: float) -> np.ndarray:
    """Per-sample weights: ``w_anchor`` for anchors, 1 for world-model samples, rescaled to mean 1.

    The rescaling (divide by the total weight, multiply by N) keeps the anchor/world-model
    ratio and makes the weights sum to N: an unweighted mean is recovered exactly when every
    sample is from one stream, and a loss normaliser that counts samples (or their tokens)
    sees the same total as without weights.
    """
    is_anchor = np.asarray(is_anchor, dtype=bool)
    if is_anchor.ndim != 1 or is_anchor.size == 0:
        raise ValueError(f"is_anchor must be a non-empty 1-D array, got shape {is_anchor.shape}")
    if not math.isfinite(w_anchor) or w_anchor <= 0:
        raise ValueError(f"w_anchor must be finite and > 0, got {w_anchor}")
    raw = np.where(is_anchor, float(w_anchor), 1.0)
    return raw * (raw.size / raw.sum())
