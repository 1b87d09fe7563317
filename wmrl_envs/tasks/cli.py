"""``wmrl tasks ...``: build, list and inspect tasks.

::

    wmrl tasks build [--suite mle] [--force] [--write-lock]
    wmrl tasks list [--suite mle] [--split heldout] [--json]
    wmrl tasks show ID_OR_PATH
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from wmrl_envs.tasks.spec import SPLITS, Task


def add_tasks_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``tasks`` command (and its subcommands) on an argparse subparsers object."""
    tasks = subparsers.add_parser("tasks", help="build, list and inspect tasks")
    sub = tasks.add_subparsers(dest="tasks_command", required=True)

    build = sub.add_parser("build", help="generate a built-in suite's task folders")
    build.add_argument("--suite", default="mle", help="built-in suite (default: %(default)s)")
    build.add_argument("--force", action="store_true", help="regenerate every task, not only stale ones")
    build.add_argument("--write-lock", action="store_true",
                       help="record the generated files' hashes in assets/suites/<suite>.lock.json")
    build.set_defaults(func=cmd_build)

    listing = sub.add_parser("list", help="list available tasks (built-in and WMRL_TASKS_DIR)")
    listing.add_argument("--suite", default=None, help="only this suite")
    listing.add_argument("--split", default=None, choices=SPLITS, help="only this split")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    listing.set_defaults(func=cmd_list)

    show = sub.add_parser("show", help="show one task's spec, files and description")
    show.add_argument("task", help="a task id, or the path of a task folder")
    show.set_defaults(func=cmd_show)
    return tasks


def task_summary(task: Task) -> dict[str, Any]:
    """The facts ``tasks list --json`` prints for one task."""
    # Imported here: grading loads pandas, and the parser of every `wmrl` command imports this module.
    from wmrl_envs.grading import task_leaderboards

    spec = task.spec
    leaderboard_size = len(task_leaderboards(task)[0]) if task.leaderboard_path is not None else 0
    return {
        "id": spec.id,
        "env": spec.env_id,
        "suite": spec.suite,
        "split": spec.split,
        "task_type": spec.task_type,
        "metric": spec.metric,
        "leaderboard_size": leaderboard_size,
        "n_train": spec.meta.get("n_train"),
        "n_test": spec.meta.get("n_test"),
        "layout": task.layout,
        "path": str(task.root),
    }


def cmd_build(args: argparse.Namespace) -> int:
    from wmrl_envs.paths import builtin_tasks_dir
    from wmrl_envs.tasks.build.lock import write_lock
    from wmrl_envs.tasks.build.suites import build_suite

    entries = build_suite(args.suite, force=args.force, progress=True)
    print(f"{len(entries)} tasks in {builtin_tasks_dir(args.suite)}")
    if args.write_lock:
        print(f"wrote {write_lock(args.suite, entries)}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from wmrl_envs.tasks import list_tasks

    rows = [task_summary(t) for t in list_tasks(suite=args.suite, split=args.split)]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    columns = ("id", "suite", "split", "task_type", "metric", "n_train", "n_test", "leaderboard_size")
    table = [columns] + [tuple(str(row[c]) for c in columns) for row in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(columns))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    print(f"{len(rows)} task(s)")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from wmrl_envs.tasks import get_task, load_task

    path = Path(args.task).expanduser()
    task = load_task(path) if path.is_dir() else get_task(args.task)
    print(json.dumps(task_summary(task), indent=1))
    print(f"description: {task.description_path}\npublic: {task.public_dir}\n"
          f"sample submission: {task.sample_submission_path}\nanswers: {task.answers_path}\n"
          f"leaderboards: {', '.join(str(p) for p in task.leaderboard_paths) or '-'}\n")
    print(task.description)
    return 0
