"""``wmrl tasks ...`` (build, list and inspect tasks) and ``wmrl grade`` (grade one submission).

::

    wmrl tasks build [--suite mle] [--force] [--write-lock]
    wmrl tasks list [--suite mle] [--split heldout|train|lite] [--json] [--strict]
    wmrl tasks show ID_OR_PATH
    wmrl grade --task ID_OR_PATH SUBMISSION.csv [--json]

``tasks list`` prints the tasks that load; each task folder or built-in suite that does not load
is reported after the table on stderr, and with ``--json`` as one more line per failure,
``{"load_error": ..., "path": ..., "source": ...}`` (task lines carry an ``"id"`` instead). The
exit status is 0 unless ``--strict`` is given and something did not load (then 2).

``grade`` is MLE-bench's ``grade-sample``: validity and the error, the raw score, the position
score, the medal, above-median and, for RPG-scored (DSBench) tasks, the RPG. A foreign-layout
task under ``WMRL_TASKS_DIR`` is named by its folder name (or its path). Exit 0 for a valid
submission, 1 for an invalid one, 2 for a usage or configuration error.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from wmrl_envs.errors import InvalidSubmissionError
from wmrl_envs.grading import get_metric, grade_file, submission_cap, task_leaderboards, task_reward
from wmrl_envs.grading.conventions import conventions
from wmrl_envs.paths import builtin_tasks_dir
from wmrl_envs.task_spec import Task
from wmrl_envs.tasks import LITE, SPLIT_CHOICES, get_task, load_task, scan_tasks

#: The keys of ``wmrl grade --json`` (null where one does not apply to the task). A value that
#: is not a finite number (the metric overflowed) is null there too, and ``non_finite`` says
#: why, ``{"raw_score": "inf after a floating-point overflow in the metric; ..."}`` (else null).
GRADE_KEYS = ("valid", "error", "raw_score", "position_score", "medal", "above_median", "rpg", "non_finite")


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
    listing.add_argument("--split", default=None, choices=SPLIT_CHOICES,
                         help=f"only this split, or {LITE}: the suites' {LITE} selection (both splits)")
    listing.add_argument("--json", action="store_true",
                         help="one JSON object per line; folders that did not load as objects with 'load_error'")
    listing.add_argument("--strict", action="store_true", help="exit 2 if any task folder or suite did not load")
    listing.set_defaults(func=cmd_list)

    show = sub.add_parser("show", help="show one task's spec, files and description")
    show.add_argument("task", help="a task id, or the path of a task folder")
    show.set_defaults(func=cmd_show)
    return tasks


def add_grade_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``grade`` command on an argparse subparsers object."""
    grade = subparsers.add_parser("grade", help="grade one submission CSV against a task's private answers",
                                  description="Like MLE-bench's grade-sample. Exit 0 for a valid submission, "
                                              "1 for an invalid one, 2 for a usage or configuration error.")
    grade.add_argument("--task", required=True,
                       help="a task id (a WMRL_TASKS_DIR folder's name for MLE-Dojo, MLE-bench and DSBench "
                            "folders) or the path of a task folder")
    grade.add_argument("submission", help="the submission CSV")
    grade.add_argument("--json", action="store_true", help=f"one JSON object with keys {', '.join(GRADE_KEYS)}")
    grade.set_defaults(func=cmd_grade)
    return grade


def task_summary(task: Task) -> dict[str, Any]:
    """The facts ``tasks list --json`` prints for one task, with the grading conventions it follows."""

    spec = task.spec
    boards = task_leaderboards(task) if task.leaderboard_path is not None else []
    return {
        "id": spec.id,
        "env": spec.env_id,
        "suite": spec.suite,
        "split": spec.split,
        "task_type": spec.task_type,
        "metric": spec.metric,
        "leaderboard_size": len(boards[0]) if boards else 0,
        "leaderboard_blank_rows": sum(board.blank_rows for board in boards),
        "n_train": spec.meta.get("n_train"),
        "n_test": spec.meta.get("n_test"),
        "layout": task.layout,
        "grading_conventions": asdict(conventions(spec)),
        "path": str(task.root),
    }


