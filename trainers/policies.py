"""Building policies by name, loading them from run folders, and turning them into responders.

Policy specs accepted by the CLI:

* ``grammar`` (or ``grammar:untrained``): a freshly initialised grammar policy (``--seed``);
* ``runs/<name>`` or ``runs/<name>/checkpoint.pt``: the policy of a training run;
* ``reference:<name>``: a fixed reference solution (see ``agents.code.grammar``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from trainers.evaluate import Responder
from wmrl_envs.errors import ConfigError

POLICIES = ("grammar", "lm")


def make_policy(name: str, seed: int = 0, **kwargs: Any):
    """A new policy of family ``name``."""
    if name == "grammar":
        from agents.code.policy import GrammarPolicy, GrammarPolicyConfig

        return GrammarPolicy(GrammarPolicyConfig(seed=seed, **kwargs))
    if name == "lm":
        from agents.code.lm_policy import CausalLMPolicy

        if "path" not in kwargs:
            raise ConfigError("the lm policy needs --policy-path pointing at a local transformers checkpoint")
        return CausalLMPolicy.from_pretrained(kwargs.pop("path"), **kwargs)
    raise ConfigError(f"unknown policy {name!r}; known: {POLICIES}")


def load_run_policy(path: str | Path):
    """The trained policy stored in a run folder's checkpoint."""
    path = Path(path)
    if path.is_dir():
        path = path / "checkpoint.pt"
    if not path.exists():
        raise ConfigError(f"no checkpoint at {path}")
    state = torch.load(path, weights_only=False)
    config = state["config"]
    policy = make_policy(config.get("policy", "grammar"), seed=config["seed"])
    policy.load_state_dict(state["policy"])
    return policy


def policy_responder(policy, seed: int = 0) -> Responder:
    """Sample k responses per task from ``policy`` (avg@k evaluation samples, not greedy)."""

    def respond(task, k: int, base_seed: int) -> list[str]:
        generator = torch.Generator().manual_seed(seed * 1_000_003 + base_seed)
        with torch.no_grad():
            rollouts = policy.generate([task], k, [0], generator)
        return [str(r.response) for r in rollouts]

    return respond


def responder_from_spec(spec: str, seed: int = 0) -> Responder:
    """Resolve a ``--policy`` item into a responder."""
    kind, _, arg = spec.partition(":")
    if kind == "reference":
        from agents.code.grammar import reference_responder

        return reference_responder(arg)
    if kind == "grammar" and arg in ("", "untrained"):
        return policy_responder(make_policy("grammar", seed=seed), seed)
    return policy_responder(load_run_policy(spec), seed)
