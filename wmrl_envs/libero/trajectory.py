"""The record of one LIBERO-Long episode that reward models, datasets and BC read.

Index 0 of the state arrays is the state the policy first sees (after the no-op wait
steps); ``actions[t]`` moves ``states[t]`` to ``states[t + 1]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from wmrl_envs.libero.sim import MAX_OBJECTS, PROPRIO_DIM, SLOT_DIM
from wmrl_envs.libero.tasks import INSTRUCTIONS


@dataclass
class Trajectory:
    """States and actions of one episode (or of its prefix).

    Attributes:
        task_index: libero_10 task, 0-9.
        init_state: Which of the task's 50 init states it started from (-1: another state).
        proprio: ``[T + 1, 8]`` end-effector pose and finger joints.
        object_state: ``[T + 1, MAX_OBJECTS, SLOT_DIM]`` object slots (see :mod:`.sim`).
        actions: ``[T, 7]`` actions in [-1, 1].
        success: Whether the simulator's success check held at the end (None: unknown).
        source: Where it came from ("scripted", "teleport", "policy", ...), for datasets.
    """

    task_index: int
    init_state: int
    proprio: np.ndarray
    object_state: np.ndarray
    actions: np.ndarray = field(default_factory=lambda: np.zeros((0, 7), dtype=np.float32))
    success: bool | None = None
    source: str = ""

    def __post_init__(self) -> None:
        self.proprio = np.asarray(self.proprio, dtype=np.float32).reshape(-1, PROPRIO_DIM)
        self.object_state = np.asarray(self.object_state, dtype=np.float32).reshape(-1, MAX_OBJECTS, SLOT_DIM)
        self.actions = np.asarray(self.actions, dtype=np.float32).reshape(-1, 7)
        if len(self.proprio) != len(self.object_state) or len(self.proprio) < 1:
            raise ValueError(f"proprio has {len(self.proprio)} states, object_state {len(self.object_state)}")

    @property
    def instruction(self) -> str:
        return INSTRUCTIONS[self.task_index]

    @property
    def steps(self) -> int:
        """Policy steps taken (states minus one)."""
        return len(self.proprio) - 1

    def prefix(self, steps: int) -> Trajectory:
        """The first ``steps`` policy steps; the outcome of the prefix is unknown."""
        steps = min(steps, self.steps)
        return Trajectory(self.task_index, self.init_state, self.proprio[:steps + 1],
                          self.object_state[:steps + 1], self.actions[:steps], None, self.source)


def save_trajectories(path: str | Path, trajectories: Sequence[Trajectory]) -> None:
    """Write trajectories to one compressed ``.npz`` (ragged arrays concatenated with offsets),
    creating its folder."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    lengths = np.array([t.steps for t in trajectories], dtype=np.int64)
    np.savez_compressed(
        path,
        task_index=np.array([t.task_index for t in trajectories], dtype=np.int64),
        init_state=np.array([t.init_state for t in trajectories], dtype=np.int64),
        success=np.array([-1 if t.success is None else int(t.success) for t in trajectories], dtype=np.int64),
        source=np.array([t.source for t in trajectories]),
        lengths=lengths,
        proprio=np.concatenate([t.proprio for t in trajectories]),
        object_state=np.concatenate([t.object_state for t in trajectories]),
        actions=np.concatenate([t.actions for t in trajectories]),
    )


def load_trajectories(path: str | Path) -> list[Trajectory]:
    """Read what :func:`save_trajectories` wrote."""
    with np.load(path, allow_pickle=False) as data:
        lengths = data["lengths"]
        state_ends = np.cumsum(lengths + 1)
        action_ends = np.cumsum(lengths)
        proprio, objects, actions = data["proprio"], data["object_state"], data["actions"]
        out = []
        for i, n in enumerate(lengths):
            s0, a0 = state_ends[i] - n - 1, action_ends[i] - n
            success = int(data["success"][i])
            out.append(Trajectory(int(data["task_index"][i]), int(data["init_state"][i]),
                                  proprio[s0:state_ends[i]], objects[s0:state_ends[i]],
                                  actions[a0:action_ends[i]], None if success < 0 else bool(success),
                                  str(data["source"][i])))
    return out
