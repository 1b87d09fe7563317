"""What a calibrator accepts as scores and labels; anything else raises :class:`CalibrationDataError`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from wmrl_envs.errors import CalibrationDataError

ArrayLike = Sequence[float] | np.ndarray
TaskIds = Sequence[str | None] | str | None


def as_scores(values: ArrayLike, name: str) -> np.ndarray:
    """``values`` as a one-dimensional float array; every score must be finite."""
    array = np.atleast_1d(np.asarray(values, dtype=float))
    require_data(array.ndim == 1, f"{name} must be one-dimensional, got shape {array.shape}")
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        raise CalibrationDataError(f"{name} must be finite; index {bad[0]} is {array[bad[0]]}")
    return array


def as_tasks(task_ids: TaskIds, n: int, name: str = "task_ids") -> np.ndarray:
    """One label (str or None) per score, from per-score labels, one label or None."""
    tasks = np.empty(n, dtype=object)
    # A lone string is one id for every score; iterating it would split it into letters.
    if task_ids is None or isinstance(task_ids, str):
        tasks[:] = task_ids
        return tasks
    require_data(len(task_ids) == n, f"{name} has {len(task_ids)} entries for {n} scores")
    require_data(all(t is None or isinstance(t, str) for t in task_ids), f"{name} must be strings or None")
    tasks[:] = list(task_ids)
    return tasks


def require_data(condition: bool, message: str) -> None:
    """Raise :class:`CalibrationDataError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise CalibrationDataError(message)
