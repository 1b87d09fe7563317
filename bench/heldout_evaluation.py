"""The held-out evaluation's wall time: every task's runs submitted up front through one sandbox pool
(``trainers.evaluate.evaluate_policies``, what ``wmrl train`` and ``wmrl eval`` do) against the former
loop, which ran one task's ``k`` runs at a time and each policy in a sandbox pool of its own.

Per seed, two policies are evaluated as the main job evaluates its untrained and trained ones: the
grammar policy initialised at the seed and at the seed + 1000 (in-sample as to tasks: the suite's
held-out split, which the world model never scores here). The two ways run back to back, in an order
that alternates by seed, and must give the same scores; the report gives each way's wall time per
seed and the ratio's mean ± SE over seeds.

    python -m bench.heldout_evaluation                  # seeds 0 1 2 3, k = 4, about 22 min on 2 cores
    python -m bench.heldout_evaluation --seeds 0 --k 1  # a smoke
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence

import numpy as np

from bench.common import mean_se, write_result
from trainers.evaluate import EvalConfig, EvalReport, Responder, _task_result, evaluate_policies, select_tasks
from trainers.policies import make_policy, policy_responder
from wmrl_envs.scoring import CodeScorer, extract_code

SECOND_POLICY_OFFSET = 1000


def task_by_task(responders: Sequence[tuple[str, Responder]], config: EvalConfig) -> list[EvalReport]:
    """The former evaluation: per policy a sandbox pool of its own, and per task its ``k`` runs
    awaited before the next task's start."""
    tasks = select_tasks(config.env_id, config.suite, config.split, config.task_ids)
    reports = []
    for name, responder in responders:
        scorer = CodeScorer(executor=config.executor, workers=config.workers)
        start, results = time.perf_counter(), []
        try:
            for task in tasks:
                responses = responder(task, config.k, config.seed)
                results.append(_task_result(task, scorer.execute([task] * len(responses),
                                                                 [extract_code(r) for r in responses])))
        finally:
            scorer.close()
        reports.append(EvalReport(name, config, results, wall_s=time.perf_counter() - start))
    return reports


def measure(seed: int, k: int, workers: int | None, task_ids: Sequence[str] | None = None) -> dict:
    """Both ways on one seed, back to back; the order alternates with the seed."""
    config = EvalConfig(k=k, workers=workers, seed=seed, task_ids=tuple(task_ids) if task_ids else None)
    policies = [(f"grammar seed {s}", make_policy("grammar", seed=s)) for s in (seed, seed + SECOND_POLICY_OFFSET)]
    responders = [(name, policy_responder(policy, seed)) for name, policy in policies]
    ways = {"up_front": lambda: evaluate_policies(responders, config, progress=False),
            "task_by_task": lambda: task_by_task(responders, config)}
    order = list(ways) if seed % 2 == 0 else list(ways)[::-1]
    walls, scores = {}, {}
    for way in order:
        start = time.perf_counter()
        reports = ways[way]()
        walls[way] = time.perf_counter() - start
        scores[way] = [[t.scores for t in r.tasks] for r in reports]
        print(f"seed {seed} {way}: {walls[way]:.1f} s", flush=True)
    return {"seed": seed, "order": order, "wall_s": walls, "same_scores": scores["up_front"] == scores["task_by_task"],
            "runs": 2 * k * len(scores["up_front"][0]),
            "score_mean": [float(np.mean([np.mean(t) for t in r])) for r in scores["up_front"]]}


def report(rows: list[dict], k: int, workers: int | None) -> str:
    mean, se = mean_se([r["wall_s"]["task_by_task"] / r["wall_s"]["up_front"] for r in rows])
    lines = ["### The held-out evaluation's wall time: runs submitted up front, against task by task", "",
             f"Two grammar policies a seed (initialised at the seed and at the seed + {SECOND_POLICY_OFFSET}), "
             f"the MLE suite's held-out split, avg@{k}, workers {workers or os.cpu_count()}; the two ways back to "
             "back, their order alternating by seed (in-sample as to tasks; a timing, not a quality figure).", "",
             "| seed | runs | first | task by task (s) | up front (s) | ratio | same scores |",
             "|---:|---:|---|---:|---:|---:|---|"]
    for r in rows:
        w = r["wall_s"]
        lines.append(f"| {r['seed']} | {r['runs']} | {r['order'][0].replace('_', ' ')} | {w['task_by_task']:.1f} | "
                     f"{w['up_front']:.1f} | {w['task_by_task'] / w['up_front']:.2f}x | {r['same_scores']} |")
    lines += ["", f"Ratio (task by task over up front), mean ± SE over {len(rows)} seeds: **{mean:.2f} ± {se:.2f}x**. "
              f"Load average (1 min) at the end: {os.getloadavg()[0]:.2f}."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--tasks", nargs="+", default=None, help="held-out task ids (default: the whole split)")
    parser.add_argument("--name", default="heldout_evaluation")
    args = parser.parse_args(argv)
    rows = [measure(seed, args.k, args.workers, args.tasks) for seed in args.seeds]
    path = write_result(args.name, __spec__.name, {"k": args.k, "workers": args.workers, "rows": rows},
                        report(rows, args.k, args.workers))
    print(path.read_text())
    return 0 if all(r["same_scores"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
