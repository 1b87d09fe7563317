"""Configuration of :class:`trainers.wmrl.WMRLTrainer`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from wmrl_envs.errors import ConfigError

MODES = ("real", "world_model", "wmrl", "wmrl-no-debias", "wmrl-no-denoise")
#: Policy families that can act in each environment family.
ENV_POLICIES = {
    "wmrl/MLEDojo-v0": ("grammar", "lm"),
    "wmrl/DSBench-v0": ("grammar", "lm"),
    "wmrl/LIBERO-Long-v0": ("vla",),
}


@dataclass
class WMRLConfig:
    """Every knob of a WMRL (or baseline) training run.

    Modes:
        ``real``: GRPO with every group executed (the expensive baseline).
        ``world_model``: every group scored by the raw world model; no anchors, no correction.
        ``wmrl``: anchors + online debiasing (isotonic calibration) + inverse-variance denoising.
        ``wmrl-no-debias``: as ``wmrl`` but world-model samples use raw scores.
        ``wmrl-no-denoise``: as ``wmrl`` but anchor samples get weight 1.
    """

    mode: str = field(default="wmrl", metadata={"help": f"one of {MODES}"})
    env_id: str = field(default="wmrl/MLEDojo-v0", metadata={"help": "environment family to train on"})
    policy: str = field(default="grammar", metadata={
        "help": "policy family: 'grammar' (CPU default) or 'lm' for code envs, 'vla' for LIBERO-Long"})
    policy_path: str | None = field(default=None, metadata={
        "help": "starting weights: a local transformers checkpoint ('lm', required) or a MiniVLA "
                "policy.pt, e.g. from behaviour cloning ('vla'; default: a fresh policy)"})
    split: str = field(default="train", metadata={"help": "task split sampled for training"})
    task_ids: tuple[str, ...] | None = field(default=None, metadata={"help": "restrict training to these tasks"})
    steps: int = field(default=30, metadata={"help": "optimiser steps (one batch of groups each)"})
    tasks_per_step: int = field(default=8, metadata={"help": "B: groups (tasks) per step"})
    group_size: int = field(default=4, metadata={"help": "G: rollouts per group"})
    anchor_fraction: float = field(default=0.1, metadata={"help": "share of groups executed as anchors"})
    warmup_steps: int = field(default=2, metadata={"help": "steps that measure the fusion constant c"})
    warmup_anchor_fraction: float = field(default=0.5, metadata={"help": "anchor share during warmup"})
    learning_rate: float = field(default=3e-3, metadata={"help": "Adam learning rate"})
    max_grad_norm: float = field(default=1.0, metadata={"help": "gradient clipping norm"})
    update_epochs: int = field(default=1, metadata={"help": "policy updates per batch (PPO epochs)"})
    epsilon: float = field(default=0.2, metadata={"help": "lower clip range of the surrogate"})
    epsilon_high: float | None = field(default=None, metadata={"help": "upper clip range (default: epsilon)"})
    kl_coef: float = field(default=0.0, metadata={"help": "KL penalty to the initial policy (k3 estimator)"})
    advantage: str = field(default="std", metadata={"help": "'std' (GRPO) or 'mean' (Dr.GRPO)"})
    aggregation: str = field(default="sequence", metadata={"help": "loss aggregation (see trainers.grpo)"})
    w_max: float = field(default=4.0, metadata={"help": "upper clip of the anchor weight"})
    fusion_c: float | None = field(default=None, metadata={"help": "fix c instead of measuring it in warmup"})
    min_calibration_pairs: int = field(default=12, metadata={"help": "pairs before the isotonic map is used"})
    world_model: str = field(default="surrogate", metadata={"help": "world model name (code envs)"})
    wm_horizon: int = field(default=260, metadata={
        "help": "LIBERO-Long: steps a world-model episode runs before the success model scores it"})
    executor: str = field(default="bwrap", metadata={"help": "sandbox backend for executions"})
    workers: int | None = field(default=None, metadata={"help": "parallel executions (default: cores)"})
    seed: int = field(default=0, metadata={"help": "seeds policy init, sampling and the anchor schedule"})
    output_dir: str = field(default="runs/wmrl", metadata={"help": "run folder (metrics, checkpoints, plots)"})
    checkpoint_every: int = field(default=5, metadata={"help": "steps between checkpoints (0: only at the end)"})
    tensorboard: bool = field(default=True, metadata={"help": "write TensorBoard events when available"})

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {MODES}, got {self.mode!r}")
        for name in ("steps", "tasks_per_step", "group_size", "update_epochs"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ConfigError("group_size must be >= 2: group-relative advantages need a baseline")
        if self.warmup_steps < 0 or self.warmup_steps >= self.steps and self.uses_anchors:
            raise ConfigError(f"warmup_steps must be in [0, steps), got {self.warmup_steps}")
        for name in ("anchor_fraction", "warmup_anchor_fraction"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} must be in (0, 1], got {getattr(self, name)}")
        if not (self.learning_rate > 0 and math.isfinite(self.learning_rate)):
            raise ConfigError(f"learning_rate must be positive, got {self.learning_rate}")
        if self.w_max < 1.0:
            raise ConfigError(f"w_max must be >= 1, got {self.w_max}")
        if self.advantage not in ("std", "mean"):
            raise ConfigError(f"advantage must be 'std' or 'mean', got {self.advantage!r}")
        if self.uses_anchors and self.fusion_c is None and self.warmup_steps == 0:
            raise ConfigError("wmrl modes measure c in warmup: set warmup_steps >= 1 or give fusion_c")
        if self.fusion_c is not None and self.fusion_c < 0:
            raise ConfigError(f"fusion_c must be >= 0, got {self.fusion_c}")
        if self.min_calibration_pairs < 2:
            raise ConfigError("min_calibration_pairs must be >= 2")
        if self.task_ids is not None:
            self.task_ids = tuple(self.task_ids)
        families = ENV_POLICIES.get(self.env_id)
        if families is None:
            raise ConfigError(f"unknown env_id {self.env_id!r}; known: {sorted(ENV_POLICIES)}")
        if self.policy not in families:
            raise ConfigError(f"policy {self.policy!r} cannot act in {self.env_id}; use one of {families}")
        if self.policy == "lm" and not self.policy_path:
            raise ConfigError("the lm policy needs --policy-path pointing at a local transformers checkpoint")
        if self.wm_horizon < 1:
            raise ConfigError(f"wm_horizon must be >= 1, got {self.wm_horizon}")

    @property
    def uses_anchors(self) -> bool:
        return self.mode.startswith("wmrl")

    @property
    def debias(self) -> bool:
        return self.mode in ("wmrl", "wmrl-no-denoise")

    @property
    def denoise(self) -> bool:
        return self.mode in ("wmrl", "wmrl-no-debias")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "WMRLConfig":
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"unknown config field(s) {sorted(unknown)}")
        return cls(**data)
