"""The contract between the trainer and an environment family.

The trainer asks an adapter for the scored groups of one step. The adapter generates the
rollouts (its policy acts in its family's world) and scores them through the run's
:class:`~wmrl_envs.scoring.ScoringCore`, which decides every group's stream and returns
rewards already debiased and weighted. The adapter also charges its work to the compute
ledger. Family adapters live with their profiles in :mod:`trainers.families`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from agents.base import Policy, Rollout
from trainers.ledger import ComputeLedger
from wmrl_envs.scoring import InFlightAnchors, ScoredGroup, ScoringCore


@dataclass
class GroupOutcome:
    """One group of one step: its rollouts and how the core scored them (same order)."""

    rollouts: list[Rollout]
    scored: ScoredGroup

    @property
    def task_id(self) -> str:
        return self.scored.task_id

    @property
    def group_id(self) -> Hashable:
        return self.scored.group_id

    @property
    def stream(self) -> str:
        return self.scored.stream


@dataclass
class PendingAnchors:
    """A step's anchor groups in flight (asynchronous anchors): their rollouts, which keep the
    policy's log-probabilities at generation for the loss's importance ratio, and the core's record
    of their runs (:class:`~wmrl_envs.scoring.inflight.InFlightAnchors`)."""

    step: int
    rollouts: dict[Hashable, list[Rollout]]
    flight: InFlightAnchors

    def outcomes(self) -> list[GroupOutcome]:
        """The groups as scored so far (fused once landed)."""
        return [GroupOutcome(self.rollouts[g.group_id], g) for g in self.flight.scored]


class EnvAdapter(Protocol):
    """Collects a step's groups for the trainer."""

    task_ids: list[str]

    def collect(self, policy: Policy, task_ids: Sequence[str], group_ids: Sequence[Hashable], group_size: int,
                generator: torch.Generator, ledger: ComputeLedger, core: ScoringCore) -> list[GroupOutcome]:
        """Generate ``group_size`` rollouts per task and score them through ``core``."""
        ...

    def close(self) -> None: ...


def by_group(rollouts: Sequence[Rollout], group_ids: Sequence[Hashable]) -> dict[Hashable, list[Rollout]]:
    """Rollouts sorted into their groups, each group in generation order."""
    groups: dict[Hashable, list[Rollout]] = {g: [] for g in group_ids}
    for r in rollouts:
        groups[r.group_id].append(r)
    return groups
