"""LIBERO-Long behind the trainer's :class:`~trainers.adapters.EnvAdapter` interface.

The same :class:`~trainers.wmrl.WMRLTrainer` that trains code agents trains VLA policies:
the adapter turns each scheduled group into episodes of ``wmrl/LIBERO-Long-v0``.

* A group is one task from one init state (drawn from ``init_states`` by the group id), so
  its members differ only by the policy's sampling.
* Streams: ``"real"`` and ``"anchor"`` episodes run to success or 520 steps and are scored
  by the simulator's success check; ``"anchor"`` and ``"world_model"`` episodes are also
  scored by the success reward model, from the states of their first ``wm_horizon`` steps;
  a ``"world_model"`` episode stops there, and that is where simulator time is saved.
* The ledger gets three charges per step: ``simulation`` (the env's measured physics,
  reset and rendering time, counted in simulator steps), ``world_model`` (reward-model
  time, counted in scored episodes) and ``generation`` (the policy's own compute: the rest).
"""

from __future__ import annotations

import time
import zlib
from typing import Any, Hashable, Sequence

import numpy as np
import torch

from agents.base import Rollout
from agents.vla.policy import EpisodePrompt
from trainers.adapters import GroupOutcome
from trainers.ledger import ComputeLedger
from wmrl_envs.errors import ConfigError
from wmrl_envs.libero.env import LiberoLongEnv
from wmrl_envs.libero.tasks import N_INIT_STATES, N_TASKS, TASK_NAMES, TRAIN_INIT_STATES, task_index


class LiberoAdapter:
    """Roll a VLA policy out on LIBERO-Long for the WMRL trainer.

    Args:
        task_ids: Tasks to train on (indices or names; default all 10).
        init_states: Init states groups draw from (default 0-39; 40-49 stay held out).
        wm_horizon: Steps a world-model episode runs before the reward model scores it.
        max_steps: Steps of a real episode (520 in the LIBERO-Long protocol).
        obs_mode: ``"state"`` or ``"both"`` (for policies that encode images).
        reward_model: Path of a success-model artefact (default: the shipped one).
        seed: Seeds the init state of each group (with its group id).
    """

    def __init__(self, task_ids: Sequence[int | str] | None = None, init_states: Sequence[int] = TRAIN_INIT_STATES,
                 wm_horizon: int = 260, max_steps: int = 520, obs_mode: str = "state",
                 reward_model: str | None = None, seed: int = 0) -> None:
        indices = [task_index(t) for t in (range(N_TASKS) if task_ids is None else task_ids)]
        self.task_ids = [TASK_NAMES[i] for i in indices]
        self.init_states = [int(k) for k in init_states]
        if not self.init_states or not all(0 <= k < N_INIT_STATES for k in self.init_states):
            raise ConfigError(f"init_states must be non-empty and in [0, {N_INIT_STATES})")
        if obs_mode == "pixels":
            raise ConfigError("the VLA reads proprio and object state: use obs_mode 'state' or 'both'")
        self.seed = seed
        # "fused" only fixes the default stream; every episode names its own stream.
        self.env = LiberoLongEnv(reward="fused", obs_mode=obs_mode, wm_horizon=wm_horizon,
                                 max_steps=max_steps, reward_model=reward_model, task_ids=indices)

    def init_state_for(self, group_id: Hashable) -> int:
        rng = np.random.default_rng([self.seed, zlib.crc32(repr(group_id).encode())])
        return int(rng.choice(self.init_states))

    def collect(self, policy, task_ids: Sequence[str], group_ids: Sequence[Hashable], streams: Sequence[str],
                group_size: int, generator: torch.Generator, ledger: ComputeLedger) -> list[GroupOutcome]:
        # Task-major order: the simulator is rebuilt (2-14 s) only when the task changes.
        order = sorted(range(len(task_ids)), key=lambda i: task_index(task_ids[i]))
        prompts = [EpisodePrompt(self.env, task_index(task_ids[i]), self.init_state_for(group_ids[i]), streams[i])
                   for i in order]
        cpu0, wall0 = time.process_time(), time.perf_counter()
        with torch.no_grad():
            rollouts = policy.generate(prompts, group_size, [group_ids[i] for i in order], generator)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        self._charge(rollouts, cpu, wall, ledger)

        by_group: dict[Hashable, list[Rollout]] = {g: [] for g in group_ids}
        for r in rollouts:
            by_group[r.group_id].append(r)
        return [self._outcome(task_ids[i], group_ids[i], streams[i], by_group[group_ids[i]])
                for i in range(len(task_ids))]

    @staticmethod
    def _outcome(task_id: str, group_id: Hashable, stream: str, rollouts: list[Rollout]) -> GroupOutcome:
        def score(info: dict[str, Any], key: str) -> float:
            return np.nan if info[key] is None or info["infra_failure"] else float(info[key])

        infos = [r.response for r in rollouts]
        return GroupOutcome(task_id, group_id, stream, rollouts,
                            real=np.array([score(i, "real_score") for i in infos]),
                            wm_raw=np.array([score(i, "wm_score_raw") for i in infos]),
                            valid=np.array([bool(i["valid"]) for i in infos]))

    @staticmethod
    def _charge(rollouts: list[Rollout], cpu: float, wall: float, ledger: ComputeLedger) -> None:
        costs = [r.response["cost"] for r in rollouts]
        sim_cpu = sum(c["simulation_cpu_s"] for c in costs)
        sim_wall = sum(c["simulation_s"] for c in costs)
        wm = sum(c["world_model_s"] for c in costs)
        scored = sum(r.response["wm_score_raw"] is not None for r in rollouts)
        ledger.add("simulation", sim_cpu, sim_wall, count=sum(int(c["simulation_steps"]) for c in costs))
        ledger.add("world_model", wm, wm, count=scored)  # NumPy on one thread: CPU time ~ wall time
        ledger.add("generation", max(cpu - sim_cpu - wm, 0.0), max(wall - sim_wall - wm, 0.0), count=len(rollouts))

    def close(self) -> None:
        self.env.close()
