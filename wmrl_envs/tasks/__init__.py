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
(native, MLE-Dojo, MLE-bench or DSBench layouts) are listed too and shadow built-in tasks with the
same id; among several ``WMRL_TASKS_DIR`` entries the first one wins. A folder that does not load,
or a built-in suite whose optional data package is missing, blocks only itself:
:func:`scan_tasks` returns what loads and what did not, and why.

The task loader is imported on first use, which keeps it out of ``wmrl --help``. A :class:`Task`
is pure data (the task records, :mod:`wmrl_envs.task_spec`, re-exported here): its leaderboards
and rewards come from :mod:`wmrl_envs.grading`, and the suite generator is build-time code in
:mod:`wmrl_envs.tasks.build`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from wmrl_envs.errors import ConfigError, MissingExtraError, TaskNotFoundError, WMRLError
from wmrl_envs.paths import user_tasks_dirs
from wmrl_envs.task_spec import SPLITS, TASK_TYPES, Task, TaskSpec

if TYPE_CHECKING:
    from wmrl_envs.tasks.loader import LoadFailure

__all__ = [
    "LITE",
    "SPLITS",
    "SPLIT_CHOICES",
    "TASK_TYPES",
    "Task",
    "TaskScan",
    "TaskSpec",
    "build_suite",
    "get_task",
    "list_tasks",
    "load_task",
    "scan_tasks",
    "suite_selection",
]

#: The selection of fast, diverse tasks a built-in suite may declare (``assets/suites/mle.yaml``).
LITE = "lite"
#: What a ``--split`` option accepts: a split, or ``lite`` (that selection; its held-out tasks for evaluation).
SPLIT_CHOICES: tuple[str, ...] = (*SPLITS, LITE)
# How many failed folders a lookup's error names before it counts the rest.
_SHOWN_FAILURES = 3


def load_task(path: Any, *, require_leaderboard: bool = True, **overrides: Any) -> Task:
    """Load one task folder of any layout (see :func:`wmrl_envs.tasks.loader.load_task`)."""
    from wmrl_envs.tasks.loader import load_task as _load_task  # noqa: PLC0415 - keeps the loader (yaml, layouts) out of wmrl --help

    return _load_task(path, require_leaderboard=require_leaderboard, **overrides)


def build_suite(suite: str = "mle", force: bool = False, progress: bool = True) -> dict[str, dict[str, Any]]:
    """Generate a built-in suite's task folders (only stale ones unless ``force``); returns lock entries."""
    from wmrl_envs.tasks.build.suites import build_suite as _build_suite  # noqa: PLC0415 - build-time code, never imported while a suite is current

    return _build_suite(suite, force=force, progress=progress)


@dataclass(frozen=True)
class TaskScan:
    """Every task that loads, by id, and every folder or built-in suite that does not.

    Attributes:
        tasks: Built-in tasks, then user folders shadowing them (the first ``WMRL_TASKS_DIR``
            entry wins).
        failures: What did not load and why (:class:`~wmrl_envs.tasks.loader.LoadFailure`).
        missing_extras: The built-in suites among those failures that need an extra which is
            not installed, by name, with the error that names it.
    """

    tasks: Mapping[str, Task]
    failures: tuple[LoadFailure, ...]
    missing_extras: Mapping[str, MissingExtraError] = field(default_factory=dict)

    def select(self, suite: str | None = None, split: str | None = None, env_id: str | None = None,
               selection: str | None = None) -> list[Task]:
        """The tasks matching every filter given, sorted by id (see :func:`list_tasks`).

        Asking for a built-in suite that needs a missing extra raises its :class:`MissingExtraError`:
        an env, a trainer or an evaluation of that suite says what to install, not "no tasks".
        """
        if split is not None and split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        if suite in self.missing_extras:
            raise self.missing_extras[suite]
        chosen = None if selection is None else _selected(selection, suite)
        found = [
            t for t in self.tasks.values()
            if (suite is None or t.spec.suite == suite)
            and (split is None or t.spec.split == split)
            and (env_id is None or t.spec.env_id == env_id)
            and (chosen is None or (t.spec.suite, t.id) in chosen)
        ]
        return sorted(found, key=lambda t: t.id)


