"""The world-model metrics the fidelity and out-of-sample benches share, and their bootstrap.

Each metric is a pure function of arrays, one entry per script: what really happened (status,
exception class, reward) against what the world model said (status, exception class, P(valid),
reward, whether it proved the outcome). Scores are compared within a task where a trainer
compares them: GRPO ranks the scripts of one group, and a group is one task.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.stats import spearmanr

from wmrl_envs import outcome

N_BINS = 10


def ece(p: np.ndarray, y: np.ndarray, bins: int = N_BINS) -> float:
    """Expected calibration error of probabilities ``p`` for outcomes ``y`` (equal-width bins)."""
    edges = np.linspace(0, 1, bins + 1)
    which = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    return float(sum(abs(p[which == b].mean() - y[which == b].mean()) * (which == b).sum()
                     for b in range(bins) if (which == b).any()) / len(p))


def pairwise_accuracy(score: np.ndarray, real: np.ndarray, tasks: np.ndarray) -> float:
    """Share of same-task pairs with different real scores that the prediction orders the same way
    (a tied prediction counts half)."""
    right = total = 0.0
    for task in np.unique(tasks):
        s, r = score[tasks == task], real[tasks == task]
        ds, dr = s[:, None] - s[None, :], r[:, None] - r[None, :]
        pairs = dr > 0
        right += float((ds[pairs] > 0).sum() + 0.5 * (ds[pairs] == 0).sum())
        total += float(pairs.sum())
    return right / total if total else float("nan")


def spearman(score: np.ndarray, real: np.ndarray) -> float:
    """Spearman's rho (ties ranked by their mean); NaN under 3 scripts or when ``real`` is constant,
    and 0 when only the prediction is constant: it ranks nothing."""
    if len(real) < 3 or np.ptp(real) == 0:
        return float("nan")
    if np.ptp(score) == 0:
        return 0.0
    return float(spearmanr(score, real).statistic)


def mean_within_task_spearman(score: np.ndarray, real: np.ndarray, tasks: np.ndarray, min_scripts: int = 2) -> float:
    """Mean over tasks of Spearman's rho between predicted and real scores of the task's scripts.

    A task counts once it has ``min_scripts`` scripts with differing real scores (two scripts give
    +1 or -1: the pair is ordered right or wrong); a constant prediction counts 0. NaN when no
    task counts.
    """
    rhos = []
    for task in np.unique(tasks):
        s, r = score[tasks == task], real[tasks == task]
        if len(r) < min_scripts or np.ptp(r) == 0:
            continue
        rhos.append(0.0 if np.ptp(s) == 0 else float(spearmanr(s, r).statistic))
    return float(np.mean(rhos)) if rhos else float("nan")


def failure_recall(pred_status: np.ndarray, real_status: np.ndarray) -> float:
    """Share of the scripts that really failed (any status but ``valid``) that the world model
    predicted to fail, whatever way; NaN without failures."""
    failed = real_status != outcome.VALID
    return float(np.mean(pred_status[failed] != outcome.VALID)) if failed.any() else float("nan")


def raised(real_exception: np.ndarray) -> np.ndarray:
    """Which scripts really raised an exception (a non-empty class name)."""
    return np.array([isinstance(e, str) and e != "" for e in real_exception], dtype=bool)


def exception_match(pred_exception: np.ndarray, real_exception: np.ndarray) -> float:
    """Share of the scripts that really raised whose predicted exception class is the one raised;
    NaN when none raised."""
    mask = raised(real_exception)
    return float(np.mean(pred_exception[mask] == real_exception[mask])) if mask.any() else float("nan")


def failing_above_median(pred_score: np.ndarray, real_status: np.ndarray, real_reward: np.ndarray,
                         tasks: np.ndarray, reference: np.ndarray | None = None) -> tuple[int, int]:
    """Failing scripts the world model rewards above the median reward of their task's valid scripts.

    The median is of ``reference`` (default: the valid scripts' real rewards; pass the world model's
    own rewards to compare within what a GRPO group sees). Returns ``(count, failing scripts on a
    task with at least one valid script)``.
    """
    reference = real_reward if reference is None else reference
    valid = real_status == outcome.VALID
    count = eligible = 0
    for task in np.unique(tasks):
        here = tasks == task
        if not (here & valid).any():
            continue
        median = float(np.median(reference[here & valid]))
        failing = here & ~valid
        eligible += int(failing.sum())
        count += int((pred_score[failing] > median).sum())
    return count, eligible


def false_proofs(proved: np.ndarray, pred_status: np.ndarray, pred_exception: np.ndarray,
                 real_status: np.ndarray, real_exception: np.ndarray) -> int:
    """Proved outcomes that did not happen: another status, or another exception class."""
    pred_exc = np.array([e or "" for e in pred_exception], dtype=object)
    real_exc = np.array([e if isinstance(e, str) else "" for e in real_exception], dtype=object)
    wrong = (pred_status != real_status) | (pred_exc != real_exc)
    return int((proved & wrong).sum())


def bootstrap(statistic: Callable[[np.ndarray], float], n: int, resamples: int, seed: int) -> dict[str, float | int]:
    """``statistic`` on all ``n`` rows and its percentile 95% interval over ``resamples`` bootstrap
    resamples of the rows (``statistic`` takes the row indices of a resample, drawn with
    replacement from all ``n``: a within-task statistic sees the tasks as the resample has them).

    A resample where the statistic is undefined (NaN: too few scripts of a kind left) is left out
    of the interval and counted in ``undefined``.
    """
    rng = np.random.default_rng(seed)
    point = statistic(np.arange(n))
    values = np.array([statistic(rng.integers(0, n, n)) for _ in range(resamples)], dtype=float)
    defined = values[np.isfinite(values)]
    lo, hi = np.percentile(defined, [2.5, 97.5]) if defined.size else (np.nan, np.nan)
    return {"value": float(point), "lo": float(lo), "hi": float(hi), "undefined": int(values.size - defined.size)}
