"""WMRL is a real package: a wheel installed away from the checkout finds its shipped data.

The wheel is built from a copy of the checkout's build inputs and installed, with its declared
dependencies, into a fresh virtualenv outside the checkout. From another directory the venv's
``wmrl`` script lists the tasks and one fused episode runs an anchor, executed and world-model
scored: the suite files, the leaderboards and the surrogate's weights can only come from the
wheel's package data (``wmrl_envs._assets``, ``wmrl_envs._leaderboards``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

import wmrl_envs
from wmrl_envs.paths import wmrl_home

CHECKOUT = Path(wmrl_envs.__file__).resolve().parents[1]
CODE = ("wmrl_envs", "agents", "trainers")
DATA = {"assets": "wmrl_envs/_assets", "leaderboards": "wmrl_envs/_leaderboards"}
BUILD_INPUTS = ("pyproject.toml", "setup.py", "README.md", *CODE, *DATA)
HIDDEN = ("PYTHONPATH", "VIRTUAL_ENV", "WMRL_ASSETS_DIR", "WMRL_LEADERBOARDS_DIR")

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


def run(cmd: list[str], timeout: float = 300, **kwargs) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert done.returncode == 0, f"{cmd[:4]} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def expected_files(src: Path) -> set[str]:
    """Every module, and every data file under its package; bytecode caches are never shipped."""
    files = {p.relative_to(src).as_posix() for root in CODE for p in (src / root).rglob("*.py")}
    for folder, package in DATA.items():
        files |= {f"{package}/{p.relative_to(src / folder).as_posix()}"
                  for p in (src / folder).rglob("*") if p.is_file() and p.suffix != ".pyc"}
    return files


def pins() -> str:
    """This interpreter's versions, as pip constraints.

    Generated tasks in the shared ``WMRL_HOME`` are keyed on the data packages' versions; the
    same versions in the new venv reuse them instead of regenerating the suite there.
    """
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and name.lower() != "wmrl":
            found.setdefault(re.sub(r"[-_.]+", "-", name).lower(), f"{name}=={dist.version}")
    return "".join(f"{pin}\n" for pin in sorted(found.values()))


def wheel_env() -> dict[str, str]:
    """The session's environment, minus whatever could lead the new venv back to the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in HIDDEN}
    env["WMRL_HOME"] = str(wmrl_home())  # the session's runtime venv and generated tasks
    return env


@pytest.fixture(scope="module")
def src(tmp_path_factory) -> Path:
    # A copy, so a stale build/ in the checkout cannot leak into the wheel.
    src = tmp_path_factory.mktemp("src")
    for name in BUILD_INPUTS:
        copy = shutil.copytree if (CHECKOUT / name).is_dir() else shutil.copy2
        copy(CHECKOUT / name, src / name)
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
    root = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", str(root)])
    constraints = root / "constraints.txt"
    constraints.write_text(pins())
    pip = [str(root / "bin" / "python"), "-m", "pip", "install", "-q", "--no-input", "--disable-pip-version-check",
           "-c", str(constraints)]
    run([*pip, str(wheel)], timeout=600, env=wheel_env())
    # DSBench's data package, the way scripts/setup.sh installs it (its pandas pin is too tight):
    # every task lookup digests the DSBench suite too, and that digest names sktime's version.
    run([*pip, "--no-deps", "sktime", "scikit-base"], env=wheel_env())
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
