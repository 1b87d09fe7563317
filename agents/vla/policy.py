"""MiniVLA: a small vision-language-action policy with OpenVLA-style action tokens.

Per step it reads the instruction (a frozen MiniLM embedding), the robot's proprio and the
object state (and, with ``use_images``, the third-person camera through a small CNN), and
outputs 7 x 256 logits: one categorical distribution per action dimension over the bins of
:class:`~agents.vla.tokenizer.ActionTokenizer`. The dimensions are independent given the
observation, so the log-probability of a step is the exact sum of its 7 token log-probs.

For the WMRL trainer (:class:`agents.base.Policy`) a *rollout is one episode*: its tokens
are the bins of every step (``7 * T`` log-probs), and a prompt is an :class:`EpisodePrompt`
(the env to roll out in, the task and the init state), handed out by
:class:`trainers.families.libero.LiberoAdapter`. The group advantage of an episode applies
to every one of its tokens.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from agents.base import Rollout, pad_logps
from agents.vla.tokenizer import ACTION_DIM, N_BINS, ActionTokenizer
from wmrl_envs.errors import ConfigError
from wmrl_envs.libero.embeddings import EMBEDDING_DIM, instruction_embeddings
from wmrl_envs.libero.sim import MAX_OBJECTS, PROPRIO_DIM, SLOT_DIM
from wmrl_envs.libero.tasks import SAMPLED_INIT_STATES_START, TASK_NAMES, task_index
from wmrl_envs.libero.trajectory import Trajectory

STATE_DIM = PROPRIO_DIM + MAX_OBJECTS * SLOT_DIM


@dataclass
class VLAConfig:
    """Architecture and sampling of :class:`MiniVLAPolicy`.

    Attributes:
        hidden: Width of the trunk.
        blocks: Residual MLP blocks in the trunk.
        use_images: Also encode ``agentview_image`` (needs ``obs_mode="both"``).
        temperature: Sampling temperature of :meth:`MiniVLAPolicy.generate`. Log-probs (``act``'s and
            ``log_probs``') are those of the tempered distribution the actions were drawn from, so
            the GRPO ratio and gradient belong to the policy that sampled (as TRL and verl do).
    """

    hidden: int = 256
    blocks: int = 2
    use_images: bool = False
    temperature: float = 1.0

    def __post_init__(self) -> None:
        if self.hidden < 8 or self.blocks < 0:
            raise ConfigError(f"need hidden >= 8 and blocks >= 0, got {self.hidden}, {self.blocks}")
        if not self.temperature > 0:
            raise ConfigError(f"temperature must be > 0, got {self.temperature}")


@dataclass
class EpisodePrompt:
    """One episode to roll out: ``env`` is an unwrapped :class:`~wmrl_envs.libero.env.LiberoLongEnv`.

    The episode's stream is the env's to decide, from the group id, through its scoring core.
    """

    env: Any
    task_index: int
    init_state: int


class _Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.mlp(self.norm(h))


class MiniVLAPolicy(nn.Module):
    """Instruction + state (+ image) -> 7 independent 256-way action-token distributions."""

    state_mean: torch.Tensor
    state_std: torch.Tensor

    def __init__(self, config: VLAConfig | None = None, tokenizer: ActionTokenizer | None = None) -> None:
        super().__init__()
        self.config = config or VLAConfig()
        self.tokenizer = tokenizer or ActionTokenizer.identity()
        width = self.config.hidden
        self.register_buffer("state_mean", torch.zeros(STATE_DIM))
        self.register_buffer("state_std", torch.ones(STATE_DIM))
        self.state_encoder = nn.Linear(STATE_DIM, width)
        self.instruction_encoder = nn.Linear(EMBEDDING_DIM, width)
        self.image_encoder: _ImageEncoder | None = _ImageEncoder(width) if self.config.use_images else None
        self.trunk = nn.Sequential(*[_Block(width) for _ in range(self.config.blocks)], nn.LayerNorm(width))
        self.head = nn.Linear(width, ACTION_DIM * N_BINS)

    # ------------------------------------------------------------------ model
    def forward(self, embedding: torch.Tensor, state: torch.Tensor, image: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``[B, 7, 256]`` from embeddings ``[B, 384]``, states ``[B, 96]`` and
        optional uint8 images ``[B, H, W, 3]``."""
        h = self.state_encoder((state - self.state_mean) / self.state_std) + self.instruction_encoder(embedding)
        if self.image_encoder is not None:
            if image is None:
                raise ConfigError("this policy encodes images: roll it out with obs_mode='both'")
            h = h + self.image_encoder(image)
        return self.head(self.trunk(nn.functional.gelu(h))).view(-1, ACTION_DIM, N_BINS)

    def fusion_probe_parameters(self) -> list[torch.Tensor]:
        """The action head: where the trainer's warmup compares per-sample gradients."""
        return [self.head.weight, self.head.bias]

    def set_state_normalisation(self, states: np.ndarray) -> None:
        """Standardise inputs with the statistics of ``states`` ``[N, 96]`` (from demonstrations)."""
        values = torch.as_tensor(np.asarray(states, np.float32))
        self.state_mean.copy_(values.mean(0))
        self.state_std.copy_(values.std(0).clamp_min(1e-3))

    # ------------------------------------------------------------------ acting
    @staticmethod
    def observation_inputs(observation: dict[str, Any]) -> tuple[np.ndarray, np.ndarray | None]:
        """The state vector ``[96]`` and the image (or None) of one env observation."""
        state = np.concatenate([observation["proprio"], np.asarray(observation["object_state"]).ravel()])
        return state.astype(np.float32), observation.get("agentview_image")

    @staticmethod
    def states_trajectory(rollout: Rollout) -> Trajectory:
        """The states a rollout's policy read (the inverse of :meth:`observation_inputs`), as a
        :class:`Trajectory` without actions or outcome, for models that read episodes."""
        states = rollout.tokens["state"].numpy()
        return Trajectory(task_index(rollout.task_id), int(rollout.meta["init_state"]), states[:, :PROPRIO_DIM],
                          states[:, PROPRIO_DIM:].reshape(len(states), MAX_OBJECTS, SLOT_DIM))

    @torch.no_grad()
    def act(self, observation: dict[str, Any], generator: torch.Generator | None = None,
            greedy: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One step: the action ``[7]``, its bins ``[7]`` and their log-probs ``[7]``."""
        embedding = torch.as_tensor(instruction_embeddings([observation["instruction"]]))
        state, image = self.observation_inputs(observation)
        image_t = None if image is None or self.image_encoder is None else torch.as_tensor(image[None])
        logp = torch.log_softmax(self(embedding, torch.as_tensor(state[None]), image_t)[0] / self.config.temperature,
                                 dim=-1)
        if greedy:
            bins = logp.argmax(-1)
        else:
            bins = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
        chosen = logp.gather(-1, bins[:, None]).squeeze(-1)
        bins_np = bins.numpy()
        return self.tokenizer.decode(bins_np).astype(np.float32), bins_np, chosen.numpy()

    def generate(self, prompts: Sequence[EpisodePrompt], group_size: int, group_ids: Sequence[Hashable],
                 generator: torch.Generator) -> list[Rollout]:
        """Roll out ``group_size`` episodes per prompt, in its env, sampling every action."""
        rollouts = []
        for prompt, group_id in zip(prompts, group_ids):
            for _ in range(group_size):
                rollouts.append(self._episode(prompt, group_id, generator))
        return rollouts

    def _episode(self, prompt: EpisodePrompt, group_id: Hashable, generator: torch.Generator) -> Rollout:
        env = prompt.env
        obs, info = env.reset(options={"task_id": prompt.task_index, "init_state": prompt.init_state,
                                       "group_id": group_id})
        states: list[np.ndarray] = []
        images: list[np.ndarray] = []
        bins: list[np.ndarray] = []
        logps: list[np.ndarray] = []
        terminated = truncated = False
        while not (terminated or truncated):
            state, image = self.observation_inputs(obs)
            action, step_bins, step_logp = self.act(obs, generator)
            states.append(state)
            if image is not None and self.image_encoder is not None:
                images.append(image)
            bins.append(step_bins)
            logps.append(step_logp)
            obs, _, terminated, truncated, info = env.step(action)
        tokens = {"embedding": torch.as_tensor(instruction_embeddings([obs["instruction"]])[0]),
                  "state": torch.as_tensor(np.stack(states)), "bins": torch.as_tensor(np.stack(bins)),
                  "image": torch.as_tensor(np.stack(images)) if images else None}
        return Rollout(task_id=TASK_NAMES[prompt.task_index], group_id=group_id, response=info, tokens=tokens,
                       logp=torch.as_tensor(np.concatenate(logps), dtype=torch.float32),
                       meta={"init_state": prompt.init_state, "steps": len(bins), "terminated": bool(terminated)})

    def log_probs(self, rollouts: Sequence[Rollout]) -> tuple[torch.Tensor, torch.Tensor]:
        """Differentiable log-probs ``[B, 7 * T_max]`` of every episode's tokens, and their mask."""
        rows = []
        for r in rollouts:
            tokens = r.tokens
            steps = tokens["state"].shape[0]
            logits = self(tokens["embedding"].expand(steps, -1), tokens["state"], tokens["image"])
            logp = torch.log_softmax(logits / self.config.temperature, dim=-1)
            logp = logp.gather(-1, tokens["bins"][..., None]).squeeze(-1)
            rows.append(logp.reshape(-1))
        return pad_logps(rows)

    def with_images(self) -> MiniVLAPolicy:
        """A copy that also reads the camera, acting exactly as this policy until trained.

        The image encoder's output layer starts at zero, so RL fine-tuning (with
        ``obs_mode="both"``) starts from this policy's behaviour; demonstrations carry no
        images, which is why the camera path is learnt by RL rather than cloned.
        """
        if self.image_encoder is not None:
            return copy.deepcopy(self)
        policy = MiniVLAPolicy(replace(self.config, use_images=True), self.tokenizer)
        missing, unexpected = policy.load_state_dict(self.state_dict(), strict=False)
        if unexpected or not all(k.startswith("image_encoder.") for k in missing):
            raise ConfigError(f"state policy does not match the image policy: {missing} {unexpected}")
        output = policy.image_encoder.net[-1]  # type: ignore[union-attr]  (use_images builds it)
        nn.init.zeros_(output.weight)
        nn.init.zeros_(output.bias)
        return policy

    # ------------------------------------------------------------------ files
    def save(self, path: str | Path) -> None:
        torch.save({"config": asdict(self.config), "tokenizer": self.tokenizer.state_dict(),
                    "state_dict": self.state_dict()}, path)

    @classmethod
    def load(cls, path: str | Path) -> MiniVLAPolicy:
        return cls.from_saved(torch.load(path, weights_only=True))

    @classmethod
    def from_saved(cls, blob: dict[str, Any]) -> MiniVLAPolicy:
        """The policy from the contents of a :meth:`save` file, already read."""
        policy = cls(VLAConfig(**blob["config"]), ActionTokenizer.from_state_dict(blob["tokenizer"]))
        policy.load_state_dict(blob["state_dict"])
        return policy


class _ImageEncoder(nn.Module):
    """A small CNN over an upright uint8 RGB frame, pooled to one vector."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 32, 5, stride=2, padding=2), nn.GELU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.GELU(),
            nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.GELU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, width))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.net(image.permute(0, 3, 1, 2).float() / 255.0)


class VLAEpisodePolicy:
    """A :class:`MiniVLAPolicy` behind the evaluator's episode interface (greedy by default)."""

    def __init__(self, policy: MiniVLAPolicy, greedy: bool = True, seed: int = 0) -> None:
        self.policy = policy
        self.greedy = greedy
        self.seed = seed
        self.generator = torch.Generator()

    def reset(self, env, task_index: int, init_state: int) -> None:
        self.generator.manual_seed(self.episode_seed(task_index, init_state))

    def episode_seed(self, task_index: int, init_state: int) -> int:
        """The sampling seed of one episode: distinct for every (seed, task, init state)."""
        if init_state < SAMPLED_INIT_STATES_START:
            # Official states (< 50) keep the seeds every earlier sampled run used.
            return self.seed * 10_000 + task_index * 100 + init_state
        # Sampled placements are unbounded, so digits would collide across tasks; hash instead.
        digest = hashlib.blake2b(f"{self.seed}/{task_index}/{init_state}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big")

    def act(self, observation: dict[str, Any]) -> np.ndarray:
        return self.policy.act(observation, self.generator, greedy=self.greedy)[0]
