"""Anchor schedules: which groups are executed as anchors (the anchor rule lives here only).

A schedule maps a group id to the group's stream. Every member of a group shares it, so a
GRPO group is compared within one stream.

* :class:`HashSchedule`, the default of ``gym.make(..., reward="fused")``: a group is an anchor
  when a hash of (seed, group id) falls below ``anchor_fraction``. It needs no coordination,
  so every process (and every worker of a TRL or verl run) takes the same decision for a group.
* :class:`StepSchedule`, the trainer's: per training step of ``groups_per_step`` groups with
  ids ``step * groups_per_step + j``, exactly ``max(1, round(fraction * groups_per_step))``
  anchors drawn from (seed, step); a warmup phase may use a larger fraction. An env user who
  injects it (``gym.make(..., schedule=trainer.core.schedule)``) gets the trainer's streams.
* :class:`ConstantSchedule`: one stream for every group (``real`` GRPO, the raw world model).

Schedules are small, picklable and deterministic: the stream of a group never depends on
the order in which groups are scored.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol, runtime_checkable

import numpy as np

from wmrl_envs.errors import ConfigError
from wmrl_envs.scoring.results import STREAMS

# Mixed into the step schedule's generator so its anchor draws never coincide with the
# trainer's task draws, which also seed on (seed, step).
_ANCHOR_STREAM = 0xA7C0


@runtime_checkable
class AnchorSchedule(Protocol):
    """Decides the stream of a group from its id."""

    def stream(self, group_id: Hashable) -> str:
        """``"anchor"``, ``"world_model"`` or ``"real"``."""
        ...


def _check_fraction(name: str, value: float) -> None:
    if not 0.0 < value <= 1.0:
        raise ConfigError(f"{name} must be in (0, 1], got {value}")


@dataclass(frozen=True)
class ConstantSchedule:
    """Every group on ``stream_name`` (``"real"`` or ``"world_model"``)."""

    stream_name: str

    def __post_init__(self) -> None:
        if self.stream_name not in ("real", "world_model"):
            raise ConfigError(f"a constant schedule is 'real' or 'world_model', got {self.stream_name!r}")

    def stream(self, group_id: Hashable) -> str:
        return self.stream_name


@dataclass(frozen=True)
class HashSchedule:
    """A group is an anchor when ``sha256(f"{seed}:{group_id!r}")`` falls below ``anchor_fraction``.

    Group ids are compared by ``repr``, so ints, strings and tuples such as
    ``(global_step, prompt_uid)`` all work and give the same decision in every process.
    """

    anchor_fraction: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        _check_fraction("anchor_fraction", self.anchor_fraction)

    def stream(self, group_id: Hashable) -> str:
        digest = hashlib.sha256(f"{self.seed}:{group_id!r}".encode()).digest()
        return "anchor" if int.from_bytes(digest[:8], "big") / 2**64 < self.anchor_fraction else "world_model"


@dataclass(frozen=True)
class StepSchedule:
    """The trainer's schedule: a fixed number of anchor groups per step, drawn from (seed, step).

    Attributes:
        groups_per_step: Groups per training step; group ``j`` of step ``s`` has id
            ``s * groups_per_step + j``.
        anchor_fraction: Share of anchor groups after warmup.
        seed: Seeds the draw (with the step).
        warmup_steps: Steps that use ``warmup_anchor_fraction`` instead.
        warmup_anchor_fraction: Anchor share during warmup (default: ``anchor_fraction``).
    """

    groups_per_step: int
    anchor_fraction: float = 0.1
    seed: int = 0
    warmup_steps: int = 0
    warmup_anchor_fraction: float | None = None

    def __post_init__(self) -> None:
        if self.groups_per_step < 1:
            raise ConfigError(f"groups_per_step must be >= 1, got {self.groups_per_step}")
        if self.warmup_steps < 0:
            raise ConfigError(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        _check_fraction("anchor_fraction", self.anchor_fraction)
        if self.warmup_anchor_fraction is not None:
            _check_fraction("warmup_anchor_fraction", self.warmup_anchor_fraction)

    def group_ids(self, step: int) -> list[int]:
        """The ids of step ``step``'s groups, in order."""
        return [step * self.groups_per_step + j for j in range(self.groups_per_step)]

    def fraction(self, step: int) -> float:
        """The anchor share of step ``step``."""
        if step < self.warmup_steps and self.warmup_anchor_fraction is not None:
            return self.warmup_anchor_fraction
        return self.anchor_fraction

    def streams(self, step: int) -> list[str]:
        """The stream of each of step ``step``'s groups, in order; at least one anchor."""
        anchors = _anchor_positions(self, step)
        return ["anchor" if j in anchors else "world_model" for j in range(self.groups_per_step)]

    def stream(self, group_id: Hashable) -> str:
        if not isinstance(group_id, (int, np.integer)) or isinstance(group_id, bool) or group_id < 0:
            raise ConfigError(f"a step schedule's group ids are the ints of group_ids(step), got {group_id!r}")
        step, j = divmod(int(group_id), self.groups_per_step)
        return "anchor" if j in _anchor_positions(self, step) else "world_model"


@lru_cache(maxsize=256)
def _anchor_positions(schedule: StepSchedule, step: int) -> frozenset[int]:
    n = schedule.groups_per_step
    n_anchor = min(n, max(1, round(schedule.fraction(step) * n)))
    rng = np.random.default_rng([schedule.seed, step, _ANCHOR_STREAM])
    return frozenset(rng.choice(n, size=n_anchor, replace=False).tolist())


def check_stream(stream: str) -> str:
    """``stream`` if it is a known stream name, else a :class:`ConfigError`."""
    if stream not in STREAMS:
        raise ConfigError(f"stream must be one of {STREAMS}, got {stream!r}")
    return stream
