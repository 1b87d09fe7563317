"""Behaviour cloning of :class:`~agents.vla.policy.MiniVLAPolicy` from recorded episodes.

Every step of every demonstration is one example: (instruction, state) -> the 7 action
bins, trained with cross-entropy (the exact negative log-likelihood of the step's tokens).
The tokenizer's percentile bounds and the state normalisation are fitted on the
demonstrations first, as OpenVLA fits its action statistics per dataset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from agents.vla.policy import MiniVLAPolicy, VLAConfig
from agents.vla.tokenizer import ActionTokenizer
from wmrl_envs.errors import ConfigError
from wmrl_envs.libero.embeddings import instruction_embeddings
from wmrl_envs.libero.trajectory import Trajectory


@dataclass
class BCConfig:
    """Behaviour-cloning settings.

    Attributes:
        epochs: Passes over all demonstration steps.
        batch_size: Steps per optimiser step.
        learning_rate: AdamW learning rate (cosine-decayed to 10% over training).
        weight_decay: AdamW weight decay.
        seed: Seeds initialisation and batch order.
    """

    epochs: int = 30
    batch_size: int = 512
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    seed: int = 0

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or not self.learning_rate > 0:
            raise ConfigError(f"invalid BC settings: {self}")


def demonstration_steps(demos: Sequence[Trajectory]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per step: the task index, the state ``[96]`` and the action ``[7]``, stacked."""
    tasks, states, actions = [], [], []
    for d in demos:
        steps = d.steps
        tasks.append(np.full(steps, d.task_index))
        states.append(np.concatenate([d.proprio[:steps], d.object_state[:steps].reshape(steps, -1)], axis=1))
        actions.append(d.actions)
    return np.concatenate(tasks), np.concatenate(states).astype(np.float32), np.concatenate(actions)


def behaviour_clone(demos: Sequence[Trajectory], config: BCConfig | None = None,
                    vla_config: VLAConfig | None = None, progress: bool = False) -> tuple[MiniVLAPolicy, list[float]]:
    """Train a fresh policy on ``demos``; return it and the mean loss of each epoch."""
    config = config or BCConfig()
    if not demos:
        raise ConfigError("behaviour cloning needs at least one demonstration")
    torch.manual_seed(config.seed)
    tasks, states, actions = demonstration_steps(demos)
    tokenizer = ActionTokenizer.fit(actions)
    policy = MiniVLAPolicy(vla_config, tokenizer)
    if policy.image_encoder is not None:
        raise ConfigError("behaviour_clone trains state policies; image demonstrations are not recorded")
    policy.set_state_normalisation(states)
    table = torch.as_tensor(instruction_embeddings([d.instruction for d in _one_per_task(demos)]))
    index = {t: i for i, t in enumerate(sorted({d.task_index for d in demos}))}
    task_rows = torch.as_tensor([index[t] for t in tasks])
    states_t = torch.as_tensor(states)
    bins = torch.as_tensor(tokenizer.encode(actions))

    optimizer = torch.optim.AdamW(policy.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    batches = -(-len(states_t) // config.batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=config.epochs * batches,
                                                          eta_min=0.1 * config.learning_rate)
    generator = torch.Generator().manual_seed(config.seed)
    losses = []
    for epoch in range(config.epochs):
        total = 0.0
        for idx in torch.randperm(len(states_t), generator=generator).split(config.batch_size):
            logits = policy(table[task_rows[idx]], states_t[idx])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), bins[idx].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            total += loss.item() * len(idx)
        losses.append(total / len(states_t))
        if progress:
            print(f"bc epoch {epoch + 1}/{config.epochs}: loss {losses[-1]:.4f}", flush=True)
    return policy, losses


def _one_per_task(demos: Sequence[Trajectory]) -> list[Trajectory]:
    first: dict[int, Trajectory] = {}
    for d in demos:
        first.setdefault(d.task_index, d)
    return [first[t] for t in sorted(first)]
