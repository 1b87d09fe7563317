"""Building policies by name, loading them from run folders, and turning them into responders.

Policy specs accepted by the CLI:

* ``grammar`` (or ``grammar:untrained``): a freshly initialised grammar policy (``--seed``);
* ``grammar-buggy`` (or ``grammar-buggy:untrained``): the grammar policy with a bug decision
  that may inject one of ``DEFAULT_BUG_OPERATORS`` (``agents.code.policy``): a CPU stand-in
  for an agent whose code often fails;
* ``runs/<name>`` or ``runs/<name>/checkpoint.pt``: the policy of a training run;
* ``reference:<name>``: a fixed reference solution (see ``agents.code.grammar``);
* for LIBERO-Long, a run folder or ``policy.pt`` of a MiniVLA policy, or ``scripted``
  (the privileged-state controller); see :func:`libero_episode_policy`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from agents.code.grammar import reference_responder
from agents.code.lm_policy import CausalLMPolicy
from agents.code.policy import DEFAULT_BUG_OPERATORS, GrammarPolicy, GrammarPolicyConfig
from agents.vla.policy import MiniVLAPolicy, VLAConfig, VLAEpisodePolicy
from trainers.evaluate import Responder
from wmrl_envs.errors import ConfigError
from wmrl_envs.libero.dataset import NOISE_LEVELS
from wmrl_envs.libero.scripted import ScriptedPolicy

POLICIES = ("grammar", "grammar-buggy", "lm", "vla")
#: The policies over the solution grammar (their choices are slots, see ``agents.code.diagnostics``).
GRAMMAR_POLICIES = ("grammar", "grammar-buggy")


def make_policy(name: str, seed: int = 0, path: str | Path | None = None, **kwargs: Any):
    """A policy of family ``name``: fresh (seeded by ``seed``), or the starting weights at ``path``."""
    if name in GRAMMAR_POLICIES:
        if path is not None:
            raise ConfigError(f"the {name} policy starts fresh; load a trained one from its run folder")
        if name == "grammar-buggy":
            kwargs.setdefault("bug_operators", DEFAULT_BUG_OPERATORS)
        return GrammarPolicy(GrammarPolicyConfig(seed=seed, **kwargs))
    if name == "lm":
        if path is None:
            raise ConfigError("the lm policy needs --policy-path pointing at a local transformers checkpoint")
        return CausalLMPolicy.from_pretrained(path, **kwargs)
    if name == "vla":
        if path is not None:
            if not Path(path).is_file():
                raise ConfigError(f"no MiniVLA policy file at {path}")
            return MiniVLAPolicy.load(path)
        torch.manual_seed(seed)
        return MiniVLAPolicy(VLAConfig(**kwargs))
    raise ConfigError(f"unknown policy {name!r}; known: {POLICIES}")


def load_run_policy(path: str | Path):
    """The trained policy of a run folder (``checkpoint.pt``, else a MiniVLA ``policy.pt``) or file.

    A trainer checkpoint rebuilds the policy from its config (family, seed and starting
    weights ``policy_path``) and then loads the trained parameters.
    """
    path = Path(path)
    if path.is_dir():
        path = next((path / name for name in ("checkpoint.pt", "policy.pt") if (path / name).exists()),
                    path / "checkpoint.pt")
    if not path.exists():
        raise ConfigError(f"no checkpoint at {path}")
    state = torch.load(path, weights_only=False)
    if "state_dict" in state and "tokenizer" in state:  # a MiniVLA file (MiniVLAPolicy.save)
        return MiniVLAPolicy.from_saved(state)
    if "policy" not in state or "config" not in state:
        raise ConfigError(f"{path} is neither a training checkpoint nor a MiniVLA policy file")
    config = state["config"]
    family = config.get("family", config)  # flat: a checkpoint written before the config had groups
    policy = make_policy(family.get("policy", "grammar"), seed=config["seed"], path=family.get("policy_path"))
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
        return reference_responder(arg)
    if kind in GRAMMAR_POLICIES and arg in ("", "untrained"):
        return policy_responder(make_policy(kind, seed=seed), seed)
    return policy_responder(load_run_policy(spec), seed)


def libero_episode_policy(spec: str, seed: int = 0):
    """Resolve a LIBERO-Long ``--policy`` item into an episode policy for ``evaluate_libero``.

    ``scripted`` or ``scripted:<noise level>`` is the privileged-state controller; anything
    else is a MiniVLA run folder or file, acting greedily.
    """
    kind, _, level = spec.partition(":")
    if kind == "scripted":
        level = level or "clean"
        if level not in NOISE_LEVELS:
            raise ConfigError(f"unknown scripted noise level {level!r}; known: {sorted(NOISE_LEVELS)}")
        return ScriptedPolicy(NOISE_LEVELS[level], seed=seed)

    policy = load_run_policy(spec)
    if not isinstance(policy, MiniVLAPolicy):
        raise ConfigError(f"{spec} holds a {type(policy).__name__}, not a MiniVLA policy for LIBERO-Long")
    return VLAEpisodePolicy(policy, greedy=True, seed=seed)
