"""wmrl/DSBench-v0 under real, world-model and fused rewards: conformance and real episodes.

World-model rewards use a small deterministic test double of a world model (the interface is
what is tested here, not a trained model's quality), and every env gets its own calibrator
unless a test checks the shared one's key.
"""

from __future__ import annotations

import pickle
import textwrap

import gymnasium as gym
import pandas as pd
import pytest
import torch
import yaml
from gymnasium.utils.env_checker import check_env

import wmrl_envs  # noqa: F401  (registers the ids)
from agents.code.grammar import REFERENCE_SOLUTIONS, render_response
from trainers.policies import make_policy
from wmrl_envs.calibration import Calibrator
from wmrl_envs.grading import task_reward
from wmrl_envs.scoring import shared_calibrator
from wmrl_envs.tasks import get_task, list_tasks
from wmrl_envs.world_models import Prediction

ENV_ID = "wmrl/DSBench-v0"
REWARDS = ("real", "world_model", "fused")
INFO_KEYS = {"task_id", "stream", "score", "raw_score", "real_score", "wm_score_raw", "wm_score_calibrated",
             "valid", "error", "cost", "fusion_weight", "rpg"}
TRAIN_TASK = "gunpoint-motion"  # 50 train rows: real executions stay quick
HELDOUT_TASK = "italy-power-demand"


class ScriptLengthWorldModel:
    """Deterministic stand-in for a world model: longer scripts are predicted to score higher."""

    name = "script-length"

    def predict(self, tasks, scripts):
        return [Prediction(score=min(len(s) / 20_000, 1.0), uncertainty=0.1, cost_s=1e-3) for s in scripts]


def make(reward: str, own_calibrator: bool = True, **kwargs) -> gym.Env:
    if reward != "real":
        kwargs.setdefault("world_model", ScriptLengthWorldModel())
        if own_calibrator:
            kwargs.setdefault("calibrator", Calibrator())
    return gym.make(ENV_ID, reward=reward, **kwargs)


def response(task_id: str, solution: str = "linear") -> str:
    return render_response(get_task(task_id).spec, REFERENCE_SOLUTIONS[solution])


# --- conformance -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("split", ["train", "heldout"])
@pytest.mark.parametrize("reward", REWARDS)
def test_check_env_passes(reward, split):
    # check_env deep-copies the make() kwargs, which a Calibrator (it holds a lock) does not survive;
    # its random actions hold no code, so the shared calibrator is never fed.
    env = make(reward, own_calibrator=False, split=split)
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


@pytest.mark.parametrize("reward", REWARDS)
def test_reset_is_deterministic_and_picklable(reward):
    a = make(reward, own_calibrator=False)  # an own Calibrator in the make() kwargs cannot be pickled
    b = pickle.loads(pickle.dumps(a))
    obs_a, info_a = a.reset(seed=7)
    obs_b, info_b = b.reset(seed=7)
    assert obs_a == obs_b and info_a == info_b and a.observation_space.contains(obs_a)
    assert len({a.reset(seed=s)[1]["task_id"] for s in range(20)}) > 1
    if reward == "world_model":  # scoring without execution is deterministic too
        a.reset(seed=0, options={"task_id": TRAIN_TASK, "group_id": 1})
        b.reset(seed=0, options={"task_id": TRAIN_TASK, "group_id": 1})
        assert a.step(response(TRAIN_TASK))[1] == b.step(response(TRAIN_TASK))[1] > 0
    a.close()
    b.close()


def test_defaults_are_one_shot_over_the_dsbench_train_tasks():
    env = gym.make(ENV_ID)
    assert env.unwrapped.max_turns == 1 and env.unwrapped.reward_mode == "real"
    assert env.unwrapped.task_ids == [t.id for t in list_tasks(suite="dsbench", split="train")]
    assert "1 attempt(s)" in env.reset(seed=0)[0]
    env.close()


# --- real execution ---------------------------------------------------------------------------------------


def test_real_episode_reports_rpg_deterministically():
    outcomes = []
    for _ in range(2):
        env = make("real")
        obs, _ = env.reset(seed=0, options={"task_id": TRAIN_TASK})
        assert "relative performance gap" in obs and "submission.csv" in obs
        obs, reward, terminated, truncated, info = env.step(response(TRAIN_TASK))
        env.close()
        outcomes.append((reward, info))
        assert INFO_KEYS <= set(info) and info["valid"], info["error"]
        assert terminated and not truncated and info["stream"] == "real"
        assert reward == info["rpg"] == info["score"] == info["real_score"] == info["final_score"]
        assert reward == task_reward(get_task(TRAIN_TASK), info["raw_score"])[0] and 0.0 < reward <= 1.0
        assert f"relative performance gap {reward:.3f}" in obs
    assert outcomes[0][0] == outcomes[1][0]


def test_invalid_submission_has_rpg_zero():
    env = make("real")
    env.reset(seed=0, options={"task_id": TRAIN_TASK})
    bad = "```python\nopen('submission.csv', 'w').write('id,motion\\n1,3\\n')\n```"
    _, reward, terminated, _, info = env.step(bad)
    assert terminated and reward == 0.0 and info["rpg"] == 0.0 and not info["valid"]
    assert "invalid submission" in info["error"]
    env.close()


