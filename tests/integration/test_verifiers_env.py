"""The verifiers environment (``environments/wmrl_mledojo``), installed into a clean virtualenv.

A fresh virtualenv outside the checkout gets ``pip install <checkout> environments/wmrl_mledojo``
(copies of both; verifiers 0.3.1 comes with wmrl's ``verifiers`` extra), pinned to this
interpreter's versions but websockets, which verifiers 0.3.1 holds below the one OpenEnv brings.
``verifiers_eval.py`` then runs verifiers' own evaluation in that venv, against an
OpenAI-compatible endpoint served in process by httpx's mock transport (nothing leaves the
machine), and replays every rollout's responses in the Gymnasium env.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from wheel_venv import CHECKOUT, copy_build_inputs, make_venv, run, wheel_env

from wmrl_envs.tasks import list_tasks

pytestmark = [pytest.mark.verifiers,
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")]

EVAL = Path(__file__).with_name("verifiers_eval.py")
PACKAGE = Path("environments") / "wmrl_mledojo"


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    src = copy_build_inputs(tmp_path_factory.mktemp("src"))
    shutil.copytree(CHECKOUT / PACKAGE, src / PACKAGE, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    root = make_venv(tmp_path_factory.mktemp("venv"), [str(src), str(src / PACKAGE)], leave_out=["websockets"])
    yield root
    shutil.rmtree(root)


@pytest.fixture(scope="module")
def task_ids() -> list[str]:
    # The four smallest MLE train tasks keep the runs quick.
    tasks = sorted(list_tasks(suite="mle", split="train"), key=lambda t: t.spec.meta.get("n_train", 1e9))
    return [t.id for t in tasks[:4]]


def evaluate(venv: Path, cwd: Path, **args) -> dict:
    out = run([str(venv / "bin" / "python"), str(EVAL), json.dumps(args)], timeout=900, cwd=cwd, env=wheel_env())
    return json.loads(out.splitlines()[-1])


@pytest.mark.parametrize("reward", ["real", "world_model"])
def test_a_verifiers_evaluation_rewards_as_the_gymnasium_env_does(venv, task_ids, tmp_path, reward):
    result = evaluate(venv, tmp_path, reward=reward, task_ids=task_ids, rollouts=2)
    for module in ("wmrl_envs", "module"):  # the installed packages, not the checkout
        assert Path(result[module]).resolve().is_relative_to(venv.resolve()), result[module]
    rollouts = result["rollouts"]
    assert len(rollouts) == 8 and sorted({r["task_id"] for r in rollouts}) == sorted(task_ids)
    for r in rollouts:
        assert r["reward"] == pytest.approx(r["env_return"], abs=1e-12), r
        assert r["metrics"]["wmrl_return"] == r["reward"]
        (turn,) = r["turns"]
        assert turn["stream"] == reward and turn["task_id"] == r["task_id"]
    # Each example's two rollouts answered a reference solution and a crash: one valid, one not.
    by_example = defaultdict(list)
    for r in rollouts:
        by_example[r["example_id"]].append(r["metrics"]["wmrl_valid"] if reward == "real" else r["reward"])
    if reward == "real":
        assert all(sorted(v) == [0.0, 1.0] for v in by_example.values()), by_example
    assert result["calibrator_pairs"] == 0


def test_fused_rollouts_of_an_example_share_a_group_and_feed_one_calibrator(venv, task_ids, tmp_path):
    result = evaluate(venv, tmp_path, reward="fused", task_ids=task_ids, rollouts=3, max_turns=2,
                      anchor_fraction=0.5)
    rollouts = result["rollouts"]
    assert len(rollouts) == 12
    groups = defaultdict(set)
    for r in rollouts:
        groups[r["example_id"]] |= {(t["group_id"], t["stream"]) for t in r["turns"]}
        assert [t["turn"] for t in r["turns"]] == [1, 2] and len(r["responses"]) == 2
        # The first attempt's feedback, executed or predicted, is the second turn's prompt.
        assert r["feedback"][0].startswith("## Attempt 1/2")
        assert r["metrics"]["wmrl_anchor"] == float(r["turns"][-1]["stream"] == "anchor")
    assert all(len(g) == 1 for g in groups.values()), groups  # one group id and one stream per example
    assert len({g for (g, _), in groups.values()}) == len(task_ids)
    anchor_turns = sum(t["stream"] == "anchor" for r in rollouts for t in r["turns"])
    assert 0 < anchor_turns < 24  # this seed anchors some examples, not all
    assert result["calibrator_pairs"] == anchor_turns
