"""What every RL-library integration shares before any library is imported: the code tasks an LM
policy acts on, and the stable id of a prompt (a group's id is built from it)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

from trainers.evaluate import select_tasks
from trainers.families import get_family
from wmrl_envs.errors import ConfigError
from wmrl_envs.task_spec import Task


def code_tasks(env_id: str = "wmrl/MLEDojo-v0", split: str = "train", task_ids: Sequence[str] | None = None) -> list[Task]:
    """The tasks of a code family (MLE-Dojo, DSBench) that an LM policy can act on: its built-in
    suite's ``split``, or exactly the tasks named."""
    profile = get_family(env_id)
    if "lm" not in profile.policies or profile.suite is None:
        raise ConfigError(f"{env_id} is not a code family with LM prompts (policies {profile.policies})")
    return select_tasks(env_id, profile.suite, split, task_ids)


def prompt_uid(task_id: str, messages: Sequence[Mapping[str, str]]) -> str:
    """A stable id of one prompt: a hash of the task id and its messages, the same in every process and run."""
    payload = json.dumps([task_id, list(messages)], sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
