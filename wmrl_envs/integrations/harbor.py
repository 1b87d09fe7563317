"""WMRL's code tasks as a Harbor dataset: one Harbor task folder per task (``docs/hubs.md``).

::

    wmrl export harbor --suite mle --split heldout datasets/wmrl-mle   # writes the folders
    wmrl export harbor-images                                          # the two local base images
    harbor run -p datasets/wmrl-mle -a oracle                          # Harbor's own runner

Each task folder holds:

* ``instruction.md``: the env's own task prompt (:func:`wmrl_envs.mle.task_prompt`, as
  ``reset`` returns it), then where the data is and where the submission goes;
* ``task.toml``: the task's :class:`~wmrl_envs.sandbox.limits.Limits` (memory, the script's wall
  clock as the agent's timeout), a separate verifier and the submission as the one artifact
  carried from the agent's container to the verifier's; no network either way of
  :data:`NETWORK_CHOICES`;
* ``environment/``: a ``Dockerfile`` on the agent base image and the task's public files only;
* ``tests/``: a ``Dockerfile`` on the grader base image, ``test.sh`` and ``task/`` (the task folder
  with its private answers and leaderboard). Harbor builds ``tests/`` into the verifier's own
  image, so the answers are never in the agent's image or build context;
* ``solution/``: ``solution.py``, a reference solution script the caller renders (``wmrl export``
  uses the grammar's ``hist_gb``, the script ``wmrl eval --policy reference:hist_gb`` runs), and
  ``solve.sh``, which runs it as the sandbox does: from the work dir, data under ``data/``.

``test.sh`` grades ``/app/submission.csv`` with ``wmrl grade --json`` and writes Harbor's
``/logs/verifier/reward.json``: ``reward`` is the position score (the RPG on DSBench tasks) and
``valid`` 1 or 0; an invalid or missing submission scores 0, as in training. A grader that cannot
run writes no reward, which Harbor records as a verifier error: an infrastructure failure is not
a score. The reward is real execution only: a Harbor trial has no calibrator shared across trials,
so world-model and fused rewards stay with the env, verifiers and ``wmrl serve``.

``python -m wmrl_envs.integrations.harbor reward GRADE_JSON REWARD_JSON`` is the step of
``test.sh`` that turns ``wmrl grade``'s report into the reward file.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from wmrl_envs.errors import ConfigError
from wmrl_envs.mle import MAX_OBS_CHARS, sanitize, task_prompt
from wmrl_envs.task_spec import Task

#: Where the agent works in its container: the public files under ``data/``, the submission beside.
APP_DIR = "/app"
SUBMISSION = f"{APP_DIR}/submission.csv"
#: The agent runtime venv (the sandbox's, numpy/pandas/scipy/scikit-learn) and the grader's venv.
RUNTIME_VENV = "/opt/wmrl-runtime"
GRADER_VENV = "/opt/wmrl-grader"
#: The task folder the verifier image holds, private answers included.
VERIFIER_TASK_DIR = "/tests/task"
DEFAULT_AGENT_IMAGE = "wmrl-harbor-agent:local"
DEFAULT_GRADER_IMAGE = "wmrl-harbor-grader:local"
#: How a task goes without network: ``compose`` (a docker-compose.yaml beside each Dockerfile sets
#: ``network_mode: none``; the Docker engine enforces it, no image needed) or ``harbor`` (task.toml
#: says ``no-network`` and Harbor enforces it, with an egress sidecar it builds from Docker Hub).
NETWORK_CHOICES = ("compose", "harbor")
NO_NETWORK_COMPOSE = ("# No network for this container (task.toml says why).\n"
                      "services:\n  main:\n    network_mode: none\n")
#: Seconds the verifier may take: importing the grader and scoring one CSV take a few.
VERIFIER_TIMEOUT_S = 300
_IMAGE_REF = re.compile(r"^[a-z0-9][a-z0-9._/:@-]*$")

# The variables let a test run this grading step outside the verifier's container.
TEST_SH = f"""#!/bin/bash
# Grades the agent's submission with `wmrl grade` against the private answers that only this
# verifier image holds, and writes Harbor's reward file (reward: the position score, or the RPG on
# DSBench tasks; valid: 1 or 0). An invalid or missing submission scores 0. A grader that fails
# (exit 2: the task or the grader is broken) writes no reward: Harbor then reports a verifier error.
set -uo pipefail
submission="${{WMRL_SUBMISSION:-{SUBMISSION}}}"
task="${{WMRL_TASK_DIR:-{VERIFIER_TASK_DIR}}}"
logs="${{WMRL_VERIFIER_LOGS:-/logs/verifier}}"
python="${{WMRL_GRADER_PYTHON:-{GRADER_VENV}/bin/python}}"
mkdir -p "$logs"
"$python" -m trainers.cli grade --task "$task" --json "$submission" > "$logs/grade.json"
status=$?
if [ "$status" -gt 1 ]; then
  echo "wmrl grade failed with exit status $status" >&2
  exit "$status"
