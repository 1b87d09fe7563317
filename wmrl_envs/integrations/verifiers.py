"""WMRL's text code envs as a verifiers 0.3 environment, the shape the Environments Hub installs.

::

    from wmrl_envs.integrations.verifiers import load_environment

    env = load_environment("wmrl/MLEDojo-v0", reward="fused", split="train")
    results = env.evaluate_sync(client, model, num_examples=8, rollouts_per_example=4)
    # vf-eval wmrl-mledojo -m MODEL -b http://127.0.0.1:8080/v1 -n 8 -r 4 -a '{"reward": "fused"}'

* **Rows.** One per task of the split: ``prompt`` is the env's own task prompt (what its
  ``reset`` returns), ``info["task_id"]`` the task.
* **Rollouts.** A rollout is one episode of the Gymnasium env: each model turn is one
  ``env.step(response)``. With ``max_turns > 1`` the env's feedback on a turn (executed, or
  predicted and marked so) is the next user message, until the env ends the episode. Every
  episode of the process holds the one shared scoring core (:mod:`wmrl_envs.integrations.shared`):
  one calibrator that all rollouts' anchors feed, one world model, one sandbox pool. So a
  rollout's reward is the env's return for the same responses, and the calibrator's state equals
  that of one env fed the same steps in the order of their fuses.
* **Groups.** The rollouts of one example that verifiers runs together (``rollouts_per_example``,
  one ``run_group``) are one group: one group id, ``"<group_prefix>-<n>"`` numbered in the order
  groups start, so one anchor decision, as in a GRPO group. A rollout run alone is a group of one.
* **Output.** ``reward`` is the episode's return (the last valid submission's score, 0 without
  one); ``info["wmrl"]`` holds each turn's env info (stream, score, real and world-model scores,
  outcome) as JSON; the metrics ``wmrl_anchor``, ``wmrl_executed``, ``wmrl_valid`` and
  ``wmrl_infra_failure`` are 0 or 1 for the last turn. An infrastructure failure (the sandbox
  could not run the script) is not the script's failure: the env leaves it unscored, and the
  rollout's reward is the env's for it.

verifiers 0.3.1 (the classic API) is the pinned release: 0.4 keeps only its ``v1`` API and pins
an ``mcp`` that the OpenEnv server's dependencies refuse (``docs/hubs.md``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Sequence
from typing import Any

from wmrl_envs.errors import ConfigError
from wmrl_envs.extras import requires_extra
from wmrl_envs.integrations.shared import DEFAULT_ENV, SharedEnvs, jsonable
from wmrl_envs.scoring import completion_text

with requires_extra("verifiers", "the verifiers environment"):
    import verifiers as vf
    from datasets import Dataset

#: The rollout input's info key that carries the group id a group's rollouts share.
GROUP_KEY = "wmrl_group"


def task_rows(shared: SharedEnvs) -> Dataset:
    """One row per task of ``shared``'s split: the env's task prompt and the task id."""
    env = shared.make_env()
    rows = []
    for task_id in shared.options["task_ids"]:
        prompt, _ = env.reset(options={"task_id": task_id, "group_id": 0})
        rows.append({"prompt": [{"role": "user", "content": prompt}], "info": {"task_id": task_id}})
    return Dataset.from_list(rows)


class WMRLEnvironment(vf.MultiTurnEnv):
    """A verifiers multi-turn environment whose turns are steps of a WMRL text code env (module docstring)."""

    def __init__(self, shared: SharedEnvs, dataset: Dataset, *, group_prefix: str = "vf", **kwargs: Any) -> None:
        rubric = vf.Rubric(funcs=[self.wmrl_return, self.wmrl_anchor, self.wmrl_executed, self.wmrl_valid,
                                  self.wmrl_infra_failure], weights=[1.0, 0.0, 0.0, 0.0, 0.0])
        super().__init__(dataset=dataset, eval_dataset=dataset, rubric=rubric,
                         max_turns=shared.options["max_turns"], **kwargs)
        self.shared = shared
        self.group_prefix = group_prefix
        self._groups = itertools.count()

    # ------------------------------------------------------------------ episodes
    async def _run_group_states(self, group_inputs: Sequence[dict[str, Any]], *args: Any, **kwargs: Any):
        group = f"{self.group_prefix}-{next(self._groups)}"
        stamped = [{**row, "info": {**_info(row), GROUP_KEY: group}} for row in group_inputs]
        return await super()._run_group_states(stamped, *args, **kwargs)

    async def setup_state(self, state: Any) -> Any:
        info = state["info"]
        if "task_id" not in info:
            raise ConfigError("a WMRL rollout's info needs the task_id its row names (task_rows builds the rows)")
        env = self.shared.make_env()
        group = info.get(GROUP_KEY) or f"{self.group_prefix}-{next(self._groups)}"
        await asyncio.to_thread(env.reset, options={"task_id": info["task_id"], "group_id": group})
        state["wmrl_env"], state["wmrl_return"], state["wmrl_turns"] = env, 0.0, []
        return state

    async def add_trajectory_step(self, state: Any, trajectory_step: Any) -> None:
        """The model's turn is the env's step: its reward, info and feedback go into the state."""
        await super().add_trajectory_step(state, trajectory_step)
        env = state["wmrl_env"]
        text = completion_text(trajectory_step["completion"])
        feedback, reward, terminated, truncated, info = await asyncio.to_thread(env.step, text)
        trajectory_step["reward"] = float(reward)
        state["wmrl_return"] += float(reward)
        state["wmrl_turns"].append(jsonable(info))
        state["info"]["wmrl"] = state["wmrl_turns"]
        message = [vf.UserMessage(content=feedback)]
        if terminated or truncated:
            state["final_env_response"] = message
        state["wmrl_feedback"] = message

    async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
        """The env's feedback on the last turn, as the next user message."""
        return state["wmrl_feedback"]

    @vf.cleanup
    async def release_env(self, state: Any) -> None:
        # The episode's env holds the shared core; closing it would stop the pool under the others.
        state.pop("wmrl_env", None)

    # ------------------------------------------------------------------ rubric
    async def wmrl_return(self, state: Any) -> float:
        """The episode's return: the env's rewards summed over its turns."""
        return float(state.get("wmrl_return", 0.0))

    async def wmrl_anchor(self, state: Any) -> float:
        return float(_last(state, "stream") == "anchor")

    async def wmrl_executed(self, state: Any) -> float:
        return float(bool(_last(state, "executed")))

    async def wmrl_valid(self, state: Any) -> float:
        return float(bool(_last(state, "valid")))

    async def wmrl_infra_failure(self, state: Any) -> float:
        return float(bool(_last(state, "infra_failure")))


