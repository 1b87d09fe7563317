"""The Docker executor on a real, private dockerd (``private_dockerd`` in tests/conftest.py).

The conformance suite every executor passes (``tests/unit/test_sandbox.py``) runs here through
Docker unchanged, and the adversarial suite in ``tests/security`` attacks Docker itself (its
runs marked ``docker``). This file adds what is Docker's own: the same results as bubblewrap
for the same scripts, the limits as the engine holds them on a live container, OOM kills, the
pids limit, no container left after any run, what a killed launcher leaves behind, the error
without an engine, and host networking left as the private dockerd found it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from agents.code.grammar import REFERENCE_SOLUTIONS, render_script
from wmrl_envs.errors import SandboxUnavailableError
from wmrl_envs.sandbox import ExecutionStatus, Limits, identity, make_executor
from wmrl_envs.sandbox.cgroups import CGROUP_ROOT
from wmrl_envs.sandbox.docker_executor import CGROUP_PARENT, IMAGE_REPOSITORY, RUN_PREFIX, skeleton_tar
from wmrl_envs.sandbox.dockerd import HostNetwork, PrivateDockerd, mount_points
from wmrl_envs.scoring import CodeScorer
from wmrl_envs.tasks import list_tasks

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
SCORE_TOL = 1e-9  # as in test_ray: equal scripts on equal data in the same venv give equal floats


def _load(path: Path):
    """A test module, loaded under its own name (its fixtures are not registered here)."""
    spec = importlib.util.spec_from_file_location(f"wmrl_docker_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


conformance = _load(REPO / "tests" / "unit" / "test_sandbox.py")
CONFORMANCE = [f for name, f in vars(conformance).items()
               if name.startswith("test_") and "executor" in inspect.signature(f).parameters]
# Scripts whose whole result (status, output, exit status, error, submission) must not depend
# on the executor.
SAME_AS_BWRAP = {
    "hello": "print('hello')",
    "submission": ("import pandas as pd\n"
                   "pd.DataFrame({'id': [3], 'target': [1]}).to_csv('submission.csv', index=False)"),
    "exit_code": "import sys\nprint('partial')\nsys.exit(3)",
    "traceback": "raise ValueError('boom')",
    "signal": "import os, signal\nprint('bye', flush=True)\nos.kill(os.getpid(), signal.SIGTERM)",
    "memory_error": "blob = bytearray(2 << 30)",
    "public_data": "import pandas as pd\nprint(pd.read_csv('data/train.csv').to_json())",
    # The ids are not compared: a container runs as a host uid of its own (sandbox/identity.py), where
    # bwrap's agent is uid 65534 inside its user namespace; both are checked never to be root.
    "view": ("import json, os, resource\n"
             "print(json.dumps(dict(sorted(os.environ.items()))), os.getcwd(), os.getuid() != 0, os.getgid() != 0)\n"
             "print(sorted(os.listdir('.')), sorted(os.listdir('data')), sorted(os.listdir('/tmp')))\n"
             "print([resource.getrlimit(getattr(resource, f'RLIMIT_{r}')) for r in ('CPU', 'AS', 'FSIZE', 'CORE')])"),
    "model": ("import numpy as np\nfrom sklearn.linear_model import LogisticRegression\n"
              "x = np.arange(20.0).reshape(-1, 1)\nm = LogisticRegression().fit(x, (x[:, 0] > 9).astype(int))\n"
              "print(repr(m.coef_[0, 0]), repr(m.intercept_[0]))\n"
              "import pandas as pd\npd.DataFrame({'id': range(3), 'p': m.predict_proba(x[:3])[:, 1]}).to_csv("
              "'submission.csv', index=False)"),
}


@pytest.fixture(scope="module")
def executor(private_dockerd, tmp_path_factory):
    return make_executor("docker", host=private_dockerd.host, work_root=tmp_path_factory.mktemp("docker-runs"))


@pytest.fixture(scope="module")
def bwrap(tmp_path_factory):
    return make_executor("bwrap", work_root=tmp_path_factory.mktemp("bwrap-runs"))


@pytest.fixture
def task(tmp_path):
    return conformance.make_task(tmp_path / "docker-task")  # "task" is what some conformance checks make


@pytest.fixture(autouse=True)
def nothing_left_behind(request):
    """After a test that ran the module's executor: no container, run folder or run cgroup is left."""
    yield
    if "executor" in request.fixturenames:
        executor = request.getfixturevalue("executor")
        assert executor.containers() == []
        assert list(executor.work_root.iterdir()) == []
        assert list(CGROUP_ROOT.glob(f"*/{CGROUP_PARENT}/{RUN_PREFIX}*")) == []


def _docker(private_dockerd, *args: str) -> str:
    return subprocess.run(["docker", "--host", private_dockerd.host, *args], check=True, capture_output=True,
                          text=True).stdout


