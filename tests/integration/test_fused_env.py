"""wmrl/MLEDojo-v0 with world-model and fused rewards, scored by the shipped surrogate.

Every env gets its own ``Calibrator`` so tests never share the process-wide one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import wmrl_envs  # noqa: F401  (registers the ids)
from agents.code.grammar import REFERENCE_SOLUTIONS, render_response
from wmrl_envs.calibration import Calibrator
from wmrl_envs.scoring import HashSchedule
from wmrl_envs.tasks import list_tasks

REPO = Path(__file__).resolve().parents[2]
ANCHOR_FRACTION = 0.5
SEED = 0
# Two members per group: a weak and a strong solution.
MEMBERS = ("constant", "linear")


@pytest.fixture(scope="module")
def train_task():
    # The smallest train task keeps the anchor executions quick.
    return min(list_tasks(suite="mle", split="train"), key=lambda t: t.spec.meta.get("n_train", 1e9))


@pytest.mark.parametrize("reward", ["world_model", "fused"])
def test_check_env_passes(reward):
    env = gym.make("wmrl/MLEDojo-v0", reward=reward, calibrator=Calibrator())
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_world_model_episode_fills_the_info(train_task):
    env = gym.make("wmrl/MLEDojo-v0", reward="world_model", calibrator=Calibrator())
    env.reset(seed=0, options={"task_id": train_task.id, "group_id": 0})
    obs, reward, terminated, _, info = env.step(render_response(train_task.spec, REFERENCE_SOLUTIONS["hist_gb"]))
    assert terminated and info["stream"] == "world_model" and info["valid"] is None
    assert 0.0 <= info["wm_score_raw"] <= 1.0 and reward == pytest.approx(info["wm_score_calibrated"])
    assert info["real_score"] is None and info["cost"]["execution_s"] == 0.0 and info["cost"]["world_model_s"] > 0
    assert env.observation_space.contains(obs)
    env.close()


def test_fused_groups_share_a_stream_and_anchors_feed_the_calibrator(train_task):
    # Group ids whose stream the anchor hash fixes: two anchor groups and two world-model groups.
    schedule = HashSchedule(ANCHOR_FRACTION, SEED)
    anchors = [g for g in range(100) if schedule.stream(g) == "anchor"][:2]
    others = [g for g in range(100) if schedule.stream(g) == "world_model"][:2]
    calibrator = Calibrator()
    env = gym.make("wmrl/MLEDojo-v0", reward="fused", anchor_fraction=ANCHOR_FRACTION, anchor_seed=SEED,
                   calibrator=calibrator, workers=2)
    streams: dict[int, set[str]] = {}
    for group in sorted(anchors + others):
        for name in MEMBERS:
            env.reset(seed=group, options={"task_id": train_task.id, "group_id": group})
            _, reward, terminated, _, info = env.step(render_response(train_task.spec, REFERENCE_SOLUTIONS[name]))
            assert terminated and info["valid"] is not False, info["error"]
            streams.setdefault(group, set()).add(info["stream"])
            assert info["wm_score_raw"] is not None and info["wm_score_calibrated"] is not None
            assert info["cost"]["world_model_s"] > 0 and info["fusion_weight"] >= 1.0
            if info["stream"] == "anchor":
                assert info["real_score"] is not None and reward == pytest.approx(info["real_score"])
                assert info["cost"]["execution_s"] > 0
            else:
                assert info["real_score"] is None and info["cost"]["execution_s"] == 0.0
                assert reward == pytest.approx(info["wm_score_calibrated"])
    assert all(len(s) == 1 for s in streams.values())  # every member of a group shares its stream
    assert {g for g, s in streams.items() if s == {"anchor"}} == set(anchors)
    assert {g for g, s in streams.items() if s == {"world_model"}} == set(others)
    assert calibrator.n_pairs == len(anchors) * len(MEMBERS)
    env.close()


# ----------------------------------------------------------------------------- multi-turn repair


def _repair(response: str, feedback: str, columns: list[str]) -> str:
    """A repairing agent that reads nothing but the feedback: a KeyError names a column, which it
    replaces by the public column closest to it."""
    import difflib
    import re

    missing = re.search(r"KeyError: '([^']+)'", feedback)
    assert missing, feedback
    fixed = difflib.get_close_matches(missing.group(1), columns, n=1, cutoff=0.0)[0]
    return response.replace(repr(missing.group(1)), repr(fixed))


def _kaggle_column_response(task) -> str:
    """A reference solution that reads the target under its Kaggle-style capitalised name."""
    label = task.spec.answer_columns[0]
    response = render_response(task.spec, REFERENCE_SOLUTIONS["linear"])
    assert f"LABEL = {label!r}" in response
    return response.replace(f"LABEL = {label!r}", f"LABEL = {label.capitalize()!r}")


@pytest.mark.parametrize("reward", ["world_model", "fused"])
def test_a_second_turn_repairs_the_error_the_first_turn_reported(train_task, reward):
    """Turn 1 reads the target under a wrong name; the feedback names the missing column in the
    sandbox's words, marked as predicted; turn 2 repairs it from that text alone. On a world-model
    episode neither turn runs; on an anchor episode every turn's outcome is exact (the proved
    failure is not executed, the repaired script is)."""
    import pandas as pd

    columns = list(pd.read_csv(train_task.public_dir / "train.csv", nrows=0).columns)
    group = 0
    if reward == "fused":
        schedule = HashSchedule(ANCHOR_FRACTION, SEED)
        group = next(g for g in range(1000) if schedule.stream(g) == "anchor")
    env = gym.make("wmrl/MLEDojo-v0", reward=reward, max_turns=2, anchor_fraction=ANCHOR_FRACTION,
                   anchor_seed=SEED, calibrator=Calibrator())
    env.reset(seed=0, options={"task_id": train_task.id, "group_id": group})
    first = _kaggle_column_response(train_task)
    obs, reward_1, terminated, _, info = env.step(first)
    assert not terminated and reward_1 == 0.0
    assert info["status"] == "runtime_error" and info["exception"] == "KeyError" and info["proved"]
    assert info["feedback_predicted"] and not info["executed"]
    assert "[predicted: proved without running the script]" in obs and "KeyError: '" in obs
    obs, reward_2, terminated, _, info = env.step(_repair(first, obs, columns))
    assert terminated and info["status"] == "valid" and not info["proved"]
    assert info["final_score"] == reward_2 > 0
    if reward == "fused":
        assert info["stream"] == "anchor" and info["executed"] and info["valid"] is True
        assert "predicted" not in obs
    else:
        assert info["stream"] == "world_model" and not info["executed"] and info["feedback_predicted"]
        assert "predicted valid, estimated score" in obs
    env.close()


# ----------------------------------------------------------------------------- the README's quickstart
def test_the_readme_quickstart_runs_and_meets_both_streams():
    # The README quotes docs/examples/quickstart.py (test_readme_examples keeps the excerpt in
    # step); run it as a user would, with this checkout first on the path.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(REPO / "docs" / "examples" / "quickstart.py")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["streams"] == {"world_model": 15, "anchor": 1}  # group 15 is the README's anchor