fi
cat "$logs/grade.json"
exec "$python" -m wmrl_envs.integrations.harbor reward "$logs/grade.json" "$logs/reward.json"
"""

# The oracle copies solution/ to /solution; the script runs where the sandbox runs it.
SOLVE_SH = f"""#!/bin/bash
# The task's reference solution, run as WMRL's sandbox runs a script: from the work dir, with
# the task's public files under data/; it writes submission.csv there.
set -euo pipefail
cd {APP_DIR}
exec python /solution/solution.py
"""


@dataclass(frozen=True)
class HarborImages:
    """The local base images an export builds on (``wmrl export harbor-images`` makes both).

    Attributes:
        agent: The agent's image: an OS userland, Python and the agent runtime venv at
            :data:`RUNTIME_VENV` (first on ``PATH``); no WMRL, so agent code cannot rebuild a task.
        grader: The verifier's image: the agent image plus WMRL and its dependencies at
            :data:`GRADER_VENV`.
    """

    agent: str = DEFAULT_AGENT_IMAGE
    grader: str = DEFAULT_GRADER_IMAGE

    def __post_init__(self) -> None:
        for name, ref in (("agent", self.agent), ("grader", self.grader)):
            if not _IMAGE_REF.match(ref):
                raise ConfigError(f"{name} image must be a Docker image reference such as {DEFAULT_AGENT_IMAGE!r}, "
                                  f"got {ref!r}")


def instruction(task: Task) -> str:
    """The env's task prompt, then where this container keeps the data and wants the submission."""
    prompt = sanitize(task_prompt(task, max_turns=1), MAX_OBS_CHARS)
    return (f"{prompt}\n## In this environment\n"
            f"Work in `{APP_DIR}`: the task files are in `{APP_DIR}/data/`, and a script run from `{APP_DIR}` "
            f"must write `{SUBMISSION}`. `python` is the task's runtime (numpy, pandas, scipy, scikit-learn). "
            "The submission is graded against private answers after you finish.\n")


def _network_lines(network: str) -> list[str]:
    if network == "harbor":
        return ['network_mode = "no-network"']
    return ["# No network all the same: environment/ and tests/ each hold a docker-compose.yaml that gives",
            "# the container network_mode none. Harbor's own no-network needs an egress sidecar image",
            "# from Docker Hub (docs/hubs.md); export with network='harbor' where Harbor can build it.",
            'network_mode = "public"']


def task_toml(task: Task, images: HarborImages, network: str = "compose") -> str:
    """``task.toml``: Harbor's schema 1.4, no network, the task's limits, a separate verifier."""
    limits = task.limits
    limit_fields = ", ".join(f"{key} = {json.dumps(value)}" for key, value in sorted(asdict(limits).items()))
    lines = [
        'schema_version = "1.4"',
        f"artifacts = [{json.dumps(SUBMISSION)}]",
        "",
        "[task]",
        f"name = {json.dumps('wmrl/' + task.id)}",
        f"description = {json.dumps(f'{task.spec.name} ({task.spec.suite}, {task.spec.split}): {task.spec.metric}')}",
        f"keywords = {json.dumps(['wmrl', task.spec.suite, task.spec.split, task.spec.task_type])}",
        "",
        "[metadata]",
        f"wmrl_env = {json.dumps(task.spec.env_id)}",
        f"wmrl_metric = {json.dumps(task.spec.metric)}",
        f"wmrl_agent_image = {json.dumps(images.agent)}",
        f"wmrl_grader_image = {json.dumps(images.grader)}",
        f"wmrl_limits = {{ {limit_fields} }}",
        "",
        "[agent]",
        "# The sandbox gives a script this wall clock; one oracle run gets the same.",
        f"timeout_sec = {float(limits.wall_s)}",
        "",
        "[verifier]",
        "# Its own container, built from tests/: the private answers never reach the agent's.",
        'environment_mode = "separate"',
        f"timeout_sec = {float(VERIFIER_TIMEOUT_S)}",
        "",
        "[environment]",
        *_network_lines(network),
        f"memory_mb = {int(limits.memory_mb)}",
        "",
    ]
    return "\n".join(lines)