def test_multi_turn_heldout_episode_hides_rpg_until_the_end():
    env = make("real", split="heldout", max_turns=2)
    env.reset(seed=0, options={"task_id": HELDOUT_TASK})
    obs, reward, terminated, _, info = env.step(response(HELDOUT_TASK))
    assert not terminated and reward == 0.0 and info["valid"]
    assert info["rpg"] is None and info["score"] is None and "hidden" in obs and "performance gap" not in obs
    obs, reward, terminated, _, info = env.step("```python\nraise SystemExit(2)\n```")
    assert terminated and not info["valid"] and info["rpg"] == 0.0
    assert reward == info["final_score"] > 0.5  # the last VALID submission's RPG
    env.close()


def test_grammar_policy_answers_a_timeseries_task():
    task = get_task(TRAIN_TASK)
    assert task.spec.task_type == "timeseries-multiclass"
    rollout = make_policy("grammar", seed=0).generate([task], 1, [0], torch.Generator().manual_seed(0))[0]
    env = make("real")
    env.reset(seed=0, options={"task_id": task.id})
    _, reward, _, _, info = env.step(str(rollout.response))
    assert info["valid"], info["error"]
    assert reward == info["rpg"] >= 0.0
    env.close()


# --- world-model and fused rewards ------------------------------------------------------------------------


def test_world_model_reward_predicts_rpg_with_the_dsbench_calibrator():
    shared = make("world_model", own_calibrator=False).unwrapped.core.calibrator
    assert shared is shared_calibrator("dsbench/script-length") and shared.shared_key == "dsbench/script-length"
    env = make("world_model")
    env.reset(seed=0, options={"task_id": TRAIN_TASK})
    obs, reward, terminated, _, info = env.step(response(TRAIN_TASK))
    assert terminated and info["stream"] == "world_model" and info["valid"] is None  # nothing ran
    # The prediction says it is one: estimated, the script was not run.
    assert f"predicted valid, estimated score ~ {reward:.3f}" in obs and "the script was not run" in obs
    assert info["feedback_predicted"] and not info["executed"] and not info["proved"]
    assert reward == info["wm_score_calibrated"] and info["rpg"] is None and info["real_score"] is None
    assert info["cost"]["execution_s"] == 0.0 and info["cost"]["world_model_s"] > 0
    env.close()


def test_fused_anchor_is_executed_and_feeds_the_calibrator():
    calibrator = Calibrator()
    env = make("fused", anchor_fraction=1.0, calibrator=calibrator)
    assert env.unwrapped.core.calibrator is calibrator
    env.reset(seed=0, options={"task_id": TRAIN_TASK, "group_id": 3})
    _, reward, _, _, info = env.step(response(TRAIN_TASK))
    assert info["stream"] == "anchor" and info["valid"], info["error"]
    assert reward == info["rpg"] == info["real_score"] and info["wm_score_raw"] is not None
    assert calibrator.n_pairs == 1
    env.close()


# --- a task in DSBench's real layout ------------------------------------------------------------------


def test_a_real_layout_task_runs_in_the_env(tmp_path, monkeypatch):
    root = tmp_path / "dsbench"
    ids = list(range(100, 108))
    (root / "data_resplit" / "toy-regression").mkdir(parents=True)
    (root / "answers" / "toy-regression").mkdir(parents=True)
    (root / "task").mkdir()
    data = root / "data_resplit" / "toy-regression"
    pd.DataFrame({"Id": range(20), "x": range(20), "y": [2.0 * i + 1 for i in range(20)]}).to_csv(
        data / "train.csv", index=False)
    pd.DataFrame({"Id": ids, "x": range(20, 28)}).to_csv(data / "test.csv", index=False)
    pd.DataFrame({"Id": ids, "y": 0.0}).to_csv(data / "sampleSubmission.csv", index=False)
    pd.DataFrame({"Id": ids, "y": [2.0 * i + 1 for i in range(20, 28)]}).to_csv(
        root / "answers" / "toy-regression" / "test_answer.csv", index=False)
    (root / "task" / "toy-regression.txt").write_text("Predict y from x; metric: MAE.\n")
    (root / "wmrl.yaml").write_text(yaml.safe_dump({"tasks": {"toy-regression": {"metric": "mae",
                                                                                  "task_type": "regression"}}}))
    monkeypatch.setenv("WMRL_TASKS_DIR", str(root))

    script = textwrap.dedent("""\
        import numpy as np
        import pandas as pd
        train, test = pd.read_csv("data/train.csv"), pd.read_csv("data/test.csv")
        slope, intercept = np.polyfit(train["x"], train["y"], 1)
        pred = pd.DataFrame({"Id": test["Id"], "y": slope * test["x"] + intercept + 0.5})
        pred.sample(frac=1.0, random_state=0).to_csv("submission.csv", index=False)  # any row order
        """)
    env = gym.make(ENV_ID, split="heldout", task_ids=["toy-regression"])
    obs, _ = env.reset(seed=0)
    assert obs.startswith("# Task: toy-regression") and "Predict y from x" in obs
    _, reward, _, _, info = env.step(f"```python\n{script}```")
    assert info["valid"], info["error"]
    task = get_task("toy-regression")
    assert info["raw_score"] == pytest.approx(0.5)
    assert reward == info["rpg"] == pytest.approx(1 - 0.5 / task.spec.meta["rpg_baseline"])
    env.close()
