"""wmrl/MLEDojo-v0 with real execution: Gymnasium conformance and real episodes."""

from __future__ import annotations

import pickle

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import wmrl_envs
from agents.code.grammar import REFERENCE_SOLUTIONS, SolutionChoices, render_response
from wmrl_envs.grading import submission_cap
from wmrl_envs.tasks import get_task, list_tasks

INFO_KEYS = {"task_id", "stream", "score", "raw_score", "real_score", "wm_score_raw", "wm_score_calibrated",
             "valid", "error", "cost", "fusion_weight"}


@pytest.fixture(scope="module")
def train_task():
    # The smallest train task keeps real executions quick.
    return min(list_tasks(suite="mle", split="train"), key=lambda t: t.spec.meta.get("n_train", 1e9))


@pytest.fixture(scope="module")
def heldout_task():
    return min(list_tasks(suite="mle", split="heldout"), key=lambda t: t.spec.meta.get("n_train", 1e9))


def test_registered_ids_use_string_entry_points():
    for env_id in wmrl_envs.ENV_IDS:
        assert isinstance(gym.spec(env_id).entry_point, str)


@pytest.mark.parametrize("split", ["train", "heldout"])
def test_check_env_passes(split):
    env = gym.make("wmrl/MLEDojo-v0", reward="real", split=split)
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_reset_is_deterministic_and_picklable():
    a = gym.make("wmrl/MLEDojo-v0", reward="real")
    b = pickle.loads(pickle.dumps(a))
    obs_a, info_a = a.reset(seed=123)
    obs_b, info_b = b.reset(seed=123)
    assert obs_a == obs_b and info_a["task_id"] == info_b["task_id"]
    assert a.observation_space.contains(obs_a)
    # A different seed over the whole pool eventually picks a different task.
    ids = {a.reset(seed=s)[1]["task_id"] for s in range(20)}
    assert len(ids) > 1


def test_real_episode_scores_a_reference_solution(train_task):
    env = gym.make("wmrl/MLEDojo-v0", reward="real", max_turns=2)
    obs, info = env.reset(seed=0, options={"task_id": train_task.id, "group_id": 7})
    assert train_task.spec.metric in obs and "submission.csv" in obs
    response = render_response(train_task.spec, REFERENCE_SOLUTIONS["linear"])
    obs, reward, terminated, truncated, info = env.step(response)
    assert INFO_KEYS <= set(info)
    assert info["valid"], info["error"]
    assert not terminated and reward == 0.0  # intermediate turns never pay out
    assert info["stream"] == "real" and 0.0 <= info["score"] <= 1.0
    assert info["real_score"] == info["score"] and info["cost"]["execution_s"] > 0
    assert "position score" in obs  # train tasks show their test score
    # The second (last) attempt is broken: the final reward is the last VALID submission's score.
    obs, reward, terminated, truncated, info2 = env.step("```python\nraise SystemExit(3)\n```")
    assert terminated and not truncated
    assert not info2["valid"] and "exit code 3" in info2["error"]
    assert reward == pytest.approx(info["score"])
    assert info2["final_score"] == pytest.approx(info["score"])
    with pytest.raises(gym.error.ResetNeeded):
        env.step(response)
    env.close()


def test_real_scores_are_deterministic(train_task):
    response = render_response(train_task.spec, SolutionChoices(model="random_forest", capacity="low"))
    scores = []
    for _ in range(2):
        env = gym.make("wmrl/MLEDojo-v0", reward="real")
        env.reset(seed=1, options={"task_id": train_task.id})
        scores.append(env.step(response)[4]["raw_score"])
        env.close()
    assert scores[0] is not None and scores[0] == scores[1]


def test_heldout_feedback_hides_the_test_score(heldout_task):
    env = gym.make("wmrl/MLEDojo-v0", reward="real", split="heldout", max_turns=2)
    env.reset(seed=0, options={"task_id": heldout_task.id})
    response = render_response(heldout_task.spec, REFERENCE_SOLUTIONS["linear"])
    obs, reward, terminated, _, info = env.step(response)
    assert "hidden" in obs and "position" not in obs and heldout_task.spec.metric + " =" not in obs
    assert info["score"] is None and info["raw_score"] is None and info["valid"]
    obs, reward, terminated, _, info = env.step(response)
    assert terminated and 0.0 <= reward <= 1.0 and "position" not in obs
    assert info["final_score"] == pytest.approx(reward)
    env.close()


@pytest.mark.parametrize(
    "response, expected",
    [
        ("no code here at all", "no fenced"),
        ("```python\nimport wmrl_envs\n```", "exit code 1"),
        ("```python\nopen('submission.csv', 'w').write('garbage\\n1\\n')\n```", "invalid submission"),
        ("```python\nprint('hi')\n```", "wrote no submission.csv"),
    ],
)
def test_bad_responses_score_zero_with_a_clear_error(train_task, response, expected):
    env = gym.make("wmrl/MLEDojo-v0", reward="real")
    env.reset(seed=0, options={"task_id": train_task.id})
    obs, reward, terminated, _, info = env.step(response)
    assert terminated and reward == 0.0 and not info["valid"]
    assert expected in info["error"] and expected in obs
    assert env.observation_space.contains(obs)
    env.close()



def test_a_sparse_submission_past_its_cap_is_a_scored_invalid_submission(train_task):
    # Costs the run no disk blocks; the host grader rejects it by its size instead of reading it.
    size = submission_cap(train_task.sample_submission_path) + 1
    env = gym.make("wmrl/MLEDojo-v0", reward="real")
    env.reset(seed=0, options={"task_id": train_task.id})
    script = f"with open('submission.csv', 'wb') as fh:\n    fh.truncate({size})"
    obs, reward, terminated, _, info = env.step(f"```python\n{script}\n```")
    assert terminated and reward == 0.0 and info["score"] == 0.0 and not info["valid"]
    assert f"invalid submission: submission file is too large: {size:,} bytes" in info["error"]
    env.close()

def test_unknown_task_and_bad_config_raise_typed_errors():
    from wmrl_envs.errors import ConfigError, TaskNotFoundError

    with pytest.raises(ConfigError):
        gym.make("wmrl/MLEDojo-v0", reward="oracle")
    env = gym.make("wmrl/MLEDojo-v0")
    with pytest.raises(TaskNotFoundError):
        env.reset(options={"task_id": "no-such-task"})
    assert get_task(list_tasks(suite="mle")[0].id).id