# ---------------------------------------------------------------------- the same contract as every executor
@pytest.mark.parametrize("check", CONFORMANCE, ids=lambda f: f.__name__.removeprefix("test_"))
def test_conformance_suite(check, executor, task, tmp_path, monkeypatch):
    fixtures = {"executor": executor, "task": task, "tmp_path": tmp_path, "monkeypatch": monkeypatch}
    check(**{name: fixtures[name] for name in inspect.signature(check).parameters})


@pytest.mark.parametrize("name", SAME_AS_BWRAP)
def test_results_equal_bwraps(name, executor, bwrap, task):
    mine, theirs = executor.run(SAME_AS_BWRAP[name], task), bwrap.run(SAME_AS_BWRAP[name], task)
    try:
        for field in ("status", "stdout", "stderr", "returncode", "error", "stdout_truncated"):
            assert getattr(mine, field) == getattr(theirs, field), field
        assert (mine.submission_path is None) == (theirs.submission_path is None)
        if mine.submission_path is not None:
            assert mine.submission_path.read_bytes() == theirs.submission_path.read_bytes()
        assert mine.executor == "docker" and mine.cpu_s > 0
    finally:
        mine.cleanup()
        theirs.cleanup()


def test_scores_equal_bwraps_on_a_real_task(private_dockerd, executor, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", private_dockerd.host)  # CodeScorer builds make_executor("docker") with no arguments
    mle_task = min(list_tasks(suite="mle", split="train"), key=lambda t: t.spec.meta.get("n_train", 1e9))
    scripts = [render_script(mle_task.spec, REFERENCE_SOLUTIONS["linear"]), "raise SystemExit(3)\n",
               "open('submission.csv', 'w').write('wrong,columns\\n1,2\\n')\n"]
    tasks = [mle_task] * len(scripts)
    local, docker = CodeScorer(executor="bwrap", workers=2), CodeScorer(executor="docker", workers=2)
    try:
        expected, got = local.execute(tasks, scripts), docker.execute(tasks, scripts)
    finally:
        local.close()
        docker.close()
    assert [s.execution_status for s in got] == [s.execution_status for s in expected] == ["ok", "error", "ok"]
    assert [s.status for s in got] == [s.status for s in expected] == ["valid", "runtime_error", "invalid_submission"]
    assert [s.valid for s in got] == [s.valid for s in expected] == [True, False, False]
    for mine, theirs in zip(got, expected):
        assert not mine.infra_failure
        assert mine.real_score == pytest.approx(theirs.real_score, abs=SCORE_TOL)
        assert mine.raw_score == pytest.approx(theirs.raw_score, abs=SCORE_TOL)
        assert mine.error == theirs.error
    assert got[0].real_score > 0


# ---------------------------------------------------------------------- Docker's own
def test_the_engine_holds_the_limits_on_a_live_container(private_dockerd, executor, task):
    limits = Limits(wall_s=60, cpu_s=20, memory_mb=300, max_processes=40, tmpfs_mb=24, file_mb=8)
    code = textwrap.dedent(
        """
        import os, resource, time
        while not os.path.exists("release"):  # the test writes it once it has inspected the container
            time.sleep(0.05)
        print([resource.getrlimit(r)[0] for r in (resource.RLIMIT_CPU, resource.RLIMIT_AS, resource.RLIMIT_FSIZE,
                                                  resource.RLIMIT_CORE)])
        """
    )
    results = []
    runner = threading.Thread(target=lambda: results.append(executor.run(code, task, limits)))
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while not executor.containers() and time.monotonic() < deadline:
            time.sleep(0.05)
        [name] = executor.containers()
        [info] = json.loads(_docker(private_dockerd, "inspect", name))
    finally:
        for work in executor.work_root.glob(f"{RUN_PREFIX}*/work"):
            (work / "release").write_text("")
        runner.join()
    [result] = results
    assert result.ok, result
    assert result.stdout == f"[20, {300 << 20}, {8 << 20}, 0]\n"
    host = info["HostConfig"]
    assert (host["Memory"], host["MemorySwap"], host["PidsLimit"]) == (300 << 20, 300 << 20, 40)
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] and host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"] == ["no-new-privileges"] and host["LogConfig"]["Type"] == "none"
    assert "size=24m" in host["Tmpfs"]["/tmp"] and "size=24m" in host["Tmpfs"]["/dev/shm"]
    uid, gid = info["Config"]["User"].split(":")  # a host uid of the run's own, never root
    assert uid == gid and int(uid) in identity.RUN_UIDS
    mounts = {m["Destination"]: m for m in info["Mounts"]}
    assert [target for target, m in mounts.items() if m["RW"]] == ["/workspace"]
    # Of the task's folder only the public files are mounted: never its root, never private/.
    public = str(task.public_dir.resolve())
    assert [m["Source"] for m in mounts.values() if m.get("Source", "").startswith(str(task.root))] == [public]
    assert mounts["/workspace/data"]["Source"] == public