def _dockerfile(image: str, comment: str, copies: Iterable[tuple[str, str]], workdir: str | None) -> str:
    lines = [f"# {comment}", f"FROM {image}"]
    if workdir is not None:
        lines.append(f"WORKDIR {workdir}")
    lines += [f"COPY {source} {target}" for source, target in copies]
    return "\n".join(lines) + "\n"


def _copy_task_folder(task: Task, target: Path) -> None:
    """The task folder as the loader reads it: spec, description, public and private files and,
    for a built-in task whose leaderboard lives in the package, that leaderboard beside them."""
    if task.layout != "native":
        raise ConfigError(f"task {task.id}: the Harbor export takes WMRL's native task layout, not {task.layout!r}")
    shutil.copytree(task.root, target, ignore=shutil.ignore_patterns(".*"))
    if task.leaderboard_path is not None and not (target / "leaderboard.csv").exists():
        shutil.copyfile(task.leaderboard_path, target / "leaderboard.csv")


def export_task(task: Task, out: Path, solution_script: str, images: HarborImages | None = None,
                network: str = "compose") -> Path:
    """Write ``task`` as the Harbor task folder ``out/<task id>`` (replaced if present); returns it.
    ``network`` is one of :data:`NETWORK_CHOICES`."""
    if network not in NETWORK_CHOICES:
        raise ConfigError(f"network must be one of {NETWORK_CHOICES}, got {network!r}")
    images = images if images is not None else HarborImages()
    folder = Path(out) / task.id
    if folder.exists():
        shutil.rmtree(folder)
    environment, tests, solution = folder / "environment", folder / "tests", folder / "solution"
    for path in (environment, tests, solution):
        path.mkdir(parents=True)
    (folder / "instruction.md").write_text(instruction(task))
    (folder / "task.toml").write_text(task_toml(task, images, network))
    if network == "compose":
        for path in (environment, tests):
            (path / "docker-compose.yaml").write_text(NO_NETWORK_COMPOSE)

    shutil.copytree(task.public_dir, environment / "data", ignore=shutil.ignore_patterns(".*"))
    (environment / "Dockerfile").write_text(_dockerfile(
        images.agent, f"{task.id}: the agent's container, with the task's public files only",
        [("data/", f"{APP_DIR}/data/")], workdir=APP_DIR))

    _copy_task_folder(task, tests / "task")
    (tests / "test.sh").write_text(TEST_SH)
    (tests / "Dockerfile").write_text(_dockerfile(
        images.grader, f"{task.id}: the verifier's container, with the private answers and the grader",
        [("task/", f"{VERIFIER_TASK_DIR}/"), ("test.sh", "/tests/test.sh")], workdir=None))

    (solution / "solution.py").write_text(solution_script)
    (solution / "solve.sh").write_text(SOLVE_SH)
    for script in (tests / "test.sh", solution / "solve.sh"):
        script.chmod(0o755)
    return folder


def export_tasks(tasks: Iterable[Task], out: Path, solution_script: Callable[[Task], str],
                 images: HarborImages | None = None, network: str = "compose") -> list[Path]:
    """Write every task of ``tasks`` under ``out`` (a Harbor local dataset); returns the folders."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return [export_task(task, out, solution_script(task), images, network) for task in tasks]


def harbor_reward(report: dict[str, Any]) -> dict[str, float]:
    """Harbor's reward from ``wmrl grade --json``'s report: the task's reward (0 when invalid)."""
    reward = report["rpg"] if report["rpg"] is not None else report["position_score"]
    if not report["valid"] or reward is None:
        return {"reward": 0.0, "valid": 0}
    return {"reward": float(reward), "valid": 1}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wmrl_envs.integrations.harbor",
                                     description="Steps of an exported task's verifier.")
    sub = parser.add_subparsers(dest="command", required=True)
    reward = sub.add_parser("reward", help="turn `wmrl grade --json`'s report into Harbor's reward.json")
    reward.add_argument("grade_json", type=Path)
    reward.add_argument("reward_json", type=Path)
    args = parser.parse_args(argv)
    result = harbor_reward(json.loads(args.grade_json.read_text()))
    args.reward_json.write_text(json.dumps(result) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
