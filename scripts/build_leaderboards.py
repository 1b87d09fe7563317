#!/usr/bin/env python
"""Regenerate the leaderboards of a built-in suite from the reference population.

Every solution of :mod:`wmrl_envs.tasks.build.population` is fitted on each task's public train set
and graded on its private answers; the scores become ``leaderboards/<suite>/<task>.csv``
(``rank,score``, best first, ties allowed) and ``leaderboards/<suite>/_population.json`` records
which solution scored what, what was skipped and why, and how long it all took.

    python scripts/build_leaderboards.py                      # the whole mle suite, 2 processes
    python scripts/build_leaderboards.py --tasks credit-scoring titanic-survival

Solutions that use more than ``--time-cap`` seconds of CPU time are skipped (and listed); CPU
time, so that a busy machine does not change which solutions make it onto a board. Run it in the
background on a shared machine: it keeps every core named by ``--jobs`` busy.
"""

from __future__ import annotations

import os

# One BLAS/OpenMP thread per worker: on a small machine, oversubscription is 10x slower.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import datetime as dt
import json
import sys
import time
from collections import Counter, defaultdict

import numpy as np
from joblib import Parallel, delayed
from tqdm import tqdm

from wmrl_envs.grading import Leaderboard, get_metric
from wmrl_envs.paths import leaderboards_dir
from wmrl_envs.provenance import provenance
from wmrl_envs.tasks.build.population import Outcome, evaluate_solution, solution_names
from wmrl_envs.tasks.builtin import load_builtin_tasks

SUMMARY = "_population.json"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="mle", help="built-in suite (default: %(default)s)")
    parser.add_argument("--tasks", nargs="*", help="only these task ids (the summary keeps the others)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes, at most 2 here (default: %(default)s)")
    parser.add_argument("--time-cap", type=float, default=30.0,
                        help="CPU seconds one solution may use before it is skipped (default: %(default)s)")
    parser.add_argument("--min-entries", type=int, default=50,
                        help="fail when a leaderboard would have fewer entries (default: %(default)s)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    tasks = load_builtin_tasks(args.suite, require_leaderboard=False)
    if args.tasks:
        unknown = sorted(set(args.tasks) - {t.id for t in tasks})
        if unknown:
            print(f"unknown task id(s): {unknown}", file=sys.stderr)
            return 2
        tasks = [t for t in tasks if t.id in args.tasks]

    jobs = [(str(task.root), name) for task in tasks for name in solution_names(task)]
    print(f"{len(jobs)} fits over {len(tasks)} tasks with {args.jobs} process(es), CPU-time cap {args.time_cap:g} s")
    outcomes: dict[str, list[Outcome]] = defaultdict(list)
    run = Parallel(n_jobs=args.jobs, return_as="generator_unordered")(
        delayed(evaluate_solution)(root, name, args.time_cap) for root, name in jobs)
    for outcome in tqdm(run, total=len(jobs), unit="fit", desc="reference population"):
        outcomes[outcome.task_id].append(outcome)

    out_dir = leaderboards_dir() / args.suite
    out_dir.mkdir(parents=True, exist_ok=True)
    summary_path = out_dir / SUMMARY
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() and args.tasks else {"tasks": {}}
    short: list[str] = []
    for task in tasks:
        results = sorted(outcomes[task.id], key=lambda o: o.solution)
        metric = get_metric(task.spec.metric)
        scores = [o.score for o in results if o.score is not None]
        skipped = {o.solution: o.error for o in results if o.score is None}
        for name, reason in skipped.items():
            print(f"  skipped {task.id} / {name}: {reason}")
        if len(scores) < args.min_entries:
            short.append(f"{task.id} ({len(scores)} entries)")
        if not scores:
            continue
        board = Leaderboard(scores, metric.higher_is_better)
        board.to_csv(out_dir / f"{task.id}.csv")
        summary["tasks"][task.id] = {
            "metric": metric.name,
            "higher_is_better": metric.higher_is_better,
            "entries": board.n,
            "best": float(board.scores[0]),
            "median": board.median,
            "cpu_seconds": round(sum(o.seconds for o in results), 2),
            "families": dict(Counter(o.family for o in results if o.score is not None)),
            "scores": {o.solution: o.score for o in results if o.score is not None},
            "skipped": skipped,
        }
    summary.update({
        "suite": args.suite,
        "generated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "how": "scripts/build_leaderboards.py: every reference solution of wmrl_envs/tasks/build/population.py "
               "fitted on public/train.csv and graded on private/answers.csv",
        "cpu_time_cap_s": args.time_cap,
        "jobs": args.jobs,
        "wall_seconds": round(time.perf_counter() - started, 1),
        "machine": provenance(),
    })
    summary["tasks"] = dict(sorted(summary["tasks"].items()))
    summary_path.write_text(json.dumps(summary, indent=1) + "\n")
    sizes = [v["entries"] for v in summary["tasks"].values()]
    print(f"wrote {len(tasks)} leaderboards to {out_dir} in {summary['wall_seconds']} s "
          f"(entries per board: min {min(sizes)}, median {int(np.median(sizes))}); summary: {summary_path}")
    if short:
        print(f"leaderboards with fewer than {args.min_entries} entries: {', '.join(short)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
