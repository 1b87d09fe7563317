"""The scale bench's task generator writes a native task that loads, at the sizes asked, and reuses it."""

from __future__ import annotations

import pandas as pd

from bench.sample_run_scale import CLASSES, scale_task
from wmrl_envs.grading.grader import grade_file
from wmrl_envs.grading.reward import task_reward


def test_the_generated_task_loads_with_its_sizes_and_board(tmp_path):
    task, built_s = scale_task(1_500, 400, seed=3, root=tmp_path)
    assert built_s > 0 and task.layout == "native" and task.spec.metric == "roc_auc"
    train, test = pd.read_csv(task.public_dir / "train.csv"), pd.read_csv(task.public_dir / "test.csv")
    answers = task.answers()
    assert (len(train), len(test), len(answers)) == (1_500, 400, 400)
    assert "target" not in test and set(train["target"]) == set(CLASSES)
    assert set(answers["id"]) == set(test["id"]) and not set(test["id"]) & set(train["id"])
    board = pd.read_csv(task.leaderboard_path)
    assert len(board) == 50 and board["score"].is_monotonic_decreasing and board["score"].nunique() > 30
    # The sample submission (the prior) is a valid, uninformative submission: AUC 1/2, last on the board.
    raw = grade_file(task.sample_submission_path, answers, task.spec)
    assert raw == 0.5 and task_reward(task, raw)[0] < 0.1
    again, rebuilt_s = scale_task(1_500, 400, seed=3, root=tmp_path)
    assert rebuilt_s == 0.0 and again.root == task.root
