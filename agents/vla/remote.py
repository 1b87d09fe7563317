"""A MiniVLA policy on simulation workers (:mod:`wmrl_envs.libero.workers`).

* :class:`VLAWeights`: the pool payload of a policy, its saved form (:meth:`MiniVLAPolicy.save`:
  config, tokenizer, ``state_dict``) as bytes. A worker rebuilds the policy once per version, so
  the weights cross to each worker once per update.
* :class:`SampledEpisode`: one training episode, sampled from the shipped policy. Its randomness
  comes only from its seed, :func:`episode_seed` of (run seed, group id, member index): which
  worker runs it, and what that worker ran before, cannot change its actions or its outcome.
"""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import torch

from agents.base import Rollout
from agents.vla.policy import EpisodePrompt, MiniVLAPolicy


def episode_seed(seed: int, group_id: Hashable, member: int) -> int:
    """The sampling seed of member ``member`` of group ``group_id`` in a run seeded ``seed`` (64 bits)."""
    digest = hashlib.blake2b(f"{seed}/{group_id!r}/{member}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


@dataclass(frozen=True)
class VLAWeights:
    """A :class:`MiniVLAPolicy` as a pool payload (its :meth:`~MiniVLAPolicy.save` bytes)."""

    blob: bytes

    @classmethod
    def of(cls, policy: MiniVLAPolicy) -> VLAWeights:
        buffer = io.BytesIO()
        policy.save(buffer)  # type: ignore[arg-type]  # torch.save writes to any binary file object
        return cls(buffer.getvalue())

    def build(self) -> MiniVLAPolicy:
        return MiniVLAPolicy.from_saved(torch.load(io.BytesIO(self.blob), weights_only=True))


@dataclass(frozen=True)
class SampledEpisode:
    """One training episode of the shipped :class:`MiniVLAPolicy`, actions sampled.

    Attributes:
        task_index: The task (0-9).
        init_state: Its init state.
        group_id: The GRPO group the episode belongs to.
        member: The episode's index within its group.
        stream: The group's stream (``"real"``, ``"world_model"`` or ``"anchor"``): how far the
            episode runs and what the env scores (truncate-and-score, :mod:`wmrl_envs.libero.env`).
        seed: Seeds the episode's sampling (:func:`episode_seed`).
        shaped: Potential-shaped scoring (:mod:`wmrl_envs.scoring.shaping`): the episode runs to
            its end on any stream, and the success model reads ``Phi_0`` and ``Phi_T`` from it.
    """

    task_index: int
    init_state: int
    group_id: Hashable
    member: int
    stream: str
    seed: int
    shaped: bool = False

    def run(self, worker: Any) -> Rollout:
        """The rollout, its ``response`` the env's final info (with ``potential_start`` and
        ``wm_score_raw = Phi_T`` when shaped): raw scores that the driver's core turns into rewards."""
        env = worker.env_for("real" if self.shaped else self.stream)
        generator = torch.Generator().manual_seed(self.seed)
        with torch.no_grad():
            [rollout] = worker.policy.generate([EpisodePrompt(env, self.task_index, self.init_state)], 1,
                                               [self.group_id], generator)
        if self.shaped:
            start, cpu = time.perf_counter(), time.process_time()
            phi_start, phi_end = env.reward_model.potentials(env.trajectory())
            cost = dict(rollout.response["cost"])
            cost["world_model_s"] += time.perf_counter() - start
            cost["world_model_cpu_s"] += time.process_time() - cpu
            rollout.response = {**rollout.response, "wm_score_raw": phi_end, "potential_start": phi_start,
                                "cost": cost}
        return rollout
