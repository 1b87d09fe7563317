"""Build-time: fit the execution-cost model on measured runs of train-split scripts.

``scripts/build_execution_cost.py`` executes the corpora's train-split scripts in the sandbox and
hands the features and CPU-seconds here. :func:`fit_cost_model` fits a ridge regression of
``log(cpu_s)`` on the standardised features, its penalty chosen by task-grouped cross-validation
(a price must hold on tasks the fit has not seen), and records in ``measured`` what the chosen
penalty gives out of fold: the RMSE of the log (``residual_sd``), the Spearman correlation of
predicted and measured CPU-seconds pooled and within task, and the same for the price of a group
of ``GROUP_SIZE`` scripts of one task, which is what a schedule compares.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from wmrl_envs.errors import ConfigError
from wmrl_envs.world_models.execution_cost import ExecutionCostModel

ALPHAS = (0.1, 1.0, 10.0, 100.0, 1000.0)
FOLDS = 5
#: The group size a group's price is measured at (the trainer's default).
GROUP_SIZE = 4


def ridge(x: np.ndarray, y: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """``(mean, scale, weights, intercept)`` of a ridge fit of ``y`` on standardised ``x``."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)
    z = (x - mean) / scale
    intercept = float(y.mean())
    weights = np.linalg.solve(z.T @ z + alpha * np.eye(z.shape[1]), z.T @ (y - intercept))
    return mean, scale, weights, intercept


def task_folds(tasks: Sequence[str], folds: int = FOLDS, seed: int = 0) -> np.ndarray:
    """Each row's fold, every task's rows in one fold (tasks shuffled by ``seed``, dealt in turn)."""
    names = sorted(set(tasks))
    if len(names) < folds:
        raise ConfigError(f"task-grouped cross-validation needs at least {folds} tasks, got {len(names)}")
    order = np.random.default_rng(seed).permutation(len(names))
    fold_of = {names[i]: k % folds for k, i in enumerate(order)}
    return np.array([fold_of[t] for t in tasks])


def out_of_fold(x: np.ndarray, y: np.ndarray, folds: np.ndarray, alpha: float) -> np.ndarray:
    """Each row's prediction by the fit without its fold."""
    pred = np.empty_like(y)
    for k in np.unique(folds):
        held = folds == k
        mean, scale, weights, intercept = ridge(x[~held], y[~held], alpha)
        pred[held] = intercept + ((x[held] - mean) / scale) @ weights
    return pred


def task_groups(tasks: Sequence[str], size: int = GROUP_SIZE, seed: int = 0) -> list[list[int]]:
    """Rows dealt into groups of ``size`` scripts of one task (a task's leftover rows are dropped)."""
    rng = np.random.default_rng(seed)
    groups = []
    for task in sorted(set(tasks)):
        rows = rng.permutation(np.flatnonzero(np.asarray(tasks) == task))
        groups += [rows[i:i + size].tolist() for i in range(0, len(rows) - size + 1, size)]
    return groups


def fit_cost_model(x: np.ndarray, cpu_s: np.ndarray, tasks: Sequence[str], features: Sequence[str],
                   provenance: dict[str, Any] | None = None) -> ExecutionCostModel:
    """The cost model of measured runs: features ``x`` (``[n, len(features)]``), CPU-seconds ``cpu_s``
    (> 0) and each row's task; the penalty from :data:`ALPHAS` with the lowest out-of-fold RMSE."""
    x, cpu_s = np.asarray(x, dtype=float), np.asarray(cpu_s, dtype=float)
    if x.shape != (len(cpu_s), len(features)) or len(tasks) != len(cpu_s):
        raise ConfigError("fit_cost_model needs one feature row, one CPU time and one task per run")
    if np.any(~np.isfinite(cpu_s) | (cpu_s <= 0)) or not np.all(np.isfinite(x)):
        raise ConfigError("fit_cost_model needs finite features and CPU-seconds > 0")
    y = np.log(cpu_s)
    folds = task_folds(tasks)
    rmse = {alpha: round(float(np.sqrt(np.mean((out_of_fold(x, y, folds, alpha) - y) ** 2))), 4) for alpha in ALPHAS}
    alpha = min(ALPHAS, key=lambda a: (rmse[a], -a))  # on a tie, the stronger penalty
    oof = out_of_fold(x, y, folds, alpha)
    within = [spearmanr(oof[rows], y[rows])[0] for task in sorted(set(tasks))
              if len(rows := np.flatnonzero(np.asarray(tasks) == task)) >= 3 and np.ptp(y[rows]) > 0]
    groups = task_groups(tasks)
    price = lambda values: [float(np.sum(np.exp(values[g]))) for g in groups]  # noqa: E731
    mean, scale, weights, intercept = ridge(x, y, alpha)
    measured = {
        "rows": len(y), "tasks": len(set(tasks)), "alpha": alpha, "cv_rmse_log_by_alpha": {f"{a:g}": v for a, v in rmse.items()}, "folds": FOLDS,
        "cv_spearman": round(float(spearmanr(oof, y)[0]), 4),
        "cv_spearman_within_task_mean": round(float(np.nanmean(within)), 4) if within else None,
        "cv_group_spearman": round(float(spearmanr(price(oof), price(y))[0]), 4) if len(groups) > 2 else None,
        "groups": len(groups), "group_size": GROUP_SIZE,
        "cpu_s_quantiles": {f"{q:g}": round(float(np.quantile(cpu_s, q)), 4) for q in (0.05, 0.5, 0.95)},
        **(provenance or {}),
    }
    return ExecutionCostModel(features=tuple(features), mean=tuple(mean.tolist()), scale=tuple(scale.tolist()),
                              weights=tuple(weights.tolist()), intercept=intercept,
                              residual_sd=round(rmse[alpha], 4), measured=measured)
