"""Adapter for OpenVLA-family checkpoints (OpenVLA, MiniVLA) with a GPU: the same WMRL trainer,
the same LIBERO adapter, a 1-7B-parameter policy.

**Untested here.** This machine has no GPU, no model hub and no VLA weights, so this file has
only been imported and type-checked, never run against a checkpoint. What it relies on,
from the checkpoints' published conventions:

* ``AutoModelForVision2Seq`` / ``AutoProcessor`` with ``trust_remote_code=True`` load a local
  checkpoint folder; the processor takes ``(prompt, PIL image)``.
* Prompt ``"In: What action should the robot take to {instruction}?\\nOut:"``.
* Action tokens are the last 256 ids of the language model's vocabulary: bin ``w`` in
  ``1..256`` of ``np.digitize(a, np.linspace(-1, 1, 256))`` is token ``vocab_size - w``, and
  decodes to the centre of bin ``w - 1`` of those 255 intervals.
* Actions are un-normalised with the checkpoint's ``norm_stats[unnorm_key]["action"]``
  (``q01``/``q99``; dimensions whose ``mask`` is false, the gripper, pass through).
* Images: the LIBERO fine-tunes of OpenVLA saw frames rotated 180 degrees from MuJoCo's
  read-back. This env's frames are already flipped upright (row 0 = top), so the adapter
  flips them left-right to match. Check this against your checkpoint's training pipeline.
* Gripper: those checkpoints emit an un-normalised g in [0, 1] with 1 = open; LIBERO wants
  -1 = open and +1 = closed, so g is binarised at 0.5 and mapped to -1/+1 inverted
  (``invert_gripper``; without it, ``2g - 1``).

Log-probabilities are exact under the policy this adapter samples from: the 7 action
tokens of a step are sampled one after another from the model's distribution restricted to
the 256 action ids, and :meth:`OpenVLAPolicy.log_probs` rescores them teacher-forced.

Usage (GPU)::

    policy = OpenVLAPolicy(OpenVLAConfig(path="/ckpt/openvla-7b-finetuned-libero-10"))
    adapter = LiberoAdapter(obs_mode="both")          # trainers.families.libero
    config = WMRLConfig.from_flat(mode="wmrl", env_id="wmrl/LIBERO-Long-v0", policy="vla", ...)
    WMRLTrainer(config, policy, adapter).train()

The trainer updates every parameter that requires grad; for a 7B model freeze most of it
(or wrap it with PEFT LoRA) before building the trainer.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from agents.base import Rollout, pad_logps
from agents.vla.policy import EpisodePrompt
from agents.vla.tokenizer import ACTION_DIM, GRIPPER, N_BINS
from wmrl_envs.errors import ConfigError
from wmrl_envs.libero.tasks import TASK_NAMES

PROMPT = "In: What action should the robot take to {instruction}?\nOut:"


@dataclass
class OpenVLAConfig:
    """Where the checkpoint is and how to run it.

    Attributes:
        path: Local checkpoint folder (Hugging Face layout with its custom code).
        unnorm_key: Dataset key of the checkpoint's action statistics.
        device: Torch device (a GPU).
        dtype: ``"bfloat16"`` or ``"float32"``.
        temperature: Sampling temperature of the action tokens.
        invert_gripper: Map the checkpoint's g = 1 (open) to LIBERO's -1 (open), binarised.
    """

    path: str
    unnorm_key: str = "libero_10_no_noops"
    device: str = "cuda"
    dtype: str = "bfloat16"
    temperature: float = 1.0
    invert_gripper: bool = True

    def __post_init__(self) -> None:
        if self.dtype not in ("bfloat16", "float32"):
            raise ConfigError(f"dtype must be 'bfloat16' or 'float32', got {self.dtype!r}")
        if not self.temperature > 0:
            raise ConfigError(f"temperature must be > 0, got {self.temperature}")


class OpenVLAPolicy(torch.nn.Module):
    """An OpenVLA-family checkpoint as an :class:`agents.base.Policy` on LIBERO-Long (images needed)."""

    def __init__(self, config: OpenVLAConfig) -> None:
        super().__init__()
        from transformers import AutoModelForVision2Seq, AutoProcessor  # type: ignore[attr-defined]  # noqa: PLC0415 - transformers is the optional [llm] extra

        self.config = config
        dtype = torch.bfloat16 if config.dtype == "bfloat16" else torch.float32
        self.processor = AutoProcessor.from_pretrained(config.path, trust_remote_code=True)
        self.model = AutoModelForVision2Seq.from_pretrained(config.path, torch_dtype=dtype,
                                                            trust_remote_code=True).to(config.device)
        stats = self.model.config.norm_stats[config.unnorm_key]["action"]
        self.low, self.high = np.asarray(stats["q01"], float), np.asarray(stats["q99"], float)
        self.normalised = np.asarray(stats.get("mask", [True] * 6 + [False]), bool)
        self.vocab_size = int(self.model.config.text_config.vocab_size)
        # Window index w = vocab_size - token for the 256 action ids; column j holds w = j + 1.
        self.action_ids = torch.arange(self.vocab_size - 1, self.vocab_size - 1 - N_BINS, -1, device=config.device)
        edges = np.linspace(-1.0, 1.0, N_BINS)
        self.centres = (edges[:-1] + edges[1:]) / 2.0

    # ------------------------------------------------------------------ tokens <-> actions
    def decode(self, columns: np.ndarray) -> np.ndarray:
        """Action-window columns ``[7]`` (bin w = column + 1) -> a LIBERO action ``[7]``."""
        normalised = self.centres[np.clip(columns, 0, N_BINS - 2)]
        action = np.where(self.normalised, self.low + (normalised + 1.0) / 2.0 * (self.high - self.low), normalised)
        g = action[GRIPPER]
        action[GRIPPER] = (1.0 if g < 0.5 else -1.0) if self.config.invert_gripper else 2.0 * g - 1.0
        return np.clip(action, -1.0, 1.0).astype(np.float32)

    def _inputs(self, instruction: str, image: np.ndarray) -> dict[str, torch.Tensor]:
        from PIL import Image  # noqa: PLC0415 - Pillow is no core dependency; only OpenVLA's image inputs need it

        frame = Image.fromarray(np.ascontiguousarray(image[:, ::-1]))  # upright -> OpenVLA's LIBERO frames
        inputs = self.processor(PROMPT.format(instruction=instruction), frame)
        return {k: v.to(self.config.device) for k, v in inputs.items()}

    # ------------------------------------------------------------------ acting
    @torch.no_grad()
    def act(self, observation: dict[str, Any], generator: torch.Generator | None = None,
            greedy: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sample the 7 tokens of one step; return the action, their columns and log-probs."""
        if "agentview_image" not in observation:
            raise ConfigError("OpenVLA reads images: use LiberoAdapter(obs_mode='both')")
        inputs = self._inputs(observation["instruction"], observation["agentview_image"])
        ids = inputs.pop("input_ids")
        columns, logps = [], []
        for _ in range(ACTION_DIM):
            logits = self.model(input_ids=ids, **inputs).logits[0, -1, self.action_ids].float()
            # The tempered distribution's log-probs, as log_probs recomputes them.
            logp = torch.log_softmax(logits / self.config.temperature, dim=-1)
            if greedy:
                column = int(logp.argmax())
            else:
                column = int(torch.multinomial(logp.exp().cpu(), 1, generator=generator))
            columns.append(column)
            logps.append(float(logp[column]))
            ids = torch.cat([ids, self.action_ids[column].view(1, 1)], dim=1)
        columns_np = np.array(columns)
        return self.decode(columns_np), columns_np, np.array(logps, dtype=np.float32)

    def generate(self, prompts: Sequence[EpisodePrompt], group_size: int, group_ids: Sequence[Hashable],
                 generator: torch.Generator) -> list[Rollout]:
        rollouts = []
        for prompt, group_id in zip(prompts, group_ids):
            for _ in range(group_size):
                obs, info = prompt.env.reset(options={"task_id": prompt.task_index, "init_state": prompt.init_state,
                                                      "group_id": group_id})
                images, columns, logps = [], [], []
                terminated = truncated = False
                while not (terminated or truncated):
                    action, step_columns, step_logp = self.act(obs, generator)
                    images.append(obs["agentview_image"])
                    columns.append(step_columns)
                    logps.append(step_logp)
                    obs, _, terminated, truncated, info = prompt.env.step(action)
                rollouts.append(Rollout(
                    task_id=TASK_NAMES[prompt.task_index], group_id=group_id, response=info,
                    tokens={"instruction": obs["instruction"], "images": np.stack(images), "columns": np.stack(columns)},
                    logp=torch.as_tensor(np.concatenate(logps)), meta={"init_state": prompt.init_state}))
        return rollouts

    def log_probs(self, rollouts: Sequence[Rollout]) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced log-probs of every step's 7 tokens (one forward per step)."""
        rows = []
        for r in rollouts:
            steps = []
            for image, columns in zip(r.tokens["images"], r.tokens["columns"]):
                inputs = self._inputs(r.tokens["instruction"], image)
                prompt_ids = inputs.pop("input_ids")
                chosen = self.action_ids[torch.as_tensor(columns, device=self.config.device)]
                ids = torch.cat([prompt_ids, chosen[None]], dim=1)
                logits = self.model(input_ids=ids, **inputs).logits[0, -ACTION_DIM - 1:-1][:, self.action_ids].float()
                logp = torch.log_softmax(logits / self.config.temperature, dim=-1)
                steps.append(logp.gather(-1, torch.as_tensor(columns, device=logp.device)[:, None]).squeeze(-1))
            rows.append(torch.cat(steps).cpu())
        return pad_logps(rows)
