"""The LIBERO pieces that need no simulator: action tokens, the MiniVLA policy and its exact
log-probs, behaviour cloning, trajectory files and the success model's inference path.

A fake env with LIBERO's observation layout stands in for the simulator, so the VLA's
``generate`` -> ``log_probs`` -> WMRL trainer path runs in seconds.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents.vla.bc import BCConfig, behaviour_clone
from agents.vla.policy import EpisodePrompt, MiniVLAPolicy, VLAConfig
from agents.vla.tokenizer import N_BINS, ActionTokenizer
from trainers.adapters import GroupOutcome
from trainers.wmrl import WMRLTrainer
from trainers.wmrl_config import WMRLConfig
from wmrl_envs.errors import ConfigError
from wmrl_envs.libero.embeddings import instruction_embeddings
from wmrl_envs.libero.reward_model import SuccessRewardModel, trajectory_features
from wmrl_envs.libero.sim import MAX_OBJECTS, SLOT_DIM
from wmrl_envs.libero.tasks import INSTRUCTIONS, TASK_NAMES, task_index
from wmrl_envs.libero.trajectory import Trajectory, load_trajectories, save_trajectories
from wmrl_envs.scoring import ScoredGroup, ScoreResult


def test_tokenizer_round_trip_within_half_a_bin():
    rng = np.random.default_rng(0)
    actions = np.clip(rng.normal(0, 0.4, (2000, 7)), -1, 1)
    actions[:, 6] = rng.choice([-1.0, 1.0], 2000)
    tok = ActionTokenizer.fit(actions)
    bins = tok.encode(actions)
    assert bins.dtype == np.int64 and bins.min() >= 0 and bins.max() <= N_BINS - 1
    inside = np.all((actions >= tok.low) & (actions <= tok.high), axis=1)
    error = np.abs(tok.normalise(tok.decode(bins)) - tok.normalise(actions))[inside]
    assert error.max() <= 1.0 / N_BINS + 1e-9  # half a bin of the normalised range
    assert set(np.unique(bins[:, 6])) == {0, N_BINS - 1}  # gripper: not normalised, open/closed
    assert np.allclose(tok.decode(tok.encode(np.array([[0, 0, 0, 0, 0, 0, 1.0]])))[0, 6], 1.0, atol=1e-2)
    with pytest.raises(ConfigError):
        ActionTokenizer(np.zeros(7), np.zeros(7))


def observation(step: int = 0, task: int = 0) -> dict:
    rng = np.random.default_rng(step)
    return {"instruction": INSTRUCTIONS[task], "proprio": rng.normal(0, 1, 8).astype(np.float32),
            "object_state": rng.normal(0, 1, (MAX_OBJECTS, SLOT_DIM)).astype(np.float32)}


class FakeEnv:
    """LIBERO's observation and info layout; success when the mean gripper action is closed.

    Like the real env it asks a scoring core for the stream of the episode's group, and its last
    info carries the episode's ScoreResult (left for the adapter to fuse).
    """

    def __init__(self, steps: int = 6, core=None) -> None:
        self.steps, self.core = steps, core

    def reset(self, options):
        self.t, self.task, self.closed = 0, options["task_id"], []
        self.stream = self.core.streams([options["group_id"]])[0] if self.core else "real"
        return observation(0, self.task), {}

    def step(self, action):
        self.t += 1
        self.closed.append(action[6] > 0)
        done = self.t >= self.steps
        success = float(np.mean(self.closed) > 0.5)
        result = None
        if done:
            result = ScoreResult(TASK_NAMES[self.task], self.stream, valid=True,
                                 real_score=success if self.stream != "world_model" else None,
                                 wm_score_raw=0.2 + 0.6 * success if self.stream != "real" else None,
                                 cost={"simulation_s": 0.01 * self.t, "simulation_cpu_s": 0.01 * self.t,
                                       "simulation_steps": self.t + 10, "world_model_s": 0.001})
        info = {"step": self.t, "result": result}
        return observation(self.t, self.task), 0.0, False, done, info


def test_policy_log_probs_are_exactly_the_sampled_ones():
    torch.manual_seed(0)
    policy = MiniVLAPolicy(VLAConfig(hidden=32, blocks=1))
    rollouts = policy.generate([EpisodePrompt(FakeEnv(), 3, 0)], group_size=2, group_ids=[7],
                               generator=torch.Generator().manual_seed(0))
    assert len(rollouts) == 2 and rollouts[0].task_id == TASK_NAMES[3] and rollouts[0].length == 6 * 7
    logp, mask = policy.log_probs(rollouts)
    assert logp.shape == mask.shape == (2, 42) and mask.all()
    assert torch.allclose(logp, torch.stack([r.logp for r in rollouts]), atol=1e-5)
    logp.sum().backward()
    assert policy.head.weight.grad is not None


def test_log_probs_are_those_of_the_tempered_distribution_that_sampled():
    # A ratio or gradient of untempered log-probs under tempered sampling belongs to no policy.
    torch.manual_seed(0)
    policy = MiniVLAPolicy(VLAConfig(hidden=32, blocks=1, temperature=0.5))
    rollouts = policy.generate([EpisodePrompt(FakeEnv(), 3, 0)], group_size=2, group_ids=[7],
                               generator=torch.Generator().manual_seed(0))
    logp, _ = policy.log_probs(rollouts)
    assert torch.allclose(logp, torch.stack([r.logp for r in rollouts]), atol=1e-5)
    obs = observation(0, 3)
    with torch.no_grad():
        logits = policy(torch.as_tensor(instruction_embeddings([obs["instruction"]])),
                        torch.as_tensor(MiniVLAPolicy.observation_inputs(obs)[0][None]))[0]
    _, bins, chosen = policy.act(obs, generator=torch.Generator().manual_seed(1))
    tempered = torch.log_softmax(logits / 0.5, dim=-1)[torch.arange(7), torch.as_tensor(bins)]
    np.testing.assert_allclose(chosen, tempered.numpy(), atol=1e-5)
    assert not np.allclose(chosen, torch.log_softmax(logits, dim=-1)[torch.arange(7), torch.as_tensor(bins)].numpy())


def test_image_policy_encodes_frames():
    policy = MiniVLAPolicy(VLAConfig(hidden=16, blocks=0, use_images=True))
    obs = {**observation(), "agentview_image": np.zeros((32, 32, 3), np.uint8)}
    action, bins, logp = policy.act(obs, greedy=True)
    assert action.shape == bins.shape == logp.shape == (7,)
    with pytest.raises(ConfigError):
        policy.act(observation())


def test_with_images_starts_as_the_state_policy_and_learns_from_frames():
    torch.manual_seed(0)
    state_policy = MiniVLAPolicy(VLAConfig(hidden=16, blocks=1))
    policy = state_policy.with_images()
    assert policy.config.use_images and policy.image_encoder is not None
    obs = {**observation(2), "agentview_image": np.random.default_rng(0).integers(0, 255, (32, 32, 3), np.uint8)}
    embedding, state = torch.zeros(1, 384), torch.as_tensor(MiniVLAPolicy.observation_inputs(obs)[0][None])
    image = torch.as_tensor(obs["agentview_image"][None])
    assert torch.allclose(policy(embedding, state, image), state_policy(embedding, state), atol=1e-6)
    policy(embedding, state, image).logsumexp(-1).sum().backward()
    assert policy.image_encoder.net[-1].weight.grad.abs().sum() > 0  # the camera path is trainable


def test_save_and_load_keep_the_policy(tmp_path):
    policy = MiniVLAPolicy(VLAConfig(hidden=16, blocks=1), ActionTokenizer(-0.5 * np.ones(7), np.ones(7)))
    policy.save(tmp_path / "vla.pt")
    again = MiniVLAPolicy.load(tmp_path / "vla.pt")
    obs = observation(3)
    assert np.array_equal(policy.act(obs, greedy=True)[0], again.act(obs, greedy=True)[0])


def demo(task: int, steps: int = 30, seed: int = 0) -> Trajectory:
    """The 'expert' moves along x when the first object's x is positive, else along -x."""
    rng = np.random.default_rng(seed)
    objects = rng.normal(0, 1, (steps + 1, MAX_OBJECTS, SLOT_DIM)).astype(np.float32)
    actions = np.zeros((steps, 7), np.float32)
    actions[:, 0] = np.where(objects[:-1, 0, 1] > 0, 0.8, -0.8)
    actions[:, 6] = np.where(objects[:-1, 0, 2] > 0, 1.0, -1.0)
    return Trajectory(task, 0, rng.normal(0, 1, (steps + 1, 8)), objects, actions, True, "test")


