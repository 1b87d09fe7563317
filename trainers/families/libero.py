"""``wmrl/LIBERO-Long-v0``: VLA policies on the ten LIBERO-Long tasks, rewarded by success.

The same :class:`~trainers.wmrl.WMRLTrainer` that trains code agents trains VLA policies:
:class:`LiberoAdapter` rolls the policy out in ``wmrl/LIBERO-Long-v0``, whose episodes are
scored through the run's scoring core (the env holds the trainer's core, so the stream of
an episode is the trainer's schedule's and its reward, calibration and weight are the core's).

* A group is one task from one init state (drawn from ``init_states`` by the group id), so
  its members differ only by the policy's sampling.
* Streams: ``"real"`` and ``"anchor"`` episodes run to success or 520 steps and are scored
  by the simulator's success check; ``"anchor"`` and ``"world_model"`` episodes are also
  scored by the success reward model, from the states of their first ``wm_horizon`` steps;
  a ``"world_model"`` episode stops there, and that is where simulator time is saved.
* Anchor groups are rolled out first, then the rest task by task (the simulator is rebuilt,
  2-14 s, only when the task changes): every world-model episode of a step is then calibrated
  with all of the step's anchor pairs, as the code families' one-batch scoring does.
* The ledger gets three charges per step: ``simulation`` (the env's measured physics,
  reset and rendering time, counted in simulator steps), ``world_model`` (reward-model
  time, counted in scored episodes) and ``generation`` (the policy's own compute: the rest).
* ``sim_workers > 1`` or ``executor="ray"`` fans the episodes out over simulation workers, and
  ``wm_reward="shaped"`` scores world-model groups by potential-based shaping instead of
  truncating them: both run through :mod:`trainers.families.libero_pool`.
"""

from __future__ import annotations

import argparse
import json
import time
import zlib
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.base import Rollout
from agents.vla.policy import EpisodePrompt, VLAEpisodePolicy
from trainers.adapters import GroupOutcome, by_group
from trainers.families import FamilyProfile
from trainers.families.libero_pool import collect_pooled, evaluate_episodes, make_pool, pooled
from trainers.ledger import ComputeLedger
from trainers.policies import libero_episode_policy
from trainers.wmrl_config import WM_REWARDS
from wmrl_envs.errors import ConfigError
from wmrl_envs.libero.env import LiberoLongEnv
from wmrl_envs.libero.evaluate import comparison_markdown
from wmrl_envs.libero.tasks import (
    ENV_ID,
    HELDOUT_INIT_STATES,
    N_INIT_STATES,
    N_TASKS,
    TASK_NAMES,
    TRAIN_INIT_STATES,
    task_index,
)
from wmrl_envs.libero.workers import DEFAULT_EPISODE_TIMEOUT_S
from wmrl_envs.provenance import provenance
from wmrl_envs.scoring import ScoredGroup, ScoreResult, ScoringCore


