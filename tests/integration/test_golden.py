"""Golden tests over every built-in task (MLE-bench style).

For each task of the ``mle`` suite: the answers graded against themselves reach the metric's
best value, take first place (position score 1.0) and gold on the task's leaderboard; the
sample submission scores what ``assets/suites/mle.lock.json`` recorded (up to ``SCORE_RTOL``);
the leaderboard holds at least 50 reference solutions; and the private answers are outside the
public folder.

The suite comes from the default cache (``$WMRL_HOME/tasks/mle``), built on first use.
"""

from __future__ import annotations

from importlib.metadata import version as package_version

import pytest

from wmrl_envs.grading import get_metric, grade, perfect_submission, read_submission, task_leaderboards
from wmrl_envs.paths import leaderboards_dir
from wmrl_envs.tasks import list_tasks
from wmrl_envs.tasks.build.lock import SCORE_RTOL, read_lock
from wmrl_envs.tasks.suite_def import DATA_PACKAGES, load_suite_def

TASK_IDS = [t.id for t in load_suite_def("mle").tasks]


@pytest.fixture(scope="module")
def lock():
    """The lock's per-task entries, or None when it was written with other data package versions."""
    locked = read_lock("mle")
    same = all(locked["packages"].get(p) == package_version(p) for p in DATA_PACKAGES)
    return locked["tasks"] if same else None


@pytest.fixture(scope="module")
def tasks():
    return {t.id: t for t in list_tasks(suite="mle")}


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_builtin_task_is_golden(task_id, lock, tasks):
    task = tasks[task_id]
    spec, metric = task.spec, get_metric(task.spec.metric)
    answers = task.answers()

    perfect = grade(perfect_submission(answers, spec), answers, spec)
    assert perfect == pytest.approx(metric.ideal, abs=1e-9)
    board = task_leaderboards(task)[0]
    assert board.n >= 50
    assert board.position_score(perfect) == 1.0
    assert board.medal(perfect) == "gold"
    assert task.leaderboard_path == leaderboards_dir() / "mle" / f"{task_id}.csv"

    sample = grade(read_submission(task.sample_submission_path), answers, spec)
    if lock is not None:  # other pandas/numpy versions may write other bytes (test_tasks skips too)
        # Recomputed here, recorded on another machine: equal up to float noise, not bit for bit.
        assert sample == pytest.approx(lock[task_id]["sample_submission_score"], rel=SCORE_RTOL, abs=0)

    public = task.public_dir.resolve()
    assert not task.answers_path.resolve().is_relative_to(public)
    assert not any(p.name == "answers.csv" for p in public.rglob("*"))
