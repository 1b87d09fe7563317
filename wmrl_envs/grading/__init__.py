"""Grading: metrics, submission validation, leaderboard position score, medals, RPG and task rewards."""

from wmrl_envs.grading.grader import (
    best_possible,
    grade,
    grade_file,
    perfect_submission,
    read_submission,
    submission_cap,
    validate_submission,
)
from wmrl_envs.grading.leaderboard import Leaderboard, medal_ranks
from wmrl_envs.grading.metrics import METRICS, Metric, UnknownMetricError, get_metric
from wmrl_envs.grading.reward import task_leaderboards, task_reward
from wmrl_envs.grading.rpg import mean_rpg, relative_performance_gap

__all__ = [
    "METRICS",
    "Leaderboard",
    "Metric",
    "UnknownMetricError",
    "best_possible",
    "get_metric",
    "grade",
    "grade_file",
    "mean_rpg",
    "medal_ranks",
    "perfect_submission",
    "read_submission",
    "relative_performance_gap",
    "submission_cap",
    "task_leaderboards",
    "task_reward",
    "validate_submission",
]
