"""LIBERO-Long on simulation workers: the trainer's collection and the protocol evaluation over a pool.

:class:`~trainers.families.libero.LiberoAdapter` runs its episodes in this process by default
(``sim_workers=1``: the env holds the trainer's core and scores each episode as it ends). With
more workers, with ``executor="ray"``, or with shaped rewards, it hands them to a
:class:`~wmrl_envs.libero.workers.SimulationPool` through :func:`collect_pooled`:

* **One job per episode**, seeded by (run seed, group id, member index)
  (:func:`agents.vla.remote.episode_seed`), so any number of workers gives the same episodes.
  The trainer's generator is not drawn from on this path.
* **The weights** are shipped once per call, that is once per update.
* **Scoring.** Workers return raw scores; one ``core.fuse`` over every group of the update then
  feeds all anchor pairs to the calibrator before any world-model group is calibrated, as the
  code families' one-batch scoring does (the in-process path fuses episode by episode, anchors
  first). With ``wm_reward="shaped"`` every episode runs to its end and world-model groups get
  the potential-shaped reward (:mod:`wmrl_envs.scoring.shaping`).
* **A lost episode** (its worker died, or ran it past ``sim_timeout_s`` and was stopped) is an
  infrastructure failure: its ``ScoreResult`` has ``infra_failure`` and a NaN reward, so the
  trainer drops it from its group's baseline as it drops a code sample whose sandbox failed; its
  rollout carries no tokens. The seconds its worker spent on it are charged as simulation.
* **The ledger** charges ``simulation`` and ``world_model`` with the seconds each worker measured
  in its env, and ``generation`` with the rest of the workers' CPU on their jobs (the policy)
  plus this process's own CPU around the pool.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import torch

from agents.base import Rollout
from agents.vla.remote import SampledEpisode, VLAWeights, episode_seed
from trainers.adapters import GroupOutcome
from trainers.ledger import ComputeLedger
from wmrl_envs import outcome
from wmrl_envs.info import env_info
from wmrl_envs.libero.evaluate import EpisodePolicy, LiberoEvalReport, evaluate_libero
from wmrl_envs.libero.pooled_eval import evaluate_pooled
from wmrl_envs.libero.tasks import TASK_NAMES, task_index
from wmrl_envs.libero.workers import DEFAULT_EPISODE_TIMEOUT_S, JobResult, SimulationPool
from wmrl_envs.scoring import ScoredGroup, ScoreResult, ScoringCore

#: The raw scores a worker's episode reports (its env's final info, see ``wmrl_envs/libero/env.py``).
_RAW_FIELDS = ("real_score", "raw_score", "wm_score_raw", "valid", "status", "decided_by")
_NO_COST = {"simulation_s": 0.0, "simulation_cpu_s": 0.0, "simulation_steps": 0, "world_model_s": 0.0}


def pooled(sim_workers: int, executor: str) -> bool:
    """Whether episodes run on a pool: more than one worker, or workers on Ray."""
    return sim_workers > 1 or executor == "ray"


def make_pool(sim_workers: int, executor: str, env_options: dict[str, Any],
              episode_timeout_s: float = DEFAULT_EPISODE_TIMEOUT_S) -> SimulationPool:
    """``sim_workers`` Ray actors (``executor="ray"``), local processes, or this process for one."""
    backend = "ray" if executor == "ray" else "local" if sim_workers > 1 else "inline"
    return SimulationPool(sim_workers, backend, env_options, episode_timeout_s)


def collect_pooled(adapter: Any, pool: SimulationPool, policy: Any, task_ids: Sequence[str],
                   group_ids: Sequence[Hashable], group_size: int, ledger: ComputeLedger, core: ScoringCore,
                   shaped: bool) -> list[GroupOutcome]:
    """The scored groups of one update, their episodes run on ``pool`` (the module docstring)."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    streams = core.streams(group_ids)
    order = sorted(range(len(task_ids)), key=lambda i: (streams[i] != "anchor", task_index(task_ids[i])))
    jobs = [SampledEpisode(task_index(task_ids[i]), adapter.init_state_for(group_ids[i]), group_ids[i], member,
                           streams[i], episode_seed(adapter.seed, group_ids[i], member),
                           shaped and streams[i] != "real")  # a real group's reward reads no world model
            for i in order for member in range(group_size)]
    pool.ship(VLAWeights.of(policy))
    cpu1, wall1 = time.process_time(), time.perf_counter()
    results = pool.run(jobs)
    cpu2, wall2 = time.process_time(), time.perf_counter()

    stream_of = dict(zip(group_ids, streams))
    rollouts: dict[Hashable, list[Rollout]] = {g: [] for g in group_ids}
    samples: dict[Hashable, list[ScoreResult]] = {g: [] for g in group_ids}
    for job, result in zip(jobs, results):
        rollout, sample = _scored_episode(job, result, stream_of[job.group_id])
        rollouts[job.group_id].append(rollout)
        samples[job.group_id].append(sample)
    groups = [ScoredGroup(TASK_NAMES[task_index(t)], g, s, samples[g]) for t, g, s in zip(task_ids, group_ids, streams)]
    core.fuse(groups)
    for group in groups:
        for rollout, sample in zip(rollouts[group.group_id], group.samples):
            # The fused sample is the episode's one ScoreResult from here on, as on the in-process path.
            rollout.response = {**rollout.response, **env_info(sample, group.group_id), "result": sample}
    cpu3, wall3 = time.process_time(), time.perf_counter()
    everything = [r for g in group_ids for r in rollouts[g]]
    adapter._charge(everything, (cpu1 - cpu0) + (cpu3 - cpu2) + sum(r.cpu_s for r in results),
                    (wall1 - wall0) + (wall3 - wall2) + sum(r.wall_s for r in results), ledger, core)
    return [GroupOutcome(rollouts[g.group_id], g) for g in groups]


def _scored_episode(job: Any, result: JobResult, stream: str) -> tuple[Rollout, ScoreResult]:
    """A worker's episode as a rollout and its raw scores; a lost one as an infrastructure failure."""
    name = TASK_NAMES[job.task_index]
    if result.infra_failure:
        cost = {**_NO_COST, "simulation_cpu_s": result.cpu_s, "simulation_s": result.wall_s}  # spent, then lost
        sample = ScoreResult(task_id=name, stream=stream, infra_failure=True, error=result.error,
                             status=outcome.INFRA_FAILURE, cost=cost)
        # The env's info shape, as for an episode that ended (wmrl_envs.info).
        response = {**env_info(sample, job.group_id), "task_index": job.task_index, "init_state": job.init_state}
        rollout = Rollout(task_id=name, group_id=job.group_id, response=response, tokens=None, logp=torch.zeros(0),
                          meta={"init_state": job.init_state, "steps": 0, "infra_failure": True})
        return rollout, sample
    rollout = result.output
    info = rollout.response
    sample = ScoreResult(task_id=name, stream=stream, **{k: info[k] for k in _RAW_FIELDS},
                         potential_start=info.get("potential_start"), cost=dict(info["cost"]))
    return rollout, sample


def evaluate_episodes(policy: EpisodePolicy, trials: int, tasks: Iterable[int], init_states: Sequence[int] | None,
                      name: str, obs_mode: str = "state", pool: SimulationPool | None = None) -> LiberoEvalReport:
    """The evaluation protocol in this process, or over ``pool`` (whose env options set ``obs_mode``)."""
    if pool is None:
        return evaluate_libero(policy, trials=trials, tasks=tasks, init_states=init_states, obs_mode=obs_mode,
                               name=name)
    return evaluate_pooled(pool, policy, trials, tasks, init_states, name)
