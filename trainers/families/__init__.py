"""Environment families: one profile module per family, and the one table that names them.

A :class:`FamilyProfile` supplies everything the command line, the config checks and the
evaluation need to know about a family: the policies that can act in it, its built-in task
suite, the reward quantity, the trainer's adapter and the held-out evaluation. Nothing else
branches on env ids.

Adding a family: register its env in ``wmrl_envs/__init__.py``, write a profile module here
that defines ``PROFILE``, and add one line to :data:`FAMILIES`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wmrl_envs.errors import ConfigError

#: env id -> the module that defines its ``PROFILE``.
FAMILIES: dict[str, str] = {
    "wmrl/MLEDojo-v0": "trainers.families.mle",
    "wmrl/DSBench-v0": "trainers.families.dsbench",
    "wmrl/LIBERO-Long-v0": "trainers.families.libero",
}


@dataclass(frozen=True)
class FamilyProfile:
    """What one env family brings to the trainer, the CLI and the evaluation.

    Attributes:
        env_id: The Gymnasium id.
        policies: Policy kinds that can act in it (``trainers.policies.make_policy`` names).
        suite: The built-in task suite the trainer and the evaluation draw from (None: the
            family's tasks are not files).
        quantity: The reward: ``"position"`` (leaderboard position score), ``"rpg"``
            (DSBench's relative performance gap) or ``"success"``.
        make_adapter: ``(config) -> EnvAdapter`` for the trainer.
        make_scorer: ``(config) -> GroupScorer`` of the run's scoring core (None: the family's
            episodes score themselves through the core).
        heldout: ``(config, untrained, trained, k, task_ids) -> (title, markdown, payload)``,
            the held-out comparison after training.
        evaluate: ``(args) -> exit code``, the ``wmrl eval`` command.
        check_train: ``(config, eval_k) -> None``, raises ConfigError for a run the family
            cannot evaluate (None: no extra check).
        simulated: Its episodes run in a simulator, so ``sim_workers`` (simulation workers) and
            ``wm_reward`` (truncated or shaped world-model episodes) apply to it.
    """

    env_id: str
    policies: tuple[str, ...]
    suite: str | None
    quantity: str
    make_adapter: Callable[[Any], Any]
    make_scorer: Callable[[Any], Any] | None
    heldout: Callable[..., tuple[str, str, list[dict]]]
    evaluate: Callable[[Any], int]
    check_train: Callable[[Any, int], None] | None = None
    simulated: bool = False


def get_family(env_id: str) -> FamilyProfile:
    """The profile of ``env_id``; an unknown id is a :class:`ConfigError` naming the known ones."""
    module = FAMILIES.get(env_id)
    if module is None:
        raise ConfigError(f"unknown env_id {env_id!r}; known: {sorted(FAMILIES)}")
    return importlib.import_module(module).PROFILE
