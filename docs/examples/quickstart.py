"""The README's quickstart: episodes of the fused env, one solution script per episode.

    python docs/examples/quickstart.py

A stand-in agent (a reference solution of the grammar policy) answers every episode. Groups
are fused: about one in ten is an anchor, executed in the sandbox and scored for real; the
others are scored by the world model and calibrated on the anchors. The last line printed is
a JSON summary of the streams seen.
"""

from __future__ import annotations

import json

import gymnasium as gym

import wmrl_envs  # noqa: F401  (registers the ids)
from agents.code.grammar import REFERENCE_SOLUTIONS, render_response
from wmrl_envs.tasks import get_task


def main() -> None:
    task = get_task("titanic-survival")
    streams: dict[str, int] = {}
    env = gym.make("wmrl/MLEDojo-v0", reward="fused")  # or "real", "world_model"
    for group_id in range(16):
        obs, info = env.reset(seed=0, options={"task_id": task.id, "group_id": group_id})
        response = render_response(task.spec, REFERENCE_SOLUTIONS["hist_gb"])  # your agent reads obs
        obs, reward, terminated, truncated, info = env.step(response)
        print(group_id, info["stream"], info["status"], round(reward, 3))
        streams[info["stream"]] = streams.get(info["stream"], 0) + 1
    env.close()
    print(json.dumps({"task": task.id, "streams": streams}))


if __name__ == "__main__":
    main()
