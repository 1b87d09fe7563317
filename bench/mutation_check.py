"""Does every mutation operator cause the outcome it claims? Execute a sample and compare.

For each operator of :mod:`wmrl_envs.mutations`, the first ``--per-operator``
applicable tasks of a pool that alternates MLE-Dojo and DSBench tasks of every prediction kind
(rotated per operator, so the sample differs between operators) get a grammar script with
cheap, seeded choices, mutated with the operator and run in the sandbox. Timeout operators run
under a ``--loop-wall-s`` wall-clock limit, the others under ``--wall-s``. Every mutant is
executed, the static prover off, and the run's outcome (:mod:`wmrl_envs.outcome`: its status and
exception class, as :class:`~wmrl_envs.scoring.CodeScorer` classifies an executed run) is
compared with the operator's claim.

Writes ``bench/results/mutation_check.json`` and ``.md``; exits 1 if any claim is wrong.

    python -m bench.mutation_check [--per-operator 3] [--workers 2] [--wall-s 60] [--loop-wall-s 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import random
import sys
import time

from agents.code.grammar import SLOTS, SolutionChoices, render_script
from bench.common import RESULTS, rerun_command
from wmrl_envs.grading.metrics import get_metric
from wmrl_envs.mutations import OPERATORS, Mutation, MutationNotApplicable, mutate
from wmrl_envs.outcome import TIMEOUT
from wmrl_envs.provenance import provenance
from wmrl_envs.scoring import CodeScorer, ScoreResult
from wmrl_envs.task_spec import Task
from wmrl_envs.tasks import get_task

# Small tasks of every prediction kind (label, probability, class probabilities, value), with
# string and numeric features, lower- and upper-case column names.
POOL = {
    "mle": ("titanic-survival", "breast-cancer-diagnosis", "wine-cultivar", "auto-fuel-economy",
            "glass-identification", "alzheimers-biomarkers", "fishing-mode-choice", "used-car-prices",
            "credit-card-application", "handwritten-digits", "college-graduation-rate"),
    "dsbench": ("penguin-species", "two-class-simulated", "boston-house-values", "married-women-labor-force",
                "pima-diabetes", "highway-mileage", "gunpoint-motion", "professor-salaries"),
}
# Cheap grammar points that are valid on every pool task (k-NN's 50 neighbours outnumber the
# training rows of a 3-fold split of the smallest tasks): the check is about the mutation.
CHEAP = {"model": ("constant", "linear", "tree", "random_forest", "hist_gb"), "capacity": ("low",)}


def choices_for(operator: str, task: Task) -> SolutionChoices:
    """Seeded cheap choices for one (operator, task) pair."""
    rng = random.Random(f"{operator}:{task.id}")
    return SolutionChoices(**{slot: rng.choice(CHEAP.get(slot, options)) for slot, options in SLOTS.items()})


def sample(operator: Mutation, index: int, per_operator: int) -> list[tuple[Task, SolutionChoices, str]]:
    """The first ``per_operator`` pool tasks the operator applies to, with their mutated scripts."""
    rotated = [pool[index % len(pool):] + pool[:index % len(pool)] for pool in POOL.values()]
    order = [t for pair in itertools.zip_longest(*rotated) for t in pair if t is not None]
    picked = []
    for position, task_id in enumerate(order):
        task = get_task(task_id)
        choices = choices_for(operator.name, task)
        seed = 100 * index + position  # varies the operator's variant between the tasks
        try:
            script = mutate(render_script(task.spec, choices, seed), operator.name, task.spec, seed)
        except MutationNotApplicable:
            continue
        picked.append((task, choices, script))
        if len(picked) == per_operator:
            break
    return picked


def observed(result: ScoreResult) -> tuple[str, str | None]:
    """The outcome status and exception class of one executed run."""
    if not result.executed:
        raise RuntimeError(f"task {result.task_id}: a mutant was not executed ({result.error})")
    return result.status, result.exception


def with_wall(task: Task, wall_s: float) -> Task:
    limits = dataclasses.replace(task.spec.limits, wall_s=min(wall_s, task.spec.limits.wall_s))
    return dataclasses.replace(task, spec=dataclasses.replace(task.spec, limits=limits))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-operator", type=int, default=3, help="tasks per operator")
    parser.add_argument("--workers", type=int, default=2, help="sandbox runs at once")
    parser.add_argument("--wall-s", type=float, default=60.0, help="wall-clock limit of a run")
    parser.add_argument("--loop-wall-s", type=float, default=5.0, help="wall-clock limit of a timeout operator's run")
    parser.add_argument("--name", default="mutation_check", help="results file name")
    args = parser.parse_args()

    plan = []  # (operator, task, choices, script)
    for index, operator in enumerate(OPERATORS.values()):
        picked = sample(operator, index, args.per_operator)
        if not picked:
            print(f"{operator.name}: applies to no pool task", file=sys.stderr)
        plan += [(operator, task, choices, script) for task, choices, script in picked]
    tasks = [with_wall(task, args.loop_wall_s if op.status == TIMEOUT else args.wall_s) for op, task, _, _ in plan]
    scorer = CodeScorer(workers=args.workers, prove=False)  # ground truth: run every mutant, provable or not
    start = time.perf_counter()
    results = scorer.execute(tasks, [script for *_, script in plan])
    wall = time.perf_counter() - start
    scorer.close()

    rows = []
    for (op, task, choices, _), result in zip(plan, results):
        status, exception = observed(result)
        rows.append({
            "operator": op.name, "task": task.id, "suite": task.spec.suite,
            "prediction": get_metric(task.spec.metric).prediction,
            "choices": f"{choices.model}/{choices.validation}", "provable": op.provable,
            "expected_status": op.status, "expected_exception": " or ".join(op.exceptions) or None,
            "status": status, "exception": exception,
            "ok": status == op.status and (not op.exceptions or exception in op.exceptions),
            "error": (result.error or "")[:200], "wall_s": round(result.cost.get("execution_s", 0.0), 2),
        })
    report = {**provenance(), "runs": len(rows), "wall_s": round(wall, 1),
              "workers": args.workers, "operators": len(OPERATORS), "wrong": sum(not r["ok"] for r in rows),
              "rows": rows}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(report, indent=1) + "\n")
    table = markdown(report)
    (RESULTS / f"{args.name}.md").write_text(table)
    print(table)
    return 1 if report["wrong"] else 0


def markdown(report: dict) -> str:
    lines = [
        "# Mutation operators: claimed vs executed outcome", "",
        f"{report['runs']} sandbox runs of {report['operators']} operators, {report['workers']} workers, "
        f"{report['wall_s']} s; {report['wrong']} claim(s) wrong. Written by `{rerun_command(__spec__.name, report['argv'])}` "
        f"on {report['date'][:10]}, commit `{report['commit'][:10]}`.", "",
        "| operator | task | kind | choices | expected | observed | ok |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        expected = r["expected_status"] + (f" ({r['expected_exception']})" if r["expected_exception"] else "")
        seen = r["status"] + (f" ({r['exception']})" if r["exception"] else "")
        lines.append(f"| {r['operator']} | {r['task']} ({r['suite']}) | {r['prediction']} | {r['choices']} | "
                     f"{expected} | {seen} | {'yes' if r['ok'] else '**no**'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
