"""Tasks: the task format, the built-in suites and the registry of every available task.

::

    from wmrl_envs.grading import task_leaderboards, task_reward
    from wmrl_envs.tasks import get_task, list_tasks

    train_tasks = list_tasks(suite="mle", split="train")
    task = get_task("credit-scoring")
    task.description, task.public_dir, task.answers(), task_leaderboards(task)[0]
    reward, details = task_reward(task, raw_score=0.81)

Built-in suites (``assets/suites/*.yaml``) are generated into ``$WMRL_HOME/tasks/<suite>`` on
first use and regenerated when their suite file changes. Task folders under ``WMRL_TASKS_DIR``
(native, MLE-Dojo or MLE-bench layouts) are listed too and shadow built-in tasks with the same id;
among several ``WMRL_TASKS_DIR`` entries the first one wins.

Nothing heavy is imported here. A :class:`Task` is pure data: its leaderboards and rewards come
from :mod:`wmrl_envs.grading`, and the suite generator is build-time code in
:mod:`wmrl_envs.tasks.build`.
"""

from __future__ import annotations

import difflib
from typing import Any

from wmrl_envs.errors import TaskNotFoundError
from wmrl_envs.paths import user_tasks_dirs
from wmrl_envs.tasks.spec import SPLITS, TASK_TYPES, Task, TaskSpec

__all__ = [
    "SPLITS",
    "TASK_TYPES",
    "Task",
    "TaskSpec",
    "build_suite",
    "get_task",
    "list_tasks",
    "load_task",
]


def load_task(path: Any, *, require_leaderboard: bool = True, **overrides: Any) -> Task:
    """Load one task folder of any layout (see :func:`wmrl_envs.tasks.loader.load_task`)."""
    from wmrl_envs.tasks.loader import load_task as _load_task

    return _load_task(path, require_leaderboard=require_leaderboard, **overrides)


def build_suite(suite: str = "mle", force: bool = False, progress: bool = True) -> dict[str, dict[str, Any]]:
    """Generate a built-in suite's task folders (only stale ones unless ``force``); returns lock entries."""
    from wmrl_envs.tasks.build.suites import build_suite as _build_suite

    return _build_suite(suite, force=force, progress=progress)


def _all_tasks(suite: str | None) -> dict[str, Task]:
    """Every task by id: built-ins first, then user folders shadowing them (first folder wins)."""
    from wmrl_envs.tasks.builtin import load_builtin_tasks
    from wmrl_envs.tasks.loader import discover_tasks
    from wmrl_envs.tasks.suite_def import builtin_suites

    tasks: dict[str, Task] = {}
    for name in builtin_suites():
        if suite is None or name == suite:
            tasks.update((t.id, t) for t in load_builtin_tasks(name))
    user: dict[str, Task] = {}
    for root in user_tasks_dirs():
        for task in discover_tasks(root):
            user.setdefault(task.id, task)
    tasks.update(user)
    return tasks


def list_tasks(suite: str | None = None, split: str | None = None, env_id: str | None = None) -> list[Task]:
    """Every available task matching the filters, sorted by id."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    selected = [
        t for t in _all_tasks(suite).values()
        if (suite is None or t.spec.suite == suite)
        and (split is None or t.spec.split == split)
        and (env_id is None or t.spec.env_id == env_id)
    ]
    return sorted(selected, key=lambda t: t.id)


def get_task(task_id: str) -> Task:
    """The task with this id (user folders shadow built-ins); unknown ids list close matches."""
    tasks = _all_tasks(None)
    if task_id in tasks:
        return tasks[task_id]
    close = difflib.get_close_matches(task_id, tasks, n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; {len(tasks)} tasks are available (wmrl tasks list)"
    raise TaskNotFoundError(f"no task with id {task_id!r}{hint}")
