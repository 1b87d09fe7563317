"""OpenVLA-style action tokens: 7 action dimensions, 256 bins each.

Each of the six arm dimensions is normalised with its 1st and 99th percentiles over the
demonstrations to [-1, 1] (clipped), the gripper is already -1/+1 and is left alone, and
[-1, 1] is cut into 256 equal bins. A token is a bin index; decoding returns the bin's
centre, un-normalised. Percentiles rather than min/max keep a few extreme demonstration
actions from stretching the bins.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from wmrl_envs.errors import ConfigError

N_BINS = 256
ACTION_DIM = 7
GRIPPER = 6


@dataclass
class ActionTokenizer:
    """Per-dimension ``low``/``high`` (the 1st/99th percentiles; gripper -1/+1)."""

    low: np.ndarray
    high: np.ndarray

    def __post_init__(self) -> None:
        self.low = np.asarray(self.low, dtype=np.float64).reshape(ACTION_DIM)
        self.high = np.asarray(self.high, dtype=np.float64).reshape(ACTION_DIM)
        if np.any(self.high <= self.low):
            raise ConfigError(f"every high must exceed its low: {self.low} / {self.high}")

    @classmethod
    def fit(cls, actions: np.ndarray) -> ActionTokenizer:
        """Percentile bounds from demonstration actions ``[N, 7]``."""
        actions = np.asarray(actions, dtype=np.float64).reshape(-1, ACTION_DIM)
        low, high = np.percentile(actions, 1, axis=0), np.percentile(actions, 99, axis=0)
        low[GRIPPER], high[GRIPPER] = -1.0, 1.0
        flat = high - low < 1e-6  # a dimension the demonstrations never move
        low[flat], high[flat] = low[flat] - 1e-3, high[flat] + 1e-3
        return cls(low, high)

    @classmethod
    def identity(cls) -> ActionTokenizer:
        """No normalisation: bins over the raw [-1, 1] action range."""
        return cls(-np.ones(ACTION_DIM), np.ones(ACTION_DIM))

    def normalise(self, actions: np.ndarray) -> np.ndarray:
        return np.clip(2.0 * (np.asarray(actions, np.float64) - self.low) / (self.high - self.low) - 1.0, -1.0, 1.0)

    def encode(self, actions: np.ndarray) -> np.ndarray:
        """Actions ``[..., 7]`` -> bins ``[..., 7]`` (int64 in [0, 255])."""
        normalised = self.normalise(actions)
        return np.minimum(((normalised + 1.0) / 2.0 * N_BINS).astype(np.int64), N_BINS - 1)

    def decode(self, bins: np.ndarray) -> np.ndarray:
        """Bins ``[..., 7]`` -> actions ``[..., 7]`` (bin centres, un-normalised, in [-1, 1])."""
        centres = (np.asarray(bins, dtype=np.float64) + 0.5) / N_BINS * 2.0 - 1.0
        return np.clip(self.low + (centres + 1.0) / 2.0 * (self.high - self.low), -1.0, 1.0)

    def state_dict(self) -> dict[str, list[float]]:
        return {"low": self.low.tolist(), "high": self.high.tolist()}

    @classmethod
    def from_state_dict(cls, state: dict[str, list[float]]) -> ActionTokenizer:
        return cls(np.array(state["low"]), np.array(state["high"]))
