"""A verifiers evaluation of the ``wmrl_mledojo`` environment, run inside its own virtualenv.

``tests/integration/test_verifiers_env.py`` runs this file with the python of a clean virtualenv
that holds ``pip install <checkout> environments/wmrl_mledojo``. It evaluates the environment
against an OpenAI-compatible endpoint served in process by httpx's mock transport: for each task
it answers with a reference solution and a crashing script, in turn. Then (rewards "real" and
"world_model") it replays each rollout's responses in a Gymnasium env of the same id, reward and
group, and prints one JSON object: each rollout's task, responses, feedback, reward, metrics and
turn infos beside the env's return, the calibrator's pair count, and where the modules came from.

    python tests/integration/verifiers_eval.py '{"reward": "real", "num_examples": 4, "rollouts": 2}'
"""

from __future__ import annotations

import itertools
import json
import sys

import gymnasium as gym
import httpx
import openai
import verifiers as vf
import wmrl_mledojo

import wmrl_envs
from agents.code.grammar import REFERENCE_SOLUTIONS, render_response
from wmrl_envs.tasks import get_task

CRASH = "```python\nraise RuntimeError('no model yet')\n```\n"


def main(args: dict) -> dict:
    env_kwargs = {"reward": args["reward"], "task_ids": args["task_ids"], "max_turns": args.get("max_turns", 1),
                  "anchor_fraction": args.get("anchor_fraction", 0.5), "workers": 2,
                  "world_model_kwargs": {"embed": False}}
    env = wmrl_mledojo.load_environment(**env_kwargs)
    answers = {get_task(t).spec.name: [render_response(get_task(t).spec, REFERENCE_SOLUTIONS["linear"]), CRASH]
               for t in args["task_ids"]}
    turns = {name: itertools.cycle(options) for name, options in answers.items()}

    def reply(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        first = next(m["content"] for m in body["messages"] if m["role"] == "user")
        name = first.splitlines()[0].removeprefix("# Task: ").strip()
        text = next(turns[name])
        return httpx.Response(200, json={
            "id": "stub", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    client = vf.OpenAIChatCompletionsClient(openai.AsyncOpenAI(
        base_url="http://endpoint.invalid/v1", api_key="none",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(reply))))
    results = env.evaluate_sync(client, "stub", num_examples=len(args["task_ids"]),
                                rollouts_per_example=args["rollouts"])
    pairs = env.shared.core.calibrator.n_pairs

    replay = gym.make(env.shared.env_id, **env_kwargs)
    rollouts = []
    for out in results["outputs"]:
        info = out["info"] if isinstance(out["info"], dict) else json.loads(out["info"])
        responses = [m["content"] for m in out["completion"] if m["role"] == "assistant"]
        feedback = [m["content"] for m in out["completion"] if m["role"] == "user"]
        env_return = None
        if args["reward"] != "fused":  # the env's return for the same responses, in an episode of its own
            replay.reset(options={"task_id": info["task_id"], "group_id": info["wmrl"][0]["group_id"]})
            env_return = sum(replay.step(text)[1] for text in responses)
        rollouts.append({"task_id": info["task_id"], "example_id": out["example_id"], "responses": responses,
                         "feedback": feedback, "reward": out["reward"], "env_return": env_return,
                         "metrics": out["metrics"], "turns": info["wmrl"]})
    replay.close()
    env.shared.close()
    return {"rollouts": rollouts, "calibrator_pairs": pairs, "wmrl_envs": wmrl_envs.__file__,
            "module": wmrl_mledojo.__file__}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
