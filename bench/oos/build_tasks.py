#!/usr/bin/env python
"""Build the out-of-sample tasks of issue 44 in MLE-bench's prepared layout, checked against the freeze.

    python -m bench.oos.build_tasks                 # materialise into $WMRL_HOME/oos and check every file
    python -m bench.oos.build_tasks --out DIR
    python -m bench.oos.build_tasks --set v2        # the second set (bench/oos_v2), into $WMRL_HOME/oos-v2
    python -m bench.oos.build_tasks --set v2 --freeze   # once per set: leaderboards.csv and manifest.json
    python -m bench.oos.build_tasks --set confirmation  # issue 49's confirmation tasks, into $WMRL_HOME/confirmation

The built-in generator (:func:`wmrl_envs.tasks.build.suites.write_task`) writes each entry of a
set's ``tasks.yaml`` as a native folder, which is then laid out as MLE-bench prepares a
competition, with the two files a user adds::

    <id>/prepared/public/{train.csv, test.csv, sample_submission.csv, description.md}
    <id>/prepared/private/answers.csv
    <id>/leaderboard.csv     rank,score of the reference population (from the set's leaderboards.csv)
    <id>/wmrl.yaml           the overlay: metric, task_type, classes, split, suite, meta

The folders are read by the MLE-bench layout of :func:`wmrl_envs.tasks.load_task`. They are not a
built-in suite and lie outside ``WMRL_TASKS_DIR``, so ``list_tasks()`` never shows them.

``--freeze`` fits the reference population of the built-in leaderboards
(:mod:`wmrl_envs.tasks.build.population`, in-process, CPU-time cap per solution) on each task
and records every solution's test score in ``leaderboards.csv``; the manifest records each
task's source, seed, split sizes and the sha256 of every generated file. Without it, nothing
committed changes: a generated file that differs from the manifest is an error.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import time
from dataclasses import asdict
from importlib.metadata import version as package_version
from pathlib import Path

import pandas as pd

from bench.oos import SETS, FrozenSet, board_scores, write_board, write_folder
from wmrl_envs.tasks import load_task
from wmrl_envs.tasks.build.suites import file_hashes
from wmrl_envs.tasks.suite_def import DATA_PACKAGES

#: What each set's manifest says it is.
WHAT = {"v1": "issue 44's frozen out-of-sample benchmark: never fit, tune or select anything on these files",
        "confirmation": "issue 49's frozen confirmation tasks: a policy trains on the split-train tasks, the "
                        "split-heldout ones are read once for the registered result; never fit, tune or select "
                        "anything else on these files"}


def run_population(folders: dict[str, Path], jobs: int, time_cap_s: float) -> pd.DataFrame:
    """Every reference solution on every task: one row per (task, solution) that scored."""
    from joblib import Parallel, delayed

    from wmrl_envs.tasks.build.population import evaluate_solution, solution_names

    plan = [(str(folder), name) for folder in folders.values()
            for name in solution_names(load_task(folder, require_leaderboard=False))]
    print(f"{len(plan)} reference fits over {len(folders)} tasks, {jobs} process(es), CPU cap {time_cap_s:g} s")
    outcomes = Parallel(n_jobs=jobs)(delayed(evaluate_solution)(root, name, time_cap_s) for root, name in plan)
    skipped = [o for o in outcomes if o.score is None]
    for o in skipped:
        print(f"  skipped {o.task_id} / {o.solution}: {o.error}")
    rows = [{"task_id": o.task_id, "solution": o.solution, "family": o.family, "score": o.score,
             "cpu_s": round(o.seconds, 3)} for o in outcomes if o.score is not None]
    return pd.DataFrame(rows).sort_values(["task_id", "solution"], kind="stable").reset_index(drop=True)


def freeze(frozen: FrozenSet, jobs: int, time_cap_s: float, min_entries: int) -> int:
    """Build the tasks, run the population, write ``leaderboards.csv`` and the manifest's task section."""
    started, cpu0 = time.perf_counter(), time.process_time()
    suite = frozen.definition()
    work = frozen.default_out() / ".freeze"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    folders = {}
    for task in suite.tasks:
        write_folder(suite, task, work / task.id, None)
        folders[task.id] = work / task.id
    build_s = time.perf_counter() - started
    population = run_population(folders, jobs, time_cap_s)
    short = [f"{tid} ({n})" for tid, n in population.groupby("task_id").size().items() if n < min_entries]
    if short or population["task_id"].nunique() != len(folders):
        print(f"leaderboards with fewer than {min_entries} entries: {short or 'a task has none'}", file=sys.stderr)
        return 1
    population.to_csv(frozen.leaderboards_file, index=False, lineterminator="\n")
    scores = board_scores(frozen.leaderboards_file)  # read back, so the boards hold exactly what materialise() will write
    entries = {}
    for task in suite.tasks:
        folder = folders[task.id]
        board = write_board(folder, task, scores[task.id])
        loaded = load_task(folder)
        rows = population[population.task_id == task.id]
        entries[task.id] = {
            "definition": {k: v for k, v in asdict(task).items() if v not in (None, (), {}, "")},
            "n_train": loaded.spec.meta["n_train"], "n_test": loaded.spec.meta["n_test"],
            "n_features": loaded.spec.meta["n_features"], "layout": loaded.layout,
            "leaderboard": {"entries": board.n, "best": float(board.scores[0]), "median": board.median,
                            "worst": float(board.scores[-1]), "cpu_s": round(float(rows.cpu_s.sum()), 2)},
            "files": file_hashes(folder),
        }
    shutil.rmtree(work)
    manifest = frozen.read_manifest()
    manifest.update({
        "what": WHAT.get(frozen.name, WHAT["v1"]),
        "packages": {p: package_version(p) for p in DATA_PACKAGES},
        "tasks": entries,
        "build": {"frozen_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                  "jobs": jobs, "population_cpu_cap_s": time_cap_s,
                  "generate_wall_s": round(build_s, 1), "wall_s": round(time.perf_counter() - started, 1),
                  "main_process_cpu_s": round(time.process_time() - cpu0, 1),
                  "population_cpu_s": round(float(population.cpu_s.sum()), 1)},
    })
    frozen.write_manifest(manifest)
    print(f"froze {len(entries)} tasks ({len(population)} reference scores) in {manifest['build']['wall_s']} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", dest="frozen_set", choices=sorted(SETS), default="v1",
                        help="which frozen set (default: %(default)s, bench/oos; v2: bench/oos_v2; "
                             "confirmation: bench/confirmation_tasks)")
    parser.add_argument("--out", type=Path,
                        help="where to materialise the tasks (default: $WMRL_HOME/oos, oos-v2 or confirmation)")
    parser.add_argument("--freeze", action="store_true",
                        help="run the reference population and rewrite leaderboards.csv and the manifest (once)")
    parser.add_argument("--jobs", type=int, default=2, help="population processes, at most 2 here (default: 2)")
    parser.add_argument("--time-cap", type=float, default=30.0, help="CPU seconds per reference solution")
    parser.add_argument("--min-entries", type=int, default=50, help="fewest entries a leaderboard may have")
    args = parser.parse_args(argv)
    frozen = SETS[args.frozen_set]
    if args.freeze:
        return freeze(frozen, args.jobs, args.time_cap, args.min_entries)
    started = time.perf_counter()
    tasks = frozen.materialise(args.out)
    print(f"{len(tasks)} tasks in {args.out or frozen.default_out()}, every file as frozen "
          f"({time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
