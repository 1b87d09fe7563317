"""Sandboxed executions on a Ray cluster, and one calibrator and one experience shared by every process of it.

Install the extra (``pip install 'wmrl[ray]'``), then run::

    python docs/examples/ray_example.py                          # a local Ray on this machine
    RAY_ADDRESS=<head>:6379 python docs/examples/ray_example.py  # join a running cluster

It scores two groups of one MLE-Dojo task through a :class:`ScoringCore` whose scorer runs
scripts with ``make_executor("ray")`` and whose calibrator is the named actor of namespace
``wmrl``. The anchor group runs in bubblewrap on a Ray node; only the submissions' bytes come
back, and the driver grades them against the private answers, which never leave it. Its pairs
and its executed outcomes enter the actor, so any process that asks for the same actor (a
trainer's workers, verl's reward actors, another driver naming the namespace) calibrates by
them and reuses them. The world-model group is predicted only. The last line printed is a JSON
summary.
"""

from __future__ import annotations

import json

import ray

from agents.code.grammar import REFERENCE_SOLUTIONS, render_script
from wmrl_envs.sandbox.ray_executor import prewarm
from wmrl_envs.scoring import CodeGroup, CodeScorer, HashSchedule, ScoringCore
from wmrl_envs.scoring.ray_calibrator import RemoteCalibrator, RemoteExperience, calibrator_actor
from wmrl_envs.tasks import list_tasks

NAMESPACE = "wmrl"  # drivers of different jobs share a named actor through its namespace


def main() -> None:
    ray.init()  # joins RAY_ADDRESS when it is set
    task = min(list_tasks(suite="mle", split="train"), key=lambda t: t.spec.meta.get("n_train", 1e9))
    prewarm([task])  # every node builds the runtime venv and unpacks the task's public files now
    actor = calibrator_actor(namespace=NAMESPACE)
    calibrator, experience = RemoteCalibrator(actor), RemoteExperience(actor)
    core = ScoringCore(HashSchedule(anchor_fraction=0.1), calibrator,
                       scorer=CodeScorer(executor="ray", experience=experience))
    scripts = [render_script(task.spec, REFERENCE_SOLUTIONS[name]) for name in ("constant", "linear")]
    groups = [CodeGroup(task, scripts, group_id=0), CodeGroup(task, scripts, group_id=1)]
    try:
        anchor, predicted = core.score(groups, streams=["anchor", "world_model"])
    finally:
        core.close()
    print(json.dumps({
        "task": task.id,
        "anchor_real_scores": [s.real_score for s in anchor.samples],
        "anchor_statuses": [s.status for s in anchor.samples],
        "world_model_rewards": [s.score for s in predicted.samples],
        "calibrator_pairs": calibrator.n_pairs,
        "executed_codes": len(experience),
    }))


if __name__ == "__main__":
    main()
