"""Fixtures for the adversarial sandbox tests.

The scripts really attack the host (``kill -9 -1``, ``mount --bind / /tmp``, writes to ``/usr``):
never point this suite at an uncontained executor such as ``unsafe-subprocess``. Every test runs
against each contained executor: bubblewrap, the warm executor (runs forked from a preloaded
zygote; ``test_warm_isolation.py`` adds what warmth could leak between runs), and Docker (marked
``docker``) on a private dockerd that this suite starts and stops, leaving host networking as it
found it.

Every test gets a real task folder (``public/`` next to ``private/answers.csv``), a canary
file on the host and a unique marker. After each test the guard checks the host: the canary
and the public files are untouched, no process carrying the marker is alive, no run cgroup
or run folder is left behind, and the executor still runs hello world.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import textwrap
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from wmrl_envs.errors import SandboxUnavailableError
from wmrl_envs.sandbox import ExecutionResult, ExecutionStatus, Limits, cgroups, make_executor
from wmrl_envs.sandbox.bwrap import BwrapExecutor
from wmrl_envs.sandbox.docker_executor import DockerExecutor
from wmrl_envs.sandbox.warm import WarmExecutor
from wmrl_envs.task_spec import Task, TaskSpec

LIMITS = Limits(wall_s=15, cpu_s=15, memory_mb=512, max_processes=64, tmpfs_mb=48, file_mb=32, output_bytes=8192)
# The contained executors under attack, by make_executor name.
EXECUTORS = ["bwrap", "warm", pytest.param("docker", marks=pytest.mark.docker)]


@dataclass
class Arena:
    """One test's world: the executor, the task, host-side secrets and the marker."""

    executor: object
    task: Task
    marker: str
    answers_token: str
    canary: Path
    work_root: Path
    limits: Limits = LIMITS

    def run(self, code: str, limits: Limits | None = None, marked: bool = False) -> ExecutionResult:
        """Run ``code`` in the sandbox; ``marked`` re-execs it with the marker in its argv,
        so that every process it forks carries the marker in its host-visible cmdline."""
        code = textwrap.dedent(code)
        if marked:
            code = (
                "import os, sys\n"
                f"if {self.marker!r} not in sys.argv:\n"
                f"    os.execv(sys.executable, [sys.executable, 'solution.py', {self.marker!r}])\n"
            ) + code
        return self.executor.run(code, self.task, limits or self.limits)

    def survivors(self) -> list[int]:
        """Host processes still carrying this test's marker."""
        return processes_with(self.marker)


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line contains ``marker`` (a /proc scan, no psutil)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes()
        except OSError:  # exited while we looked
            continue
        if marker.encode() in cmdline:
            found.append(int(entry.name))
    return found


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        h.update(str(path).encode())
        if path.is_file():
            h.update(path.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="session", params=EXECUTORS)
def executor_spec(request) -> tuple[str, dict]:
    """The executor under attack: its make_executor name and keyword arguments."""
    if request.param == "docker":
        return "docker", {"host": request.getfixturevalue("private_dockerd").host}
    return request.param, {}


@pytest.fixture(scope="session")
def sandbox_executor(executor_spec, tmp_path_factory):
    name, kwargs = executor_spec
    try:
        executor = make_executor(name, work_root=tmp_path_factory.mktemp(f"runs-{name}"), **kwargs)
    except SandboxUnavailableError as exc:
        pytest.fail(f"the security suite needs {name}: {exc}")
    assert isinstance(executor, (BwrapExecutor, WarmExecutor, DockerExecutor))  # see the module docstring
    return executor


def build_arena(executor, tmp_path: Path, work_root: Path) -> Arena:
    """A fresh arena for ``executor`` (``tests/integration/test_ray.py`` reuses it for Ray)."""
    answers_token = f"ANSWERTOKEN{uuid.uuid4().hex}"
    root = tmp_path / "task"
    (root / "public").mkdir(parents=True)
    (root / "private").mkdir()
    (root / "public" / "train.csv").write_text("id,x,target\n1,0.5,1\n2,0.1,0\n")
    (root / "private" / "answers.csv").write_text(f"id,target\n3,{answers_token}\n")
    (root / "description.md").write_text("toy task")
    spec = TaskSpec(
        id="toy", name="toy", suite="test", env_id="wmrl/MLEDojo-v0", split="train",
        metric="accuracy", task_type="binary", limits=LIMITS,
    )  # fmt: skip
    task = Task(
        spec=spec,
        root=root,
        description_path=root / "description.md",
        public_dir=root / "public",
        answers_path=root / "private" / "answers.csv",
    )
    canary = tmp_path / "canary.txt"
    canary.write_text("untouched")
    return Arena(
        executor=executor,
        task=task,
        marker=f"wmrlsec{uuid.uuid4().hex[:12]}",
        answers_token=answers_token,
        canary=canary,
        work_root=work_root,
    )


@pytest.fixture
def arena(sandbox_executor, tmp_path) -> Arena:
    return build_arena(sandbox_executor, tmp_path, sandbox_executor.work_root)


@contextlib.contextmanager
def host_guard(arena: Arena):
    """Check, after the block, that the host is as it was and the executor still works."""
    public_before = _digest(arena.task.public_dir)
    answers_before = arena.task.answers_path.read_text()
    yield
    assert arena.canary.read_text() == "untouched"
    assert _digest(arena.task.public_dir) == public_before
    assert arena.task.answers_path.read_text() == answers_before
    assert processes_with(arena.marker) == []
    for parent in cgroups.parent_dirs().values():
        assert list(parent.glob(f"run-{os.getpid()}-*")) == []
    assert list(arena.work_root.iterdir()) == []
    if isinstance(arena.executor, DockerExecutor):
        assert arena.executor.containers() == []
    hello = arena.executor.run("print('still alive')", arena.task, LIMITS)
    assert hello.status is ExecutionStatus.OK, hello
    assert hello.stdout == "still alive\n"


@pytest.fixture(autouse=True)
def host_unaffected(arena):
    with host_guard(arena):
        yield