def scan_tasks(suite: str | None = None) -> TaskScan:
    """Load the built-in suites (only ``suite`` when given) and every ``WMRL_TASKS_DIR`` folder.

    A folder or a suite that does not load (a broken folder, a suite whose optional data package
    is missing) becomes a failure and blocks nothing else.
    """
    from wmrl_envs.tasks.builtin import load_builtin_tasks  # noqa: PLC0415 - keeps the loader (yaml, layouts) out of wmrl --help
    from wmrl_envs.tasks.loader import LoadFailure, discover_tasks  # noqa: PLC0415 - keeps the loader (yaml, layouts) out of wmrl --help
    from wmrl_envs.tasks.suite_def import builtin_suites, suite_file  # noqa: PLC0415 - keeps the loader (yaml, layouts) out of wmrl --help

    tasks: dict[str, Task] = {}
    failures: list[LoadFailure] = []
    missing_extras: dict[str, MissingExtraError] = {}
    for name in builtin_suites():
        if suite is None or name == suite:
            try:
                tasks.update((t.id, t) for t in load_builtin_tasks(name))
            except WMRLError as exc:
                failures.append(LoadFailure(str(suite_file(name)), f"built-in suite {name}", str(exc)))
                if isinstance(exc, MissingExtraError):
                    missing_extras[name] = exc
    user: dict[str, Task] = {}
    for root in user_tasks_dirs():
        for task in discover_tasks(root, failures=failures):
            user.setdefault(task.id, task)
    tasks.update(user)
    return TaskScan(tasks, tuple(failures), missing_extras)


def list_tasks(suite: str | None = None, split: str | None = None, env_id: str | None = None,
               selection: str | None = None) -> list[Task]:
    """Every available task matching the filters, sorted by id.

    ``selection`` names a subset that built-in suites declare (``"lite"``, see
    :func:`suite_selection`); the tasks keep their own split. Folders that do not load are
    skipped: :func:`scan_tasks` reports them. A built-in ``suite`` that needs a missing extra
    raises its :class:`MissingExtraError`.
    """
    return scan_tasks(suite).select(suite=suite, split=split, env_id=env_id, selection=selection)


def get_task(task_id: str) -> Task:
    """The task with this id (user folders shadow built-ins).

    An unknown id raises :class:`TaskNotFoundError` listing close matches and the folders that
    did not load (one of them may hold the task).
    """
    scan = scan_tasks()
    if task_id in scan.tasks:
        return scan.tasks[task_id]
    close = difflib.get_close_matches(task_id, scan.tasks, n=5, cutoff=0.5)
    hint = (f"; did you mean {', '.join(close)}?" if close
            else f"; {len(scan.tasks)} tasks are available (wmrl tasks list)")
    if scan.failures:
        shown = "; ".join(f"{f.path} ({f.source}: {_first_line(f.error)})" for f in scan.failures[:_SHOWN_FAILURES])
        more = len(scan.failures) - _SHOWN_FAILURES
        hint += (f". {len(scan.failures)} task folder(s) or suite(s) did not load and may hold it: {shown}"
                 + (f"; and {more} more" if more > 0 else "") + " (wmrl tasks list shows why)")
    raise TaskNotFoundError(f"no task with id {task_id!r}{hint}")


def suite_selection(suite: str, name: str) -> dict[str, tuple[str, ...]]:
    """The task ids, by split, of a selection a built-in suite declares (its ``selections:``)."""
    from wmrl_envs.tasks.suite_def import load_suite_def  # noqa: PLC0415 - keeps the loader (yaml, layouts) out of wmrl --help

    selections = load_suite_def(suite).selections
    if name not in selections:
        raise ConfigError(f"the {suite} suite declares no selection {name!r} (it declares {sorted(selections)})")
    return dict(selections[name])


def _selected(name: str, suite: str | None) -> set[tuple[str, str]]:
    """``(suite, id)`` of every task in the named selection of ``suite`` (or of every built-in suite)."""
    from wmrl_envs.tasks.suite_def import builtin_suites, load_suite_def  # noqa: PLC0415 - keeps the loader (yaml, layouts) out of wmrl --help

    suites = [suite] if suite is not None else builtin_suites()
    declaring = [s for s in suites if s in builtin_suites() and name in load_suite_def(s).selections]
    if not declaring:
        raise ConfigError(f"no built-in suite among {suites} declares a selection {name!r}")
    return {(s, i) for s in declaring for ids in suite_selection(s, name).values() for i in ids}


def _first_line(text: str, limit: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else f"{line[:limit - 3]}..."