def test_behaviour_cloning_learns_a_state_dependent_expert():
    demos = [demo(t % 2, seed=s) for t, s in zip(range(20), range(20))]
    policy, losses = behaviour_clone(demos, BCConfig(epochs=40, batch_size=128, learning_rate=3e-3),
                                     VLAConfig(hidden=64, blocks=1))
    assert losses[-1] < 0.5 * losses[0]
    test = demo(0, seed=99)
    hits = [np.sign(policy.act({"instruction": test.instruction, "proprio": test.proprio[t],
                                "object_state": test.object_state[t]}, greedy=True)[0][0]) == np.sign(test.actions[t, 0])
            for t in range(test.steps)]
    assert np.mean(hits) > 0.8


class FakeAdapter:
    """The LIBERO adapter's contract on the fake env (the real one is in the integration tests)."""

    task_ids = list(TASK_NAMES[:3])

    def collect(self, policy, task_ids, group_ids, group_size, generator, ledger, core):
        prompts = [EpisodePrompt(FakeEnv(core=core), task_index(t), 0) for t in task_ids]
        rollouts = policy.generate(prompts, group_size, group_ids, generator)
        ledger.add("simulation", 0.1, 0.1, count=16 * len(rollouts))
        out = []
        for t, g, s in zip(task_ids, group_ids, core.streams(group_ids)):
            rs = [r for r in rollouts if r.group_id == g]
            out.append(GroupOutcome(rs, ScoredGroup(t, g, s, [r.response["result"] for r in rs])))
        core.fuse([o.scored for o in out])
        return out

    def close(self):
        pass