class LiberoAdapter:
    """Roll a VLA policy out on LIBERO-Long for the WMRL trainer.

    Args:
        task_ids: Tasks to train on (indices or names; default all 10).
        init_states: Init states groups draw from (default 0-39; 40-49 stay held out).
        wm_horizon: Steps a world-model episode runs before the reward model scores it.
        max_steps: Steps of a real episode (520 in the LIBERO-Long protocol).
        obs_mode: ``"state"`` or ``"both"`` (for policies that encode images).
        reward_model: Path of a success-model artefact (default: the shipped one).
        seed: Seeds the init state of each group (with its group id), and on simulation workers
            each episode's sampling (with its group id and index).
        sim_workers: Simulation workers an update's episodes are spread over (1: this process).
        executor: ``"ray"`` puts the workers on the Ray cluster; anything else, on this machine.
        wm_reward: ``"truncate"`` (world-model episodes stop at ``wm_horizon``) or ``"shaped"``
            (every episode runs to its end; :mod:`wmrl_envs.scoring.shaping`).
        sim_timeout_s: Seconds an episode may run on a simulation worker before it is stopped
            and the episode counts as an infrastructure failure.
    """

    def __init__(self, task_ids: Sequence[int | str] | None = None, init_states: Sequence[int] = TRAIN_INIT_STATES,
                 wm_horizon: int = 260, max_steps: int = 520, obs_mode: str = "state",
                 reward_model: str | None = None, seed: int = 0, sim_workers: int = 1, executor: str = "local",
                 wm_reward: str = "truncate", sim_timeout_s: float = DEFAULT_EPISODE_TIMEOUT_S) -> None:
        self.indices = [task_index(t) for t in (range(N_TASKS) if task_ids is None else task_ids)]
        self.task_ids = [TASK_NAMES[i] for i in self.indices]
        self.init_states = [int(k) for k in init_states]
        if not self.init_states or not all(0 <= k < N_INIT_STATES for k in self.init_states):
            raise ConfigError(f"init_states must be non-empty and in [0, {N_INIT_STATES})")
        if obs_mode == "pixels":
            raise ConfigError("the VLA reads proprio and object state: use obs_mode 'state' or 'both'")
        if sim_workers < 1:
            raise ConfigError(f"sim_workers must be >= 1, got {sim_workers}")
        if wm_reward not in WM_REWARDS:
            raise ConfigError(f"wm_reward must be one of {WM_REWARDS}, got {wm_reward!r}")
        if not sim_timeout_s > 0:
            raise ConfigError(f"sim_timeout_s must be > 0, got {sim_timeout_s}")
        self.seed, self.sim_timeout_s = seed, float(sim_timeout_s)
        self.env_options = {"obs_mode": obs_mode, "wm_horizon": wm_horizon, "max_steps": max_steps,
                            "reward_model": reward_model, "task_ids": self.indices}
        self.env: Any = None
        self.sim_workers, self.executor, self.wm_reward = sim_workers, executor, wm_reward
        self.pool: Any = None

    @property
    def pooled(self) -> bool:
        """Whether episodes run on simulation workers (always for shaped rewards, one worker being
        this process: shaped scoring reads the finished episodes there)."""
        return pooled(self.sim_workers, self.executor) or self.wm_reward == "shaped"

    def env_for(self, core: ScoringCore):
        """The env whose episodes are scored through ``core`` (built on first use; rebuilt only
        when the core serves another reward, since a rebuild restarts the simulator)."""
        if self.env is not None and self.env.config.reward != core.reward:
            self.env.close()
            self.env = None
        if self.env is None:
            self.env = LiberoLongEnv(reward=core.reward, core=core, **self.env_options)
        self.env.core = core
        return self.env

    def init_state_for(self, group_id: Hashable) -> int:
        rng = np.random.default_rng([self.seed, zlib.crc32(repr(group_id).encode())])
        return int(rng.choice(self.init_states))

    def collect(self, policy, task_ids: Sequence[str], group_ids: Sequence[Hashable], group_size: int,
                generator: torch.Generator, ledger: ComputeLedger, core: ScoringCore) -> list[GroupOutcome]:
        if self.pooled:
            if self.pool is None:
                self.pool = make_pool(self.sim_workers, self.executor, self.env_options, self.sim_timeout_s)
            return collect_pooled(self, self.pool, policy, task_ids, group_ids, group_size, ledger, core,
                                  shaped=self.wm_reward == "shaped")
        env = self.env_for(core)
        streams = core.streams(group_ids)
        order = sorted(range(len(task_ids)), key=lambda i: (streams[i] != "anchor", task_index(task_ids[i])))
        prompts = [EpisodePrompt(env, task_index(task_ids[i]), self.init_state_for(group_ids[i])) for i in order]
        cpu0, wall0 = time.process_time(), time.perf_counter()
        with torch.no_grad():
            rollouts = policy.generate(prompts, group_size, [group_ids[i] for i in order], generator)
        self._charge(rollouts, time.process_time() - cpu0, time.perf_counter() - wall0, ledger, core)
        grouped = by_group(rollouts, group_ids)
        # Each episode's info carries the ScoreResult the core fused; the group keeps it as it is.
        return [GroupOutcome(grouped[g], ScoredGroup(TASK_NAMES[task_index(t)], g, s,
                                                     [r.response["result"] for r in grouped[g]]))
                for t, g, s in zip(task_ids, group_ids, streams)]

    @staticmethod
    def _charge(rollouts: list[Rollout], cpu: float, wall: float, ledger: ComputeLedger, core: ScoringCore) -> None:
        """Charge a collection's measured ``cpu`` and ``wall``: simulation and world model as the
        episodes report them, the core's fusion inside the span to the world model, the rest to generation."""
        results: list[ScoreResult] = [r.response["result"] for r in rollouts]
        sim_cpu = sum(r.cost["simulation_cpu_s"] for r in results)
        sim_wall = sum(r.cost["simulation_s"] for r in results)
        wm = sum(r.cost["world_model_s"] for r in results)
        fusion_cpu, fusion_wall = core.take_fusion_time()  # the episodes fused in the span: not generation
        scored = sum(r.wm_score_raw is not None for r in results)
        ledger.add("simulation", sim_cpu, sim_wall, count=sum(int(r.cost["simulation_steps"]) for r in results))
        # NumPy on one thread: the success model's CPU time ~ its wall time.
        ledger.add("world_model", wm + fusion_cpu, wm + fusion_wall, count=scored)
        ledger.add("generation", max(cpu - sim_cpu - wm - fusion_cpu, 0.0), max(wall - sim_wall - wm - fusion_wall, 0.0),
                   count=len(rollouts))

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
        if self.pool is not None:
            self.pool.close()
            self.pool = None


