"""The built-in task suites at runtime: find them, load their tasks, generate them on first use.

Built-in suites (``assets/suites/*.yaml``, parsed by :mod:`wmrl_envs.tasks.suite_def`) are
generated into :func:`wmrl_envs.paths.builtin_tasks_dir` the first time they are needed and
whenever their suite file or the generator changed; the generator itself is build-time code in
:mod:`wmrl_envs.tasks.build.suites`, imported only then.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from wmrl_envs.paths import builtin_tasks_dir, leaderboards_dir
from wmrl_envs.task_spec import Task
from wmrl_envs.tasks.loader import load_task
from wmrl_envs.tasks.suite_def import SUITE_MARKER, load_suite_def, read_marker


def suite_is_current(suite: str = "mle") -> bool:
    """Whether the generated suite matches its suite file (a cheap check of one marker)."""
    return read_marker(builtin_tasks_dir(suite) / SUITE_MARKER).get("digest") == load_suite_def(suite).digest


def ensure_suite(suite: str = "mle", progress: bool = False) -> Path:
    """Build the suite on first use or when its suite file changed; returns its folder."""
    if not suite_is_current(suite):
        # Imported here: the generator (pandas, the data packages) is build-time code, needed
        # only when a suite is missing or stale.
        from wmrl_envs.tasks.build.suites import build_suite  # noqa: PLC0415 - build-time code (see above)

        build_suite(suite, progress=progress)
    return builtin_tasks_dir(suite)


def load_builtin_tasks(suite: str = "mle", *, require_leaderboard: bool = True) -> list[Task]:
    """The suite's tasks, in suite-file order (building them first if needed).

    Loaded tasks are cached until the suite is rebuilt: environments look tasks up on every reset.
    """
    root = ensure_suite(suite)
    stamp = (root / SUITE_MARKER).stat().st_mtime_ns
    return list(_load_tasks(suite, root, stamp, str(leaderboards_dir()), require_leaderboard))


@lru_cache(maxsize=8)
def _load_tasks(suite: str, root: Path, stamp: int, boards: str, require_leaderboard: bool) -> tuple[Task, ...]:
    return tuple(load_task(root / t.id, require_leaderboard=require_leaderboard) for t in load_suite_def(suite).tasks)
