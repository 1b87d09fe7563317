"""The LIBERO-Long success reward model: P(the episode succeeds | instruction, states so far).

This is the world model of the embodied half. It reads the instruction (its MiniLM
embedding) and the states of a trajectory, possibly only its first ``wm_horizon`` steps,
and predicts whether the *whole* episode ends in success. Reading a prefix is the point:
the rest of the rollout is never simulated.

Inputs are privileged simulator states (proprio and object slots, see :mod:`.sim`), not
frames: rendering costs about 10x the physics on CPU, and the state already holds what the
success check reads. A frame-based model is the natural upgrade on a GPU.

The state is summarised into :func:`trajectory_features` (where objects are now, how far
they moved and rose, where they sit relative to each other and to the gripper, how
closed the gripper was, how far into the episode the prefix reaches), concatenated with
the instruction embedding and scored by a small MLP. Inference is NumPy only: the shipped
artefact is an ``.npz`` of weights, about 0.5 MB. It is trained only on simulator data this
project generates (``scripts/build_libero_reward_model.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wmrl_envs.errors import ConfigError
from wmrl_envs.libero.embeddings import instruction_embeddings
from wmrl_envs.libero.sim import MAX_OBJECTS
from wmrl_envs.libero.trajectory import Trajectory
from wmrl_envs.paths import assets_dir

FEATURE_VERSION = 1
KEY_SLOTS = 4  # objects of interest come first in the slot order; libero_10 has at most 4
RECENT_STEPS = 10


def default_model_path() -> Path:
    return assets_dir() / "libero" / "success_model.npz"


def trajectory_features(trajectory: Trajectory, max_steps: int = 520) -> np.ndarray:
    """Fixed-size summary of a trajectory (or prefix) for the success model, float32."""
    objects, proprio = trajectory.object_state, trajectory.proprio
    first, last = objects[0], objects[-1]
    positions = objects[:, :, 1:4]  # [T, slots, xyz]
    key = last[:KEY_SLOTS, 1:4]
    pairs = [key[i] - key[j] for i in range(KEY_SLOTS) for j in range(i + 1, KEY_SLOTS)]
    eef = proprio[-1, :3]
    recent = positions[-RECENT_STEPS - 1:]
    finger_width = proprio[:, 6] - proprio[:, 7]
    return np.concatenate([
        [trajectory.steps / max_steps],
        proprio[-1],
        last.ravel(),
        (last[:, 1:4] - first[:, 1:4]).ravel(),  # displacement since the start
        (last[:, 8:] - first[:, 8:]).ravel(),  # joint change since the start (drawers, doors, knobs)
        np.concatenate(pairs),
        (key - eef).ravel(),
        positions[:, :, 2].max(axis=0) - first[:, 3],  # highest rise of each object
        np.abs(np.diff(recent, axis=0)).sum(axis=(0, 2)) if len(recent) > 1 else np.zeros(MAX_OBJECTS),
        [finger_width.mean(), finger_width[-1]],  # how much, and whether, the gripper holds
    ]).astype(np.float32)


@dataclass
class SuccessRewardModel:
    """A trained success model: feature standardisation and MLP weights (NumPy inference).

    Attributes:
        weights: ``W0, b0, W1, b1, ...`` of the MLP (ReLU between layers, sigmoid at the end).
        mean, std: Standardisation of the input vector (instruction embedding + features).
        max_steps: Episode budget the time feature is relative to.
        meta: Training facts carried in the artefact (data sizes, validation AUROC, ...).
    """

    weights: list[np.ndarray]
    mean: np.ndarray
    std: np.ndarray
    max_steps: int = 520
    meta: dict[str, str] | None = None

    @property
    def name(self) -> str:
        """Short content hash: calibrators keyed by it never mix two models' scores."""
        digest = hashlib.sha256()
        for w in self.weights:
            digest.update(np.ascontiguousarray(w).tobytes())
        return f"libero-success-{digest.hexdigest()[:10]}"

    def inputs(self, trajectories: Sequence[Trajectory]) -> np.ndarray:
        """The model's input rows: instruction embedding then trajectory features."""
        embeddings = instruction_embeddings([t.instruction for t in trajectories])
        features = np.stack([trajectory_features(t, self.max_steps) for t in trajectories])
        return np.concatenate([embeddings, features], axis=1)

    def predict(self, trajectories: Sequence[Trajectory]) -> np.ndarray:
        """P(success) of each trajectory's episode, ``[N]`` float64 in (0, 1)."""
        if not trajectories:
            return np.zeros(0)
        return self.predict_inputs(self.inputs(trajectories))

    def potentials(self, trajectory: Trajectory) -> tuple[float, float]:
        """``(Phi_0, Phi_T)``: P(success) read at the first state and from the whole trajectory, the
        two readings a potential-shaped return needs (:mod:`wmrl_envs.scoring.shaping`)."""
        start, end = self.predict([trajectory.prefix(0), trajectory])
        return float(start), float(end)

    def predict_inputs(self, x: np.ndarray) -> np.ndarray:
        h = (np.asarray(x, dtype=np.float32) - self.mean) / self.std
        for i in range(0, len(self.weights) - 2, 2):
            h = np.maximum(h @ self.weights[i] + self.weights[i + 1], 0.0)
        logits = (h @ self.weights[-2] + self.weights[-1]).reshape(-1).astype(np.float64)
        return np.exp(-np.logaddexp(0.0, -logits))  # the sigmoid, without overflow for very negative logits

    def save(self, path: str | Path) -> None:
        meta = dict(self.meta or {})
        arrays: dict[str, np.ndarray] = {f"w{i}": w for i, w in enumerate(self.weights)}
        arrays.update(mean=self.mean, std=self.std, max_steps=np.array(self.max_steps),
                      feature_version=np.array(FEATURE_VERSION), meta_keys=np.array(list(meta)),
                      meta_values=np.array([str(v) for v in meta.values()]))
        np.savez_compressed(path, **arrays)  # type: ignore[arg-type]  # numpy's stub misreads **kwargs


def load_reward_model(path: str | Path | None = None) -> SuccessRewardModel:
    """Load a success model artefact (default: the one shipped in ``assets/libero``)."""
    path = Path(path) if path is not None else default_model_path()
    if not path.exists():
        raise ConfigError(f"no LIBERO success model at {path}; build it with "
                          "`python scripts/build_libero_reward_model.py`")
    with np.load(path, allow_pickle=False) as data:
        if int(data["feature_version"]) != FEATURE_VERSION:
            raise ConfigError(f"{path} has feature version {int(data['feature_version'])}; "
                              f"this code reads version {FEATURE_VERSION}: rebuild it")
        n = sum(1 for k in data.files if k.startswith("w") and k[1:].isdigit())
        meta = dict(zip(data["meta_keys"].tolist(), data["meta_values"].tolist()))
        return SuccessRewardModel([data[f"w{i}"] for i in range(n)], data["mean"], data["std"],
                                  int(data["max_steps"]), meta)