def test_an_oom_kill_is_a_memory_result(executor, task):
    limits = Limits(wall_s=30, memory_mb=256, tmpfs_mb=24)
    code = """
    import subprocess, sys
    hog = "b = bytearray(120 << 20); import time; time.sleep(5)"  # each under RLIMIT_AS, together over the limit
    procs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(3)]
    sys.exit(max(abs(p.wait()) for p in procs))
    """
    result = executor.run(textwrap.dedent(code), task, limits)
    assert result.status is ExecutionStatus.MEMORY, result
    assert result.error == "memory limit of 256 MB exceeded (OOM kill)"
    assert result.peak_rss_mb <= 256 + 1


def test_the_pids_limit_holds(executor, task):
    code = """
    import os, time
    children = []
    try:
        while True:
            pid = os.fork()
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            children.append(pid)
    except OSError as exc:
        print(len(children), exc.errno)
    """
    result = executor.run(textwrap.dedent(code), task, Limits(wall_s=30, max_processes=20, tmpfs_mb=24))
    assert result.ok, result
    forked, errno = map(int, result.stdout.split())
    assert 5 <= forked < 20 and errno == 11  # EAGAIN from pids.max; PID 1 and its reader count too


def test_a_timed_out_run_leaves_no_container_and_no_process(executor, task):
    marker = f"wmrldockertimeout{os.getpid()}"
    code = f"""
    import signal, subprocess, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    subprocess.Popen(["sh", "-c", "trap '' TERM; while true; do sleep 0.2; done", "{marker}"])
    print("up", flush=True)
    while True:
        time.sleep(0.1)
    """
    result = executor.run(textwrap.dedent(code), task, Limits(wall_s=3, tmpfs_mb=24))
    assert result.status is ExecutionStatus.TIMEOUT, result
    assert result.stdout == "up\n" and result.returncode == 137
    assert executor.containers() == []
    assert not [pid for pid in os.listdir("/proc") if pid.isdigit() and _cmdline_has(pid, marker)]


def _cmdline_has(pid: str, marker: str) -> bool:
    try:
        return marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_what_a_killed_launcher_leaves_is_removed_by_the_next_executor(private_dockerd, executor, task, tmp_path):
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(
        f"""
        from pathlib import Path
        from types import SimpleNamespace
        from wmrl_envs.sandbox import Limits, make_executor
        executor = make_executor("docker", host={private_dockerd.host!r}, work_root=Path({str(tmp_path)!r}))
        task = SimpleNamespace(public_dir=Path({str(task.public_dir)!r}), limits=Limits(wall_s=120))
        executor.run("open('started', 'w').close()\\nimport time\\ntime.sleep(120)", task)
        """
    ))
    host = subprocess.Popen([sys.executable, str(driver)])
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(f"{RUN_PREFIX}*/work/started")) and time.monotonic() < deadline:
            time.sleep(0.05)
        [run_dir] = [p.parents[1] for p in tmp_path.glob(f"{RUN_PREFIX}*/work/started")]
    finally:
        host.kill()
        host.wait()
    name = run_dir.name
    # PID 1 sees its stdin close and ends the run: the container stops, but nobody removed it.
    deadline = time.monotonic() + 30
    while _docker(private_dockerd, "ps", "--filter", f"name={name}", "-q") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _docker(private_dockerd, "ps", "--filter", f"name={name}", "-q") == ""
    assert _docker(private_dockerd, "ps", "--all", "--filter", f"name={name}", "--format", "{{.Names}}").split() == [name]
    assert str(run_dir / "work") in mount_points()
    make_executor("docker", host=private_dockerd.host, work_root=tmp_path)
    assert _docker(private_dockerd, "ps", "--all", "--filter", f"name={name}", "-q") == ""
    assert str(run_dir / "work") not in mount_points() and not run_dir.exists()
    assert list(CGROUP_ROOT.glob(f"*/{CGROUP_PARENT}/{name}")) == []


def test_the_image_is_imported_once_and_tagged_by_its_content(private_dockerd, executor):
    again = make_executor("docker", host=private_dockerd.host)
    assert again.image == executor.image
    tags = _docker(private_dockerd, "images", IMAGE_REPOSITORY, "--format", "{{.Tag}}").split()
    assert tags == [hashlib.sha256(skeleton_tar()).hexdigest()[:16]]


def test_without_an_engine_the_error_says_how_to_start_one(tmp_path):
    with pytest.raises(SandboxUnavailableError, match=r"does not answer.*python -m wmrl_envs\.sandbox\.dockerd"):
        make_executor("docker", host=f"unix://{tmp_path}/no-engine.sock")


def test_a_private_dockerd_leaves_host_networking_as_found(task):
    before = HostNetwork.snapshot()
    daemon = PrivateDockerd().start()
    try:
        result = make_executor("docker", host=daemon.host).run("print('hi')", task)
        during = HostNetwork.snapshot()
    finally:
        changes = daemon.stop()
    assert result.ok and result.stdout == "hi\n", result
    assert changes == []
    assert during == before  # not even while it ran
    after = HostNetwork.snapshot()
    assert after == before and "docker0" not in after.interfaces
    assert not Path(f"/proc/{daemon.pid}").exists()  # stopped by its pid
