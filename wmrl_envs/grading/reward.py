"""A task's reward from its raw metric value: leaderboard position score or DSBench RPG.

The task (:class:`~wmrl_envs.task_spec.Task`) is pure data: it knows where its leaderboards
lie, and this module reads them in its metric's direction and turns a raw score into the
reward quantity every reward source returns (see docs/architecture.md, "Grading").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wmrl_envs.errors import TaskFormatError
from wmrl_envs.grading.conventions import conventions
from wmrl_envs.grading.leaderboard import Leaderboard
from wmrl_envs.grading.metrics import get_metric
from wmrl_envs.grading.rpg import relative_performance_gap
from wmrl_envs.task_spec import Task


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
    against the ``g`` and ``b`` recorded in ``meta``; the details name the ``b`` used and where
    it came from (``rpg_baseline_source``). Every other task gets the MLE-Dojo position score
    averaged over all of its leaderboards (public and private), with the primary board's
    position, medal and above-median as details, plus ``ranked_score``: the score the boards
    ranked, which is the raw score rounded when the task's ``score_decimals`` convention says so
    (MLE-bench rounds to 5 decimals before ranking).
    """
    metric = get_metric(task.spec.metric)
    meta = task.spec.meta
    if meta.get("reward") == "rpg":
        g, b = meta["rpg_perfect"], meta["rpg_baseline"]
        rpg = float(relative_performance_gap(raw_score, g, b, metric.higher_is_better))
        return rpg, {"rpg": rpg, "rpg_perfect": g, "rpg_baseline": b, "rpg_baseline_source": baseline_source(meta)}
    decimals = conventions(task.spec).score_decimals
    ranked = raw_score if raw_score is None or decimals is None else round(float(raw_score), decimals)
    boards = task_leaderboards(task)
    report = boards[0].report(ranked)
    report["position_score"] = sum(board.position_score(ranked) for board in boards) / len(boards)
    report["ranked_score"] = ranked
    return float(report["position_score"]), report


def baseline_source(meta: Mapping[str, Any]) -> str:
    """Which ``b`` an RPG-scored task uses: ``meta.rpg_baseline_source``, else the name of the
    WMRL trivial baseline the built-in generator recorded."""
    if "rpg_baseline_source" in meta:
        return str(meta["rpg_baseline_source"])
    if "rpg_baseline_name" in meta:
        return f"WMRL trivial baseline ({meta['rpg_baseline_name']})"
    return "recorded in meta.rpg_baseline"
