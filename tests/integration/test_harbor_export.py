"""``wmrl export harbor``: the Harbor task folders, without Harbor or Docker.

Two built-in tasks are exported, one scored by leaderboard position (``titanic-survival``) and one
by RPG (``vote-1996``). Checked: the layout and ``task.toml``; that the instruction is the env's
own prompt; that no private answer reaches what the agent's container is built from; and the
verifier's ``tests/test.sh`` run here, its paths pointed at the export by its variables, whose
``reward.json`` must equal ``wmrl grade``'s reward for the same file. Harbor's own runs are in
``test_harbor.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pandas as pd
import pytest
import tomllib

from agents.code.grammar import REFERENCE_SOLUTIONS, render_script
from trainers.cli import main
from wmrl_envs.errors import ConfigError
from wmrl_envs.integrations.harbor import (
    SUBMISSION,
    HarborImages,
    export_task,
    harbor_reward,
)
from wmrl_envs.tasks import get_task
from wmrl_envs.tasks.cli import grade_report

ROOT = Path(__file__).resolve().parents[2]
TASKS = ("titanic-survival", "vote-1996")  # a leaderboard-scored task and an RPG-scored one


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """The two tasks exported by the ``wmrl`` command itself (one call per suite)."""
    out = tmp_path_factory.mktemp("harbor")
    assert main(["export", "harbor", "--suite", "mle", "--split", "heldout", str(out), "--tasks", TASKS[0]]) == 0
    assert main(["export", "harbor", "--suite", "dsbench", "--split", "heldout", str(out), "--tasks", TASKS[1]]) == 0
    return out


@pytest.mark.parametrize("task_id", TASKS)
def test_layout_and_task_toml(exported: Path, task_id: str) -> None:
    task, folder = get_task(task_id), exported / task_id
    files = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    assert {"instruction.md", "task.toml", "environment/Dockerfile", "environment/docker-compose.yaml",
            "tests/Dockerfile", "tests/test.sh", "tests/docker-compose.yaml", "tests/task/task.yaml",
            "tests/task/private/answers.csv", "solution/solve.sh", "solution/solution.py"} <= files
    assert os.access(folder / "tests" / "test.sh", os.X_OK) and os.access(folder / "solution" / "solve.sh", os.X_OK)

    config = tomllib.loads((folder / "task.toml").read_text())
    assert config["schema_version"] == "1.4"
    assert config["task"]["name"] == f"wmrl/{task_id}"
    assert config["artifacts"] == [SUBMISSION]
    assert config["verifier"]["environment_mode"] == "separate"
    assert config["agent"]["timeout_sec"] == task.limits.wall_s
    assert config["environment"]["memory_mb"] == task.limits.memory_mb
    assert config["metadata"]["wmrl_limits"]["cpu_s"] == task.limits.cpu_s
    # Harbor is told "public" only because the compose files take the network away themselves.
    assert config["environment"]["network_mode"] == "public"
    for part in ("environment", "tests"):
        assert "network_mode: none" in (folder / part / "docker-compose.yaml").read_text()

    assert (folder / "environment" / "Dockerfile").read_text().splitlines()[1:] == [
        f"FROM {HarborImages().agent}", "WORKDIR /app", "COPY data/ /app/data/"]
    assert f"FROM {HarborImages().grader}" in (folder / "tests" / "Dockerfile").read_text()
    # solve.sh runs the grammar's hist_gb reference solution, the script `wmrl eval` runs for it.
    assert (folder / "solution" / "solution.py").read_text() == render_script(
        task.spec, REFERENCE_SOLUTIONS["hist_gb"], seed=0)


def test_instruction_is_the_env_prompt(exported: Path) -> None:
    env = gym.make("wmrl/MLEDojo-v0", reward="real", split="heldout", task_ids=[TASKS[0]])
    try:
        prompt, _ = env.reset(options={"task_id": TASKS[0], "group_id": 0})
    finally:
        env.close()
    text = (exported / TASKS[0] / "instruction.md").read_text()
    assert text.startswith(prompt)
    assert SUBMISSION in text[len(prompt):] and "/app/data/" in text[len(prompt):]


@pytest.mark.parametrize("task_id", TASKS)
def test_private_answers_never_reach_the_agent(exported: Path, task_id: str) -> None:
    task, folder = get_task(task_id), exported / task_id
    answers = task.answers_path.read_bytes()
    frame = pd.read_csv(task.answers_path, dtype=str, keep_default_na=False)
    # The answers' target columns in row order: what a leak would contain whatever its format.
    targets = [frame[column].tolist() for column in frame.columns if column != task.spec.id_column]
    # Harbor builds the agent's container from environment/, and copies solution/ in for the oracle.
    agent_files = [p for p in folder.rglob("*") if p.is_file() and p.relative_to(folder).parts[0] != "tests"]
    assert agent_files
    for path in agent_files:
        content = path.read_bytes()
        assert path.name != task.answers_path.name
        assert answers not in content, f"{path} holds the answers file"
        if path.suffix == ".csv":
            columns = pd.read_csv(path, dtype=str, keep_default_na=False)
            for column in columns.columns:
                assert columns[column].tolist() not in targets, f"{path} holds the answers' targets"
    # The agent's build context is exactly the task's public files.
    data = folder / "environment" / "data"
    public = {p.relative_to(task.public_dir): p.read_bytes() for p in task.public_dir.rglob("*") if p.is_file()}
    assert {p.relative_to(data): p.read_bytes() for p in data.rglob("*") if p.is_file()} == public
    assert sorted(p.name for p in (folder / "environment").iterdir()) == ["Dockerfile", "data", "docker-compose.yaml"]
    # ...while the verifier's image gets them.
    assert (folder / "tests" / "task" / "private" / "answers.csv").read_bytes() == answers


def _run_test_sh(folder: Path, submission: Path, logs: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "WMRL_SUBMISSION": str(submission), "WMRL_TASK_DIR": str(folder / "tests" / "task"),
           "WMRL_VERIFIER_LOGS": str(logs), "WMRL_GRADER_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    return subprocess.run(["bash", str(folder / "tests" / "test.sh")], env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def _submissions(task, tmp_path: Path) -> dict[str, Path]:
    sample = pd.read_csv(task.sample_submission_path)
    sample.drop(columns=sample.columns[-1]).to_csv(tmp_path / "broken.csv", index=False)
    return {"sample": task.sample_submission_path, "broken": tmp_path / "broken.csv",
            "missing": tmp_path / "missing.csv"}


@pytest.mark.parametrize(("task_id", "kind"), [(TASKS[0], "sample"), (TASKS[0], "broken"), (TASKS[0], "missing"),
                                               (TASKS[1], "sample")])
def test_verifier_step_writes_wmrl_grades_reward(exported: Path, tmp_path: Path, task_id: str, kind: str) -> None:
    task, folder = get_task(task_id), exported / task_id
    submission = _submissions(task, tmp_path)[kind]
    done = _run_test_sh(folder, submission, tmp_path / "logs")
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / "logs" / "reward.json").read_text())
    report, _ = grade_report(task, submission)  # the original task folder, not the exported copy
    assert written == harbor_reward(report)
    assert written["valid"] == (kind == "sample")
    if kind == "sample":
        expected = report["rpg"] if task_id == TASKS[1] else report["position_score"]
        assert written["reward"] == expected
    else:
        assert written["reward"] == 0.0


def test_a_broken_grader_writes_no_reward(exported: Path, tmp_path: Path) -> None:
    """Exit 2 of `wmrl grade` (here: no task folder) is the verifier's failure, never a 0 score."""
    folder = exported / TASKS[0]
    env = {**os.environ, "WMRL_SUBMISSION": str(get_task(TASKS[0]).sample_submission_path),
           "WMRL_TASK_DIR": str(tmp_path / "no-such-task"), "WMRL_VERIFIER_LOGS": str(tmp_path / "logs"),
           "WMRL_GRADER_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(["bash", str(folder / "tests" / "test.sh")], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 2
    assert not (tmp_path / "logs" / "reward.json").exists()


def test_harbor_network_mode_and_validation(tmp_path: Path) -> None:
    task = get_task(TASKS[0])
    folder = export_task(task, tmp_path, "print('x')\n", network="harbor")
    assert tomllib.loads((folder / "task.toml").read_text())["environment"]["network_mode"] == "no-network"
    assert not (folder / "environment" / "docker-compose.yaml").exists()
    with pytest.raises(ConfigError, match="network"):
        export_task(task, tmp_path, "print('x')\n", network="none")
    with pytest.raises(ConfigError, match="agent image"):
        HarborImages(agent="Not An Image")
