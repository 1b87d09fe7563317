"""WMRL is a real package: a wheel installed away from the checkout finds its shipped data.

The wheel is built from a copy of the checkout's build inputs and installed, with its declared
dependencies, into a fresh virtualenv outside the checkout. From another directory the venv's
``wmrl`` script lists the tasks and one fused episode runs an anchor, executed and world-model
scored: the suite files, the leaderboards and the surrogate's weights can only come from the
wheel's package data (``wmrl_envs._assets``, ``wmrl_envs._leaderboards``).
"""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from pathlib import Path

import pytest
from wheel_venv import CODE, DATA, copy_build_inputs, make_venv, run, wheel_env

# The smallest MLE train task, like tests/integration/test_fused_env.py. The world model's static
# head: the embedding head needs MiniLM from the `llm` extra, which this plain install leaves out.
EPISODE = """
import json
import gymnasium as gym
import wmrl_envs
from agents.code.grammar import REFERENCE_SOLUTIONS, render_response
from wmrl_envs.paths import assets_dir, leaderboards_dir
from wmrl_envs.tasks import list_tasks

task = min(list_tasks(suite="mle", split="train"), key=lambda t: t.spec.meta.get("n_train", 1e9))
env = gym.make("wmrl/MLEDojo-v0", reward="fused", anchor_fraction=1.0, world_model_kwargs={"embed": False})
env.reset(seed=0, options={"task_id": task.id, "group_id": 0})
_, reward, terminated, _, info = env.step(render_response(task.spec, REFERENCE_SOLUTIONS["linear"]))
env.close()
print(json.dumps({"wmrl_envs": wmrl_envs.__file__, "assets": str(assets_dir()), "leaderboards": str(leaderboards_dir()),
                  "leaderboard": str(task.leaderboard_path), "reward": reward, "terminated": terminated,
                  "info": {k: info[k] for k in ("stream", "valid", "error", "real_score", "wm_score_raw")}}))
"""

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def expected_files(src: Path) -> set[str]:
    """Every module, and every data file under its package; bytecode caches are never shipped."""
    files = {p.relative_to(src).as_posix() for root in CODE for p in (src / root).rglob("*.py")}
    for folder, package in DATA.items():
        files |= {f"{package}/{p.relative_to(src / folder).as_posix()}"
                  for p in (src / folder).rglob("*") if p.is_file() and p.suffix != ".pyc"}
    return files


@pytest.fixture(scope="module")
def src(tmp_path_factory) -> Path:
    # A copy, so a stale build/ in the checkout cannot leak into the wheel.
    src = copy_build_inputs(tmp_path_factory.mktemp("src"))
    # What importing the data packages leaves in a checkout.
    (src / "assets" / "__pycache__").mkdir(exist_ok=True)
    (src / "assets" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"")
    return src


@pytest.fixture(scope="module")
def wheel(src, tmp_path_factory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "--disable-pip-version-check", "-w", str(dist),
         str(src)])
    (built,) = dist.glob("wmrl-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    root = make_venv(tmp_path_factory.mktemp("venv"), [str(wheel)])
    yield root
    shutil.rmtree(root)  # about 600 MB, and pytest keeps the last three sessions' temp dirs


def test_wheel_holds_every_module_and_data_file_and_no_caches(src, wheel):
    names = {n for n in zipfile.ZipFile(wheel).namelist() if ".dist-info/" not in n}
    assert names == expected_files(src)


def test_console_script_lists_tasks_outside_the_checkout(venv, tmp_path):
    out = run([str(venv / "bin" / "wmrl"), "tasks", "list", "--json"], cwd=tmp_path, env=wheel_env())
    tasks = [json.loads(line) for line in out.splitlines()]
    assert {(t["suite"], t["split"]) for t in tasks} == {(suite, split) for suite in ("mle", "dsbench")
                                                         for split in ("train", "heldout")}
    assert all(t["leaderboard_size"] > 0 for t in tasks if t["suite"] == "mle")  # leaderboards/ came along


def test_fused_episode_reads_the_wheels_package_data(venv, tmp_path):
    result = json.loads(run([str(venv / "bin" / "python"), "-c", EPISODE], cwd=tmp_path,
                            env=wheel_env()).splitlines()[-1])
    for key in ("wmrl_envs", "assets", "leaderboards", "leaderboard"):
        assert Path(result[key]).resolve().is_relative_to(venv.resolve()), (key, result[key])
    info = result["info"]
    assert result["terminated"] and info["stream"] == "anchor" and info["valid"], info
    assert info["real_score"] is not None and info["wm_score_raw"] is not None
    assert result["reward"] == pytest.approx(info["real_score"])
