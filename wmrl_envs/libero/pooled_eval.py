"""The LIBERO-Long evaluation protocol on simulation workers: each (task, init state) is one job.

:func:`evaluate_pooled` returns the :class:`~.evaluate.LiberoEvalReport` that
:func:`~.evaluate.evaluate_libero` returns, episode for episode: an evaluator's episode policy
seeds itself from (task, init state) in ``reset`` (its contract, see :mod:`.evaluate`), so the
worker an episode runs on does not change it. An episode whose worker died is neither a
success nor a failure: it is left out of the task's successes and counted in
``infra_failures``.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from wmrl_envs.libero.evaluate import EpisodePolicy, LiberoEvalReport, TaskResult, evaluate_libero, protocol_init_states
from wmrl_envs.libero.tasks import TASK_NAMES
from wmrl_envs.libero.workers import SimulationPool, Worker


@dataclass(frozen=True)
class PickledPolicy:
    """An evaluator episode policy (``reset`` and ``act``: the scripted controller, a VLA acting
    greedily) as a pool payload: pickled once, shipped once, unpickled once per worker."""

    blob: bytes

    @classmethod
    def of(cls, policy: EpisodePolicy) -> PickledPolicy:
        return cls(pickle.dumps(policy))

    def build(self) -> Any:
        return pickle.loads(self.blob)  # our own driver's bytes, as any multiprocessing message


@dataclass(frozen=True)
class EvalEpisode:
    """One protocol episode: the shipped episode policy from ``init_state`` of ``task_index``."""

    task_index: int
    init_state: int

    def run(self, worker: Worker) -> dict[str, Any]:
        report = evaluate_libero(worker.policy, trials=1, tasks=[self.task_index], init_states=[self.init_state],
                                 env=worker.env_for("real"), progress=False)
        [task] = report.tasks
        return {"success": task.successes[0], "steps": task.steps[0],
                "simulation_steps": report.simulation_steps, "simulation_s": report.simulation_s}


def evaluate_pooled(pool: SimulationPool, policy: EpisodePolicy, trials: int, tasks: Iterable[int],
                    init_states: Sequence[int] | None = None, name: str = "policy") -> LiberoEvalReport:
    """:func:`~.evaluate.evaluate_libero` with the episodes spread over ``pool``'s workers.

    The pool's env options decide the observations (``obs_mode``); ``trials``, ``tasks`` and
    ``init_states`` mean what they mean there.
    """
    init_states = protocol_init_states(trials, init_states)
    tasks = [int(t) for t in tasks]
    start = time.perf_counter()
    pool.ship(PickledPolicy.of(policy))
    jobs = [EvalEpisode(task, k) for task in tasks for k in init_states]
    results = iter(pool.run(jobs))
    per_task, steps_total, sim_s, lost = [], 0, 0.0, 0
    for task in tasks:
        result = TaskResult(task, TASK_NAMES[task], [], [])
        for _ in init_states:
            episode = next(results)
            if episode.infra_failure:
                lost += 1
                continue
            out = episode.output
            result.successes.append(bool(out["success"]))
            result.steps.append(int(out["steps"]))
            steps_total += int(out["simulation_steps"])
            sim_s += float(out["simulation_s"])
        per_task.append(result)
    return LiberoEvalReport(name, trials, init_states, per_task, steps_total, sim_s, time.perf_counter() - start,
                            infra_failures=lost)
