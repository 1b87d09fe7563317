"""What executing a script would cost, before it runs: predicted CPU-seconds (issue 46).

Anchors chosen by information alone tend to be the expensive ones: the scripts a world model is
least sure of are the unusual ones, large ensembles and text pipelines among them. An informed
schedule that also knows the price of each group (``anchor_choice="informed_per_cost"``) can
buy the same information for less.

The model is a ridge regression of ``log(CPU-seconds)`` of a full run in the sandbox on the
static features of :mod:`wmrl_envs.analysis.code_features` (the script's model families,
capacity keywords, text vectorisers, loops; the task's rows, columns and type), fitted on
executions of the train split's scripts by ``scripts/build_execution_cost.py``. It is
deterministic: the same script on the same task always gets the same price, so a schedule that
reads it decides the same way on every machine (measured CPU-seconds would not). Only the
ratios between groups matter to a schedule, so a machine that is uniformly faster or slower
than the one that measured it changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_envs.analysis.code_features import FEATURE_NAMES, analyse_script, feature_vector
from wmrl_envs.errors import ConfigError
from wmrl_envs.paths import assets_dir
from wmrl_envs.task_spec import Task
from wmrl_envs.world_models.artefacts import read_artefact, write_artefact

COST_FORMAT = 1
#: The shipped model's file name under ``assets/world_models/``.
COST_FILE = "execution_cost.json"


def default_cost_path() -> Path:
    return assets_dir() / "world_models" / COST_FILE


@dataclass(frozen=True)
class ExecutionCostModel:
    """``log(cpu_s) = intercept + sum_j weights[j] * (x_j - mean[j]) / scale[j]`` over ``features``.

    Attributes:
        features: The names of the features read, a subset of
            :data:`~wmrl_envs.analysis.code_features.FEATURE_NAMES`, in order.
        mean, scale: Each feature's standardisation (a constant feature has scale 1).
        weights: Each standardised feature's coefficient.
        intercept: The log CPU-seconds of an average script.
        residual_sd: The standard deviation of the log residuals on held-out tasks (its
            uncertainty: ``exp(residual_sd)`` is a typical factor of error).
        measured: How and where it was fitted and measured (free-form, for the record).
    """

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    intercept: float
    residual_sd: float = math.nan
    measured: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("features", "mean", "scale", "weights"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        n = len(self.features)
        if not n or any(len(getattr(self, name)) != n for name in ("mean", "scale", "weights")):
            raise ConfigError("an execution-cost model needs features, mean, scale and weights of one length (> 0)")
        unknown = set(self.features) - set(FEATURE_NAMES)
        if unknown:
            raise ConfigError(f"execution-cost model reads features this version lacks: {sorted(unknown)}")
        if not all(math.isfinite(v) for v in (*self.mean, *self.weights, self.intercept)) or min(self.scale) <= 0:
            raise ConfigError("an execution-cost model's numbers must be finite, its scales > 0")

    @classmethod
    def load(cls, path: str | Path | None = None) -> ExecutionCostModel:
        path = Path(path) if path is not None else default_cost_path()
        return cls(**read_artefact(path, "execution-cost model", COST_FORMAT, "scripts/build_execution_cost.py"))

    def save(self, path: str | Path) -> Path:
        fields = {k: getattr(self, k) for k in self.__dataclass_fields__}
        fields.update({k: list(fields[k]) for k in ("features", "mean", "scale", "weights")})
        return write_artefact(Path(path), COST_FORMAT, fields)

    def predict_log(self, rows: np.ndarray) -> np.ndarray:
        """Log CPU-seconds of each row of ``rows`` (``[n, len(features)]``, raw feature values)."""
        x = (np.asarray(rows, dtype=float) - np.asarray(self.mean)) / np.asarray(self.scale)
        return self.intercept + x @ np.asarray(self.weights)

    def predict(self, tasks: Sequence[Task], scripts: Sequence[str]) -> np.ndarray:
        """Predicted CPU-seconds of a full run of each ``(tasks[i], scripts[i])`` in the sandbox."""
        if not scripts:
            return np.zeros(0)
        index = [FEATURE_NAMES.index(name) for name in self.features]
        return np.exp(self.predict_log(feature_rows(tasks, scripts)[:, index]))


def feature_rows(tasks: Sequence[Task], scripts: Sequence[str]) -> np.ndarray:
    """``[n, len(FEATURE_NAMES)]``: the static features of each ``(tasks[i], scripts[i])``."""
    if len(tasks) != len(scripts):
        raise ConfigError(f"{len(tasks)} tasks but {len(scripts)} scripts")
    return np.array([feature_vector(task, analyse_script(script)) for task, script in zip(tasks, scripts)],
                    dtype=float).reshape(len(scripts), len(FEATURE_NAMES))