def cmd_build(args: argparse.Namespace) -> int:
    from wmrl_envs.tasks.build.lock import write_lock  # noqa: PLC0415 - build-time code, only for wmrl tasks build
    from wmrl_envs.tasks.build.suites import build_suite  # noqa: PLC0415 - build-time code, only for wmrl tasks build

    entries = build_suite(args.suite, force=args.force, progress=True)
    print(f"{len(entries)} tasks in {builtin_tasks_dir(args.suite)}")
    if args.write_lock:
        print(f"wrote {write_lock(args.suite, entries)}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    scan = scan_tasks(args.suite)
    split, selection = (None, LITE) if args.split == LITE else (args.split, None)
    rows = [task_summary(t) for t in scan.select(suite=args.suite, split=split, selection=selection)]
    if args.json:
        for row in [*rows, *(failure.to_dict() for failure in scan.failures)]:
            print(json.dumps(row))
    else:
        columns = ("id", "suite", "split", "task_type", "metric", "n_train", "n_test", "leaderboard_size")
        table = [columns] + [tuple(str(row[c]) for c in columns) for row in rows]
        widths = [max(len(r[i]) for r in table) for i in range(len(columns))]
        for row in table:
            print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        print(f"{len(rows)} task(s)")
        sys.stdout.flush()  # the table first, then what did not load
        if scan.failures:
            print(f"{len(scan.failures)} task folder(s) or suite(s) did not load:", file=sys.stderr)
            for failure in scan.failures:
                print(f"  {failure.path} ({failure.source}): {failure.error}", file=sys.stderr)
    return 2 if args.strict and scan.failures else 0


def cmd_show(args: argparse.Namespace) -> int:
    task = _task(args.task)
    print(json.dumps(task_summary(task), indent=1))
    print(f"description: {task.description_path}\npublic: {task.public_dir}\n"
          f"sample submission: {task.sample_submission_path}\nanswers: {task.answers_path}\n"
          f"leaderboards: {', '.join(str(p) for p in task.leaderboard_paths) or '-'}\n")
    print(task.description)
    return 0


def grade_report(task: Task, submission: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """What ``wmrl grade`` prints: the :data:`GRADE_KEYS` report and :func:`task_reward`'s details."""
    # Floating-point errors (1e308 squared) become the reason for a non-finite value, not warnings.
    errors: set[str] = set()
    with np.errstate(over="call", divide="call", invalid="call", call=lambda kind, _flag: errors.add(kind)):
        try:
            raw = grade_file(submission, task.answers(), task.spec, max_bytes=submission_cap(task.sample_submission_path))
            error = None
        except InvalidSubmissionError as exc:
            raw, error = None, str(exc)
        reward, details = task_reward(task, raw)  # an invalid submission scores 0, as in training
    rpg = task.spec.meta.get("reward") == "rpg"
    report = {"valid": error is None, "error": error, "raw_score": raw,
              "position_score": None if rpg else reward,
              "medal": None if rpg else details["medal"],
              "above_median": None if rpg else details["above_median"],
              "rpg": reward if rpg else None}
    cause = f" after a floating-point {' and '.join(sorted(errors))} in the metric" if errors else ""
    report["non_finite"] = {key: f"{value!r}{cause}; JSON has no such number" for key, value in report.items()
                            if isinstance(value, float) and not math.isfinite(value)} or None
    return report, details


def cmd_grade(args: argparse.Namespace) -> int:
    task = _task(args.task)
    report, details = grade_report(task, Path(args.submission).expanduser())
    if args.json:
        print(json.dumps({**report, **dict.fromkeys(report["non_finite"] or ())}, allow_nan=False))
        return 0 if report["valid"] else 1
    metric = get_metric(task.spec.metric)
    direction = "higher" if metric.higher_is_better else "lower"
    def shown(value: Any) -> Any:
        return "-" if value is None else value

    lines = [f"task            {task.id} ({task.layout} layout, {metric.name}, {direction} is better)",
             f"valid           {'yes' if report['valid'] else 'no'}"]
    if report["error"]:
        lines.append(f"error           {report['error']}")
    lines.append(f"raw score       {shown(report['raw_score'])}")
    lines += [f"note            {key} is {reason}" for key, reason in (report["non_finite"] or {}).items()]
    if report["rpg"] is None:
        ranked = details["ranked_score"]
        if ranked is not None and ranked != report["raw_score"]:
            lines.append(f"ranked score    {ranked} (rounded as the task's grader rounds)")
        lines += [(f"position score  {report['position_score']:.6g} (position {details['position']} "
                   f"of {details['n']} on the primary leaderboard)"),
                  f"medal           {shown(report['medal'])}",
                  f"above median    {'yes' if report['above_median'] else 'no'}"]
    else:
        lines += [f"rpg             {report['rpg']:.6g}",
                  (f"g, b            {details['rpg_perfect']:.6g}, {details['rpg_baseline']:.6g} "
                   f"(b: {details['rpg_baseline_source']})")]
    print("\n".join(lines))
    return 0 if report["valid"] else 1


def _task(name: str) -> Task:
    """A task by id, or the task folder at a path."""
    path = Path(name).expanduser()
    return load_task(path) if path.is_dir() else get_task(name)
