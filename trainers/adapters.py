"""Environment adapters: how the trainer collects scored groups from one env family.

The trainer asks an adapter for the groups of one step, each tagged with its stream:

* ``"real"``: executed only (the real-GRPO baseline);
* ``"world_model"``: world-model scored only;
* ``"anchor"``: executed **and** world-model scored.

An adapter returns raw scores; the trainer owns calibration and fusion. It also charges the
work to the compute ledger. :class:`CodeTaskAdapter` serves the MLE and DSBench envs; the
LIBERO adapter rolls a VLA policy out in the simulator behind the same interface.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Protocol, Sequence

import numpy as np
import torch

from agents.base import Policy, Rollout
from trainers.evaluate import SUITES
from wmrl_envs.libero.tasks import ENV_ID as LIBERO_ENV_ID
from trainers.ledger import ComputeLedger
from wmrl_envs.errors import ConfigError


@dataclass
class GroupOutcome:
    """One scored group. Arrays are per rollout; NaN marks a missing score.

    ``real`` is NaN for an infrastructure failure (not a score) or when the group was not
    executed; ``wm_raw`` is NaN when the group was not world-model scored.
    """

    task_id: str
    group_id: Hashable
    stream: str
    rollouts: list[Rollout]
    real: np.ndarray
    wm_raw: np.ndarray
    valid: np.ndarray


class EnvAdapter(Protocol):
    task_ids: list[str]

    def collect(self, policy: Policy, task_ids: Sequence[str], group_ids: Sequence[Hashable],
                streams: Sequence[str], group_size: int, generator: torch.Generator,
                ledger: ComputeLedger) -> list[GroupOutcome]: ...

    def close(self) -> None: ...


class CodeTaskAdapter:
    """Code agents on the MLE/DSBench suites: generate, world-model score, execute anchors."""

    def __init__(self, env_id: str = "wmrl/MLEDojo-v0", split: str = "train",
                 task_ids: Sequence[str] | None = None, executor: str = "bwrap",
                 workers: int | None = None, world_model: Any = "surrogate",
                 world_model_kwargs: dict[str, Any] | None = None) -> None:
        from wmrl_envs.rewards import RealReward
        from wmrl_envs.tasks import list_tasks

        if env_id not in SUITES:
            raise ConfigError(f"CodeTaskAdapter serves {sorted(SUITES)}, not {env_id!r}")
        tasks = list_tasks(suite=SUITES[env_id], split=split)
        if task_ids is not None:
            wanted = set(task_ids)
            tasks = [t for t in tasks if t.id in wanted]
            if missing := wanted - {t.id for t in tasks}:
                raise ConfigError(f"unknown {split} task id(s) for {env_id}: {sorted(missing)}")
        if not tasks:
            raise ConfigError(f"no {split} tasks for {env_id}")
        self.tasks = {t.id: t for t in tasks}
        self.task_ids = sorted(self.tasks)
        self.real = RealReward(executor=executor, workers=workers)
        self._world_model_spec = world_model
        self._world_model_kwargs = dict(world_model_kwargs or {})
        self._world_model = None

    @property
    def world_model(self):
        if self._world_model is None:
            from wmrl_envs.world_models import make_world_model

            spec = self._world_model_spec
            self._world_model = make_world_model(spec, **self._world_model_kwargs) if isinstance(spec, str) else spec
        return self._world_model

    def collect(self, policy: Policy, task_ids: Sequence[str], group_ids: Sequence[Hashable],
                streams: Sequence[str], group_size: int, generator: torch.Generator,
                ledger: ComputeLedger) -> list[GroupOutcome]:
        from wmrl_envs.rewards import extract_code

        tasks = [self.tasks[t] for t in task_ids]
        with ledger.measure("generation", count=len(tasks) * group_size), torch.no_grad():
            rollouts = policy.generate(tasks, group_size, list(group_ids), generator)
        by_group: dict[Hashable, list[Rollout]] = {g: [] for g in group_ids}
        for r in rollouts:
            by_group[r.group_id].append(r)
        outcomes = [
            GroupOutcome(task.id, g, stream, by_group[g], real=np.full(group_size, np.nan),
                         wm_raw=np.full(group_size, np.nan), valid=np.zeros(group_size, dtype=bool))
            for task, g, stream in zip(tasks, group_ids, streams)
        ]
        scripts = {id(o): [extract_code(str(r.response)) for r in o.rollouts] for o in outcomes}
        self._world_model_scores([o for o in outcomes if o.stream in ("world_model", "anchor")], scripts, ledger)
        self._execute([o for o in outcomes if o.stream in ("real", "anchor")], scripts, ledger)
        return outcomes

    def _world_model_scores(self, outcomes: list[GroupOutcome], scripts: dict[int, list], ledger) -> None:
        """One world-model batch over every scored group of the step."""
        items = [(o, i) for o in outcomes for i, s in enumerate(scripts[id(o)]) if s is not None]
        for o in outcomes:  # a response without code is certainly invalid: its score is known
            o.wm_raw[[s is None for s in scripts[id(o)]]] = 0.0
        if not items:
            return
        with ledger.measure("world_model", count=len(items)):
            predictions = self.world_model.predict([self.tasks[o.task_id] for o, _ in items],
                                                   [scripts[id(o)][i] for o, i in items])
        for (o, i), p in zip(items, predictions):
            o.wm_raw[i] = p.score  # NaN when the model could not score it

    def _execute(self, outcomes: list[GroupOutcome], scripts: dict[int, list], ledger) -> None:
        """One parallel sandbox fan-out over every executed group of the step."""
        items = [(o, i) for o in outcomes for i in range(len(o.rollouts))]
        if not items:
            return
        results = self.real.score_batch([self.tasks[o.task_id] for o, _ in items],
                                        [scripts[id(o)][i] for o, i in items])
        cpu = sum(r.cost.get("execution_cpu_s", 0.0) for r in results)
        wall = sum(r.cost.get("execution_s", 0.0) for r in results)
        ledger.add("execution", cpu, wall, count=sum(s is not None for o, i in items for s in [scripts[id(o)][i]]))
        for (o, i), r in zip(items, results):
            o.real[i] = np.nan if r.infra_failure else r.real_score
            o.valid[i] = r.valid

    def close(self) -> None:
        self.real.close()


def make_adapter(config) -> EnvAdapter:
    """The adapter serving ``config.env_id`` (a :class:`~trainers.wmrl_config.WMRLConfig`)."""
    if config.env_id == LIBERO_ENV_ID:
        from trainers.libero_adapter import LiberoAdapter

        return LiberoAdapter(task_ids=config.task_ids, wm_horizon=config.wm_horizon, seed=config.seed)
    return CodeTaskAdapter(config.env_id, config.split, config.task_ids, config.executor, config.workers,
                           config.world_model)
