"""The contract between policies and the WMRL trainer.

The trainer knows nothing about text or robots. A policy turns *prompts* (whatever its
environment family hands it: a task for code agents, an observation stream for a VLA) into
:class:`Rollout` objects that carry the sampled decisions and their log-probabilities, and
it can recompute those log-probabilities differentiably. A code agent's rollout is one
response (a few or a few hundred tokens); a VLA rollout is a whole episode, many steps of
several action tokens each. Both are just a row of log-probs to the trainer.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch


@dataclass
class Rollout:
    """One sampled trajectory.

    Attributes:
        task_id: Task the rollout answers.
        group_id: GRPO group it belongs to (advantages are computed within a group).
        response: What the reward consumes (response text for code agents; for a VLA the
            episode outcome is filled in by the environment adapter).
        tokens: Whatever :meth:`Policy.log_probs` needs to rescore the rollout (choice
            indices, token ids, action bins), on CPU.
        logp: Log-probabilities of ``tokens`` under the sampling policy, shape ``[T]``, detached.
        meta: Free-form details for logging (rendered choices, generation time, ...).
    """

    task_id: str
    group_id: Hashable
    response: Any
    tokens: Any
    logp: torch.Tensor
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def length(self) -> int:
        return int(self.logp.numel())


class Policy(Protocol):
    """A trainable policy. Implementations are ``torch.nn.Module`` subclasses."""

    def generate(self, prompts: Sequence[Any], group_size: int, group_ids: Sequence[Hashable],
                 generator: torch.Generator) -> list[Rollout]:
        """Sample ``group_size`` rollouts for each prompt, batched; ``len(prompts) * group_size`` results."""
        ...

    def log_probs(self, rollouts: Sequence[Rollout]) -> tuple[torch.Tensor, torch.Tensor]:
        """Differentiable log-probs ``[B, T]`` of the rollouts' tokens and their 0/1 mask ``[B, T]``."""
        ...

    def parameters(self) -> Iterator[torch.nn.Parameter]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> Any: ...


def pad_logps(rows: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad 1-D log-prob rows into ``[B, T]`` with a 0/1 mask (shared by every policy)."""
    padded = torch.nn.utils.rnn.pad_sequence(list(rows), batch_first=True)
    lengths = torch.tensor([int(r.numel()) for r in rows])
    mask = (torch.arange(padded.shape[1])[None, :] < lengths[:, None]).float()
    return padded, mask
