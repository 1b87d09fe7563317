"""The verifiers environment module for the Environments Hub: ``load_environment(**kwargs)``.

The environment itself is :mod:`wmrl_envs.integrations.verifiers`; this module only gives it the
name that ``vf-eval wmrl-mledojo`` and ``prime env install`` look for.
"""

from __future__ import annotations

from typing import Any

from wmrl_envs.integrations.verifiers import WMRLEnvironment
from wmrl_envs.integrations.verifiers import load_environment as _load_environment

__all__ = ["load_environment"]


def load_environment(env_id: str = "wmrl/MLEDojo-v0", **kwargs: Any) -> WMRLEnvironment:
    """WMRL's code tasks as a verifiers environment; every argument of
    :func:`wmrl_envs.integrations.verifiers.load_environment` applies (``reward``, ``split``,
    ``task_ids``, ``max_turns``, ``anchor_fraction``, ``world_model``, ...)."""
    return _load_environment(env_id, **kwargs)
