"""The LIBERO-Long evaluation protocol: every task, trial ``k`` from init state ``k``, real success.

``evaluate_libero(policy, trials=50)`` is the paper protocol (10 tasks x 50 init states,
520 steps after 10 wait steps, success from the simulator only). On this project's 2-core
CPU machine that is about 500 episodes of up to 520 steps; state-only it takes roughly
1-2 hours, with camera images roughly 18 hours, so benchmarks here use fewer trials and
say so.

A policy is anything with ``reset(env, task_index, init_state)`` (called after the env's
reset, so it may read ``env.sim``) and ``act(observation) -> action``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np
from tqdm.auto import tqdm

from wmrl_envs.errors import ConfigError
from wmrl_envs.libero.env import LiberoLongEnv
from wmrl_envs.libero.tasks import INSTRUCTIONS, N_INIT_STATES, N_TASKS, TASK_NAMES, check_init_state
from wmrl_envs.libero.trajectory import Trajectory


class EpisodePolicy(Protocol):
    def reset(self, env: LiberoLongEnv, task_index: int, init_state: int) -> None: ...

    def act(self, observation: dict[str, Any]) -> np.ndarray: ...


@dataclass
class TaskResult:
    task_index: int
    task_name: str
    successes: list[bool]
    steps: list[int]

    @property
    def success_rate(self) -> float:
        return float(np.mean(self.successes)) if self.successes else float("nan")


@dataclass
class LiberoEvalReport:
    """Per-task success of one policy under the protocol, with the simulator cost it took."""

    policy: str
    trials: int
    init_states: list[int]
    tasks: list[TaskResult]
    simulation_steps: int
    simulation_s: float
    wall_s: float
    trajectories: list[Trajectory] = field(default_factory=list, repr=False)
    infra_failures: int = 0  # episodes lost with a simulation worker: neither successes nor failures

    @property
    def success_rate(self) -> float:
        return float(np.mean([s for t in self.tasks for s in t.successes]))

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy, "trials": self.trials, "init_states": self.init_states,
            "success_rate": self.success_rate, "simulation_steps": self.simulation_steps,
            "simulation_s": self.simulation_s, "wall_s": self.wall_s, "infra_failures": self.infra_failures,
            "tasks": [{**asdict(t), "success_rate": t.success_rate} for t in self.tasks],
        }

    def to_markdown(self) -> str:
        lines = [f"| task | success ({self.trials} trials) | mean steps |", "|---|---:|---:|"]
        for t in self.tasks:
            lines.append(f"| {t.task_index}: {INSTRUCTIONS[t.task_index]} | {t.success_rate:.2f} | {np.mean(t.steps):.0f} |")
        lines.append(f"| **mean** | **{self.success_rate:.3f}** | |")
        return "\n".join(lines)


def evaluate_libero(policy: EpisodePolicy, trials: int = N_INIT_STATES, tasks: Iterable[int] = range(N_TASKS),
                    init_states: Sequence[int] | None = None, obs_mode: str = "state", name: str = "policy",
                    keep_trajectories: bool = False, progress: bool = True,
                    env: LiberoLongEnv | None = None) -> LiberoEvalReport:
    """Roll ``policy`` out on every task; trial ``k`` starts from ``init_states[k]``.

    Args:
        policy: Has ``reset(env, task_index, init_state)`` and ``act(observation)``.
        trials: Episodes per task (the paper: 50, init states 0-49).
        tasks: Task indices to evaluate.
        init_states: Init state of each trial (default ``0..trials-1``); sampled placements
            (``tasks.sampled_init_states``) extend held-out evaluation past LIBERO's 50.
        obs_mode: Observation mode of the env the policy sees.
        name: Label of the policy in the report.
        keep_trajectories: Keep every episode's record in ``report.trajectories``.
        progress: Show a progress bar.
        env: An env to reuse (its ``obs_mode`` wins); default a new one, closed at the end.
    """
    init_states = protocol_init_states(trials, init_states)
    tasks = [int(t) for t in tasks]
    own_env = env is None
    env = env or LiberoLongEnv(reward="real", obs_mode=obs_mode)
    results, kept = [], []
    steps_total, sim_s = 0, 0.0
    start = time.perf_counter()
    bar = tqdm(total=len(tasks) * trials, desc=f"eval {name}", disable=not progress, unit="ep")
    try:
        for task in tasks:  # task-major: the simulator is rebuilt once per task
            result = TaskResult(task, TASK_NAMES[task], [], [])
            for k in init_states:
                obs, info = env.reset(options={"task_id": task, "init_state": k, "stream": "real"})
                policy.reset(env, task, k)
                terminated = truncated = False
                while not (terminated or truncated):
                    obs, _, terminated, truncated, info = env.step(policy.act(obs))
                result.successes.append(bool(terminated))
                result.steps.append(int(info["step"]))
                steps_total += int(info["cost"]["simulation_steps"])
                sim_s += float(info["cost"]["simulation_s"])
                if keep_trajectories:
                    trajectory = env.trajectory()
                    trajectory.success, trajectory.source = bool(terminated), name
                    kept.append(trajectory)
                bar.update(1)
            results.append(result)
    finally:
        bar.close()
        if own_env:
            env.close()
    return LiberoEvalReport(name, trials, init_states, results, steps_total, sim_s,
                            time.perf_counter() - start, kept)


def protocol_init_states(trials: int, init_states: Sequence[int] | None) -> list[int]:
    """The init state of each trial (default ``0..trials-1``), checked; a ConfigError says what is wrong."""
    try:
        states = [check_init_state(k) for k in (range(trials) if init_states is None else init_states)]
    except ConfigError as error:
        raise ConfigError(f"bad init states for {trials} trials ({error}): LIBERO has {N_INIT_STATES} per task; "
                          "tasks.sampled_init_states(n) gives more") from None
    if len(states) != trials:
        raise ConfigError(f"need {trials} init states, got {len(states)}")
    return states


def comparison_markdown(reports: Sequence[Mapping[str, Any]],
                        extra_columns: Mapping[str, Sequence[str]] | None = None) -> str:
    """A table with one row per policy: success rate per task, the mean, and any extra columns.

    Args:
        reports: :meth:`LiberoEvalReport.to_dict` of each policy, evaluated on the same tasks.
        extra_columns: Column name -> one cell per report (e.g. the training simulator steps).
    """
    extra_columns = dict(extra_columns or {})
    if not reports:
        return "(no evaluations)"
    tasks = [t["task_index"] for t in reports[0]["tasks"]]
    header = ["policy", *(str(t) for t in tasks), "mean", *extra_columns]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for i, report in enumerate(reports):
        if [t["task_index"] for t in report["tasks"]] != tasks:
            raise ConfigError(f"{report['policy']} was evaluated on other tasks than {reports[0]['policy']}")
        cells = [report["policy"], *(f"{t['success_rate']:.2f}" for t in report["tasks"]),
                 f"**{report['success_rate']:.3f}**", *(str(column[i]) for column in extra_columns.values())]
        lines.append("| " + " | ".join(cells) + " |")
    names = "; ".join(f"{t}: {INSTRUCTIONS[t]}" for t in tasks)
    return "\n".join(lines) + f"\n\nTasks: {names}."
