"""Simulator data for the success reward model and for behaviour cloning, all generated here.

* :func:`scripted_rollouts`: the scripted controller at several noise levels. Clean runs
  are demonstrations; noisy runs fail in realistic ways (missed grasps, drops, objects
  knocked over) and supply negatives with their whole history.
* :func:`goal_examples`: goal teleports (positives) and near-misses next to them
  (negatives), as short pseudo-trajectories: the init state held for a while, then the
  settled teleported state. Only their end points carry information, and the reward
  model's features read end points, displacement and rise since the start.
* :func:`prefix_examples`: the (prefix, final outcome) pairs the model trains on; a prefix
  is what a world-model episode shows the model at ``wm_horizon``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from wmrl_envs.libero.env import LiberoLongEnv
from wmrl_envs.libero.evaluate import evaluate_libero
from wmrl_envs.libero.scripted import ScriptConfig, ScriptedPolicy
from wmrl_envs.libero.teleport import near_miss, teleport_to_goal
from wmrl_envs.libero.trajectory import Trajectory

#: Noise levels of the scripted controller: clean demonstrations, then increasingly sloppy.
NOISE_LEVELS = {
    "clean": ScriptConfig(),
    "noisy": ScriptConfig(action_noise=0.15, target_noise=0.01),
    "sloppy": ScriptConfig(action_noise=0.35, target_noise=0.025, grasp_retries=0),
}


def scripted_rollouts(env: LiberoLongEnv, tasks: Iterable[int], init_states: Sequence[int], level: str,
                      seed: int = 0, progress: bool = True) -> list[Trajectory]:
    """Scripted episodes at noise ``level`` from each init state; ``source`` is ``scripted-<level>``."""
    policy = ScriptedPolicy(NOISE_LEVELS[level], seed=seed)
    report = evaluate_libero(policy, trials=len(init_states), tasks=tasks, init_states=init_states,
                             name=f"scripted-{level}", keep_trajectories=True, progress=progress, env=env)
    return report.trajectories


def goal_examples(env: LiberoLongEnv, tasks: Iterable[int], init_states: Sequence[int],
                  rng: np.random.Generator) -> list[Trajectory]:
    """A teleported goal state (success) and a near-miss (failure) per task and init state."""
    out = []
    for task in tasks:
        for k in init_states:
            env.reset(options={"task_id": task, "init_state": k, "stream": "real"})
            start = env.trajectory()
            if not teleport_to_goal(env.sim):
                continue
            out.append(_pseudo(start, env, True, "teleport", rng))
            if near_miss(env.sim, rng) is not None:
                out.append(_pseudo(start, env, False, "near-miss", rng))
    return out


def _pseudo(start: Trajectory, env: LiberoLongEnv, success: bool, source: str,
            rng: np.random.Generator) -> Trajectory:
    """Init state held for a random part of the episode, then the current state held still."""
    hold, settled = int(rng.integers(60, 400)), 12
    sim = env.sim
    proprio = np.r_[np.repeat(start.proprio[:1], hold, 0), np.repeat(sim.proprio()[None], settled, 0)]
    objects = np.r_[np.repeat(start.object_state[:1], hold, 0), np.repeat(sim.object_state()[None], settled, 0)]
    return Trajectory(start.task_index, start.init_state, proprio, objects,
                      np.zeros((hold + settled - 1, 7), np.float32), success, source)


def prefix_examples(trajectories: Sequence[Trajectory], horizons: Sequence[int]) -> tuple[list[Trajectory], np.ndarray]:
    """Each trajectory cut at every horizon (a shorter episode is kept whole once), labelled
    with the whole episode's success."""
    prefixes, labels = [], []
    for t in trajectories:
        for h in sorted({min(h, t.steps) for h in horizons}):
            prefixes.append(t.prefix(h) if h < t.steps else t)
            labels.append(float(bool(t.success)))
    return prefixes, np.array(labels)
