"""A finite-sample bound on the fused reward's error, from the anchors (split conformal).

An anchor is both executed and scored by the world model, and the scoring core calibrates its
world-model score *before* its pair reaches the calibrator (``ScoringCore.fuse``). So each
anchor sample gives one out-of-sample residual ``|world-model reward - real score|``: the error
a world-model sample's reward would have had in its place. When anchors are drawn at random
among a step's groups (the hash and step schedules), an anchor and a world-model sample are
exchangeable, and split conformal prediction (Vovk et al. 2005; Lei et al. 2018) gives, from
``n`` residuals, a number ``b`` with

    P(|reward - real| <= b) >= level

for a new world-model sample: ``b`` is the ``ceil((n + 1) * level)``-th smallest residual, and
infinite while ``n`` is too small for that rank to exist. The guarantee is marginal (over
samples and draws of anchors), not per sample.

When anchors are drawn with unequal probabilities, a residual is weighted by the ratio of the
world-model stream's density to the anchors' (weighted conformal prediction, Tibshirani et al.
2019): :func:`weighted_conformal_quantile` takes the weights. With equal weights it is the rank
rule above.

Two things the guarantee does not cover, and :class:`RewardErrorBound` says so by its window
rather than hiding them: a world model whose error drifts as the policy moves (only the
``window`` most recent residuals are read, so the bound follows the drift with that lag), and
an error of a kind no anchor has met (an anchor stream that never sees a kind of script says
nothing of it; the bound is for the stream the anchors are drawn from).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np

from wmrl_envs.errors import CalibrationDataError


def weighted_conformal_quantile(residuals: np.ndarray, level: float, weights: np.ndarray | None = None,
                                test_weight: float | None = None) -> float:
    """The split-conformal bound at ``level`` from calibration ``residuals`` (non-negative).

    With ``weights`` (one per residual, > 0) and the test point's ``test_weight``: the smallest
    residual ``r`` whose weighted share ``sum(w_i for r_i <= r) / (sum(w) + test_weight)``
    reaches ``level``, the test point's own mass sitting at infinity; ``inf`` when no residual
    reaches it. Without weights every weight is 1 (the test point's too), which is the rank
    rule ``ceil((n + 1) * level)``.
    """
    r = np.asarray(residuals, dtype=float)
    if r.ndim != 1 or not np.all(np.isfinite(r)) or np.any(r < 0):
        raise CalibrationDataError("residuals must be a 1-d array of finite numbers >= 0")
    if not 0.0 < level < 1.0:
        raise CalibrationDataError(f"level must lie in (0, 1), got {level}")
    w = np.ones(r.size) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != r.shape or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise CalibrationDataError("weights must be finite, > 0 and one per residual")
    test = 1.0 if test_weight is None else float(test_weight)
    if not math.isfinite(test) or test <= 0:
        raise CalibrationDataError(f"test_weight must be finite and > 0, got {test_weight}")
    if r.size == 0:
        return math.inf
    order = np.argsort(r, kind="stable")
    share = np.cumsum(w[order]) / (w.sum() + test)
    # A relative tolerance: with equal weights, k / (n + 1) >= level must hold at the exact rank.
    reached = np.flatnonzero(share >= level * (1.0 - 1e-12))
    return float(r[order][reached[0]]) if reached.size else math.inf


def smallest_sample(level: float) -> int:
    """The fewest residuals for which an unweighted bound at ``level`` is finite."""
    return math.ceil(level / (1.0 - level) - 1e-9)


class RewardErrorBound:
    """The anchors' out-of-sample residuals, most recent ``window``, and the bound they give."""

    def __init__(self, level: float = 0.9, window: int = 256) -> None:
        if not 0.0 < level < 1.0:
            raise CalibrationDataError(f"level must lie in (0, 1), got {level}")
        if window < smallest_sample(level):
            raise CalibrationDataError(f"a window of {window} residuals can never give a finite bound at level "
                                       f"{level}: it needs at least {smallest_sample(level)}")
        self.level, self.window = level, window
        self._residuals: deque[float] = deque(maxlen=window)
        self._weights: deque[float] = deque(maxlen=window)

    def __len__(self) -> int:
        return len(self._residuals)

    def observe(self, rewards: np.ndarray, real: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Add anchor samples: the world-model reward each would have had (from maps fitted before
        its pair), its real score and, under unequal inclusion, its weight. Pairs with a missing
        value (an infrastructure failure, a world model that gave no score) are left out."""
        rewards, real = np.asarray(rewards, dtype=float), np.asarray(real, dtype=float)
        w = np.ones(rewards.size) if weights is None else np.asarray(weights, dtype=float)
        if not rewards.shape == real.shape == w.shape:
            raise CalibrationDataError("rewards, real scores and weights must have one value per sample")
        keep = np.isfinite(rewards) & np.isfinite(real)
        if np.any(~np.isfinite(w[keep]) | (w[keep] <= 0)):
            raise CalibrationDataError("weights must be finite and > 0")
        self._residuals.extend(np.abs(rewards[keep] - real[keep]).tolist())
        self._weights.extend(w[keep].tolist())

    def bound(self, test_weight: float | None = None) -> float:
        """The level-``level`` bound on ``|reward - real|`` of a new world-model sample; ``inf``
        until enough residuals are in."""
        return weighted_conformal_quantile(np.array(self._residuals), self.level, np.array(self._weights),
                                           test_weight)

    def state_dict(self) -> dict[str, Any]:
        return {"residuals": list(self._residuals), "weights": list(self._weights)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._residuals = deque(state["residuals"], maxlen=self.window)
        self._weights = deque(state["weights"], maxlen=self.window)