def _info(row: dict[str, Any]) -> dict[str, Any]:
    info = row.get("info") or {}
    return json.loads(info) if isinstance(info, str) else dict(info)


def _last(state: Any, key: str) -> Any:
    turns = state.get("wmrl_turns") or []
    return turns[-1].get(key) if turns else None


def load_environment(env_id: str = DEFAULT_ENV, *, reward: str = "fused", split: str = "train",
                     task_ids: Sequence[str] | None = None, max_turns: int = 1, group_prefix: str = "vf",
                     **scoring: Any) -> WMRLEnvironment:
    """A verifiers environment over ``env_id``'s tasks (the module docstring).

    Args:
        env_id: A WMRL text code env (``wmrl/MLEDojo-v0`` or ``wmrl/DSBench-v0``).
        reward: ``"real"``, ``"world_model"`` or ``"fused"``, as the env's.
        split: The task split (``"train"`` or ``"heldout"``).
        task_ids: A subset of the split's tasks (default: all of them).
        max_turns: Attempts per episode; the env's feedback comes between them.
        group_prefix: The group ids' prefix; a new prefix draws new anchors for the same examples.
        **scoring: The env's scoring options (``executor``, ``workers``, ``world_model``,
            ``anchor_fraction``, ``anchor_seed``, ``calibrator``, ...).

    Raises:
        ConfigError: An unknown env id, an env that is not a text code env, or a bad option.
    """
    if not isinstance(group_prefix, str) or not group_prefix:
        raise ConfigError(f"group_prefix must be a non-empty string, got {group_prefix!r}")
    shared = SharedEnvs.build(env_id, reward=reward, split=split, task_ids=task_ids, max_turns=max_turns, **scoring)
    return WMRLEnvironment(shared, task_rows(shared), group_prefix=group_prefix)