def test_vla_trains_through_the_shared_wmrl_trainer(tmp_path):
    torch.manual_seed(0)
    policy = MiniVLAPolicy(VLAConfig(hidden=32, blocks=1))
    before = policy.head.weight.detach().clone()
    config = WMRLConfig.from_flat(mode="wmrl", steps=4, tasks_per_step=3, group_size=3, warmup_steps=1,
                                  calibration_min_pairs_global=4, output_dir=str(tmp_path), tensorboard=False,
                                  checkpoint_every=0)
    history = WMRLTrainer(config, policy, FakeAdapter()).train(progress=False)
    assert not torch.equal(before, policy.head.weight)
    assert history[-1]["cost/simulation_count"] > 0 and "fusion/w_anchor" in history[-1]


def test_a_policy_trained_in_part_keeps_its_frozen_weights_and_measures_c(tmp_path):
    torch.manual_seed(0)
    policy = MiniVLAPolicy(VLAConfig(hidden=32, blocks=1))
    for name, param in policy.named_parameters():  # as `libero_vla.py finetune --train 'bias|norm'`
        param.requires_grad_("bias" in name or "norm" in name)
    frozen = {n: p.detach().clone() for n, p in policy.named_parameters() if not p.requires_grad}
    trained = {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}
    assert "head.weight" in frozen  # the warmup's usual probe is frozen: it falls back to trained ones
    config = WMRLConfig.from_flat(mode="wmrl", steps=4, tasks_per_step=3, group_size=3, warmup_steps=1,
                                  calibration_min_pairs_global=4, output_dir=str(tmp_path), tensorboard=False,
                                  checkpoint_every=0, fusion_rule="eta2")  # the rule that measures c
    trainer = WMRLTrainer(config, policy, FakeAdapter())
    trainer.train(progress=False)
    params = dict(policy.named_parameters())
    assert all(torch.equal(params[n], v) for n, v in frozen.items())
    assert any(not torch.equal(params[n], v) for n, v in trained.items())
    assert trainer.c is not None


def test_trajectory_files_round_trip(tmp_path):
    trajectories = [demo(1, steps=5), demo(4, steps=9, seed=2)]
    trajectories[1].success = None
    save_trajectories(tmp_path / "t.npz", trajectories)
    loaded = load_trajectories(tmp_path / "t.npz")
    for a, b in zip(trajectories, loaded):
        assert (a.task_index, a.init_state, a.success, a.source) == (b.task_index, b.init_state, b.success, b.source)
        assert np.array_equal(a.object_state, b.object_state) and np.array_equal(a.actions, b.actions)
    assert loaded[1].prefix(3).steps == 3 and loaded[1].prefix(3).success is None


def test_success_model_inference_and_files(tmp_path):
    rng = np.random.default_rng(0)
    width = 384 + len(trajectory_features(demo(0)))
    assert len(trajectory_features(demo(0, steps=3))) == len(trajectory_features(demo(0, steps=300)))
    weights = [rng.normal(0, 0.05, (width, 16)).astype(np.float32), np.zeros(16, np.float32),
               rng.normal(0, 0.5, (16, 1)).astype(np.float32), np.zeros(1, np.float32)]
    model = SuccessRewardModel(weights, np.zeros(width, np.float32), np.ones(width, np.float32), meta={"a": "b"})
    scores = model.predict([demo(0), demo(5, steps=12)])
    assert scores.shape == (2,) and np.all((scores > 0) & (scores < 1))
    model.save(tmp_path / "m.npz")
    from wmrl_envs.libero.reward_model import load_reward_model

    again = load_reward_model(tmp_path / "m.npz")
    assert np.allclose(again.predict([demo(0)]), model.predict([demo(0)])) and again.name == model.name
    assert again.meta == {"a": "b"}
    with pytest.raises(ConfigError):
        load_reward_model(tmp_path / "missing.npz")


