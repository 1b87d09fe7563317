"""A task's reward from its raw metric value: leaderboard position score or DSBench RPG.

The task (:class:`~wmrl_envs.tasks.spec.Task`) is pure data: it knows where its leaderboards
lie, and this module reads them in its metric's direction and turns a raw score into the
reward quantity every reward source returns (see docs/architecture.md, "Grading").
"""

from __future__ import annotations

from typing import Any

from wmrl_envs.errors import TaskFormatError
from wmrl_envs.grading.leaderboard import Leaderboard
from wmrl_envs.grading.metrics import get_metric
from wmrl_envs.grading.rpg import relative_performance_gap
from wmrl_envs.tasks.spec import Task


def task_leaderboards(task: Task) -> list[Leaderboard]:
    """Every leaderboard of the task, primary first, ordered by its metric's direction.

    Raises :class:`TaskFormatError` when the task has none (RPG-scored tasks, or a built-in
    suite whose leaderboards are still being generated).
    """
    if not task.leaderboard_paths:
        raise TaskFormatError(f"task {task.id}: has no leaderboard ({task.root})")
    higher_is_better = get_metric(task.spec.metric).higher_is_better
    return [Leaderboard.from_csv(path, higher_is_better) for path in task.leaderboard_paths]


def task_reward(task: Task, raw_score: float | None) -> tuple[float, dict[str, Any]]:
    """The task's reward for a raw metric value, and the details to report.

    Tasks whose spec carries ``meta["reward"] == "rpg"`` get DSBench's relative performance gap
    against the ``g`` and ``b`` recorded in ``meta`` (details ``{"rpg": ...}``). Every other task
    gets the MLE-Dojo position score averaged over all of its leaderboards (public and private),
    with the primary board's position, medal and above-median as details.
    """
    metric = get_metric(task.spec.metric)
    meta = task.spec.meta
    if meta.get("reward") == "rpg":
        rpg = float(relative_performance_gap(raw_score, meta["rpg_perfect"], meta["rpg_baseline"],
                                             metric.higher_is_better))
        return rpg, {"rpg": rpg}
    boards = task_leaderboards(task)
    report = boards[0].report(raw_score)
    report["position_score"] = sum(board.position_score(raw_score) for board in boards) / len(boards)
    return float(report["position_score"]), report