def make_adapter(config) -> LiberoAdapter:
    family = config.family
    return LiberoAdapter(task_ids=family.task_ids, wm_horizon=family.wm_horizon, seed=config.seed,
                         sim_workers=family.sim_workers, executor=family.executor, wm_reward=family.wm_reward,
                         sim_timeout_s=family.sim_timeout_s)


def check_train(config, eval_k: int) -> None:
    if eval_k > len(HELDOUT_INIT_STATES):
        raise ConfigError(f"LIBERO-Long holds out {len(HELDOUT_INIT_STATES)} init states: --eval-k must be <= "
                          f"{len(HELDOUT_INIT_STATES)}")


def heldout(config, untrained, trained, k: int, task_ids) -> tuple[str, str, list[dict]]:
    """Greedy success of the starting and trained VLA on held-out init states 40..40+k-1."""
    tasks = [task_index(t) for t in (task_ids or config.family.task_ids or range(N_TASKS))]
    inits = list(HELDOUT_INIT_STATES[:k])
    family = config.family
    pool = (make_pool(family.sim_workers, family.executor, {}, family.sim_timeout_s)
            if pooled(family.sim_workers, family.executor) else None)
    try:
        reports = [evaluate_episodes(VLAEpisodePolicy(p, greedy=True, seed=config.seed), k, tasks, inits, name,
                                     pool=pool).to_dict()
                   for p, name in ((untrained, "start"), (trained, f"trained ({config.mode})"))]
    finally:
        if pool is not None:
            pool.close()
    title = f"Held-out evaluation (simulator success, init states {inits[0]}-{inits[-1]}, greedy actions)"
    return title, comparison_markdown(reports), reports


def evaluate_command(args: argparse.Namespace) -> int:
    """``wmrl eval`` on LIBERO-Long: every task, trial k from init state init_start + k, sim success."""
    tasks = [task_index(t) for t in (args.tasks or range(N_TASKS))]
    inits = list(range(args.init_start, args.init_start + args.trials))
    if args.sim_workers < 1:
        raise ConfigError(f"--sim-workers must be >= 1, got {args.sim_workers}")
    pool = (make_pool(args.sim_workers, args.executor, {"obs_mode": args.obs_mode})
            if pooled(args.sim_workers, args.executor) else None)
    reports = []
    try:
        for spec in (args.policy or "scripted").split(","):
            report = evaluate_episodes(libero_episode_policy(spec, args.seed), args.trials, tasks, inits, spec,
                                       obs_mode=args.obs_mode, pool=pool)
            reports.append(report.to_dict())
    finally:
        if pool is not None:
            pool.close()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"meta": provenance(), "reports": reports}, indent=2))
    steps = [r["simulation_steps"] for r in reports]
    hours = [f"{r['wall_s'] / 3600:.2f}" for r in reports]
    md = out / "results.md"
    md.write_text(f"# LIBERO-Long evaluation ({args.trials} trials per task, init states {inits[0]}-{inits[-1]})\n\n"
                  + comparison_markdown(reports, {"sim steps": steps, "wall h": hours})
                  + "\n\nSuccess is the simulator's success check within 520 steps after 10 wait steps.\n")
    print(md.read_text())
    print(f"wrote {md} and {out / 'results.json'}")
    return 0


PROFILE = FamilyProfile(env_id=ENV_ID, policies=("vla",), suite=None, quantity="success", make_adapter=make_adapter,
                        make_scorer=None, heldout=heldout, evaluate=evaluate_command, check_train=check_train,
                        simulated=True)