def test_vla_policies_by_name_and_from_files(tmp_path):
    from trainers.policies import load_run_policy, make_policy

    policy = make_policy("vla", seed=3, hidden=32, blocks=1)
    path = tmp_path / "policy.pt"
    policy.save(path)
    for source in (path, tmp_path):  # a policy file, or a folder holding one
        loaded = load_run_policy(source)
        assert all(torch.equal(a, b) for a, b in zip(policy.state_dict().values(), loaded.state_dict().values()))
    with pytest.raises(ConfigError, match="no MiniVLA policy file"):
        make_policy("vla", path=tmp_path / "missing.pt")
    torch.save({"something": 1}, tmp_path / "other.pt")
    with pytest.raises(ConfigError, match="neither a training checkpoint"):
        load_run_policy(tmp_path / "other.pt")


def test_trainer_config_matches_policies_to_envs():
    WMRLConfig.from_flat(env_id="wmrl/LIBERO-Long-v0", policy="vla")
    assert task_index("3") == 3  # task ids from a command line
    with pytest.raises(ConfigError, match="cannot act in"):
        WMRLConfig.from_flat(env_id="wmrl/MLEDojo-v0", policy="vla")
    with pytest.raises(ConfigError, match="unknown env_id"):
        WMRLConfig.from_flat(env_id="wmrl/Atari-v0")
    with pytest.raises(ConfigError, match="policy-path"):
        WMRLConfig.from_flat(policy="lm")


def test_init_states_official_or_sampled():
    from wmrl_envs.libero.tasks import SAMPLED_INIT_STATES_START, check_init_state, sampled_init_states

    assert check_init_state(0) == 0 and check_init_state(np.int64(49)) == 49
    assert list(sampled_init_states(2)) == [SAMPLED_INIT_STATES_START, SAMPLED_INIT_STATES_START + 1]
    assert check_init_state(SAMPLED_INIT_STATES_START + 5) == SAMPLED_INIT_STATES_START + 5
    for bad in (50, SAMPLED_INIT_STATES_START - 1, -1, 2**31, 3.0, "3", True):
        with pytest.raises(ConfigError, match="init_state"):
            check_init_state(bad)
    with pytest.raises(ConfigError):
        sampled_init_states(-1)


def test_episode_seeds_are_distinct_across_tasks_and_sampled_states():
    from agents.vla.policy import VLAEpisodePolicy
    from wmrl_envs.libero.tasks import sampled_init_states

    episodes = VLAEpisodePolicy(MiniVLAPolicy(VLAConfig(hidden=8, blocks=1)), greedy=False, seed=3)
    # Official states keep the seeds earlier sampled runs used.
    assert episodes.episode_seed(2, 7) == 3 * 10_000 + 2 * 100 + 7
    seeds = [episodes.episode_seed(task, k) for task in range(10) for k in [*range(50), *sampled_init_states(300)]]
    assert len(set(seeds)) == len(seeds)  # (task 0, 1100) and (task 1, 1000) once shared a seed
    assert all(0 <= s < 2**64 for s in seeds)
    other = VLAEpisodePolicy(episodes.policy, greedy=False, seed=4)
    assert other.episode_seed(0, 1000) != episodes.episode_seed(0, 1000)
    episodes.reset(None, 1, 1000)  # every seed is one torch accepts


def test_libero_comparison_table():
    from wmrl_envs.libero.evaluate import comparison_markdown

    def report(name, successes):
        return {"policy": name, "success_rate": float(np.mean(successes)),
                "tasks": [{"task_index": 3, "success_rate": float(np.mean(successes))}]}

    table = comparison_markdown([report("bc", [1, 0]), report("wmrl", [1, 1])], {"sim steps": [10, 20]})
    assert "| bc | 0.50 | **0.500** | 10 |" in table and "| wmrl | 1.00 | **1.000** | 20 |" in table
    other = {"policy": "x", "success_rate": 0.0, "tasks": [{"task_index": 4, "success_rate": 0.0}]}
    with pytest.raises(ConfigError, match="other tasks"):
        comparison_markdown([report("bc", [1]), other])
