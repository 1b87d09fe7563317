"""Conformance tests every executor must pass (the same suite for each backend)."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from wmrl_envs.errors import SandboxUnavailableError
from wmrl_envs.sandbox import ExecutionResult, ExecutionStatus, ExecutorPool, Limits, make_executor
from wmrl_envs.sandbox.arithmetic import NATIVE, arithmetic, arithmetic_env
from wmrl_envs.task_spec import Task, TaskSpec

# "bwrap-fallback" is bwrap as it runs where the host is not root: no cgroups, and a work dir
# on the host's disk that is checked after the run. "warm" forks each run from a preloaded zygote.
EXECUTORS = ["bwrap", "bwrap-fallback", "warm", "unsafe-subprocess"]
SMALL = Limits(wall_s=20, cpu_s=20, memory_mb=1024, max_processes=64, tmpfs_mb=64, file_mb=32, output_bytes=4096)


def make_task(root: Path, limits: Limits = SMALL) -> Task:
    """A task folder like the real ones: public/ and private/answers.csv side by side."""
    (root / "public").mkdir(parents=True)
    (root / "private").mkdir()
    (root / "public" / "train.csv").write_text("id,x,target\n1,0.5,1\n2,0.1,0\n")
    (root / "private" / "answers.csv").write_text("id,target\n3,1\n")
    (root / "description.md").write_text("toy task")
    spec = TaskSpec(
        id="toy", name="toy", suite="test", env_id="wmrl/MLEDojo-v0", split="train",
        metric="accuracy", task_type="binary", limits=limits,
    )  # fmt: skip
    return Task(
        spec=spec,
        root=root,
        description_path=root / "description.md",
        public_dir=root / "public",
        answers_path=root / "private" / "answers.csv",
    )


@pytest.fixture(scope="module", params=EXECUTORS)
def executor(request):
    if request.param.startswith(("bwrap", "warm")) and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (the security suite fails loudly instead)")
    if request.param == "bwrap-fallback":
        return make_executor("bwrap", use_cgroups=False, tmpfs_work_dir=False)
    return make_executor(request.param)


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return make_task(tmp_path / "task")


def run(executor, task, code: str, limits: Limits | None = None) -> ExecutionResult:
    return executor.run(textwrap.dedent(code), task, limits)


def test_hello_world(executor, task):
    result = run(executor, task, "print('hello')")
    assert result.status is ExecutionStatus.OK, result
    assert result.ok
    assert result.stdout == "hello\n"
    assert result.returncode == 0
    assert result.submission_path is None
    assert result.executor == executor.name
    assert result.cpu_s > 0
    assert result.enforced["rlimits"]
    assert result.wall_s > 0


def test_submission_is_copied_out(executor, task):
    result = run(
        executor,
        task,
        """
        import pandas as pd
        pd.DataFrame({"id": [3], "target": [1]}).to_csv("submission.csv", index=False)
        """,
    )
    assert result.ok, result
    assert result.submission_path is not None
    assert result.submission_path.read_text() == "id,target\n3,1\n"
    kept = result.submission_path
    result.cleanup()
    assert not kept.exists()
    assert not kept.parent.exists()
    assert result.submission_path is None


def test_submission_symlink_is_not_followed(executor, task, tmp_path):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("TOPSECRET")
    result = run(executor, task, f"import os; os.symlink({str(secret)!r}, 'submission.csv')")
    assert result.ok, result
    assert result.submission_path is None


def test_nonzero_exit_is_error_with_traceback(executor, task):
    result = run(executor, task, "raise ValueError('boom')")
    assert result.status is ExecutionStatus.ERROR
    assert result.returncode == 1
    assert "Traceback" in result.stderr
    assert "ValueError: boom" in result.stderr


def test_exit_code_is_reported(executor, task):
    result = run(executor, task, "import sys; print('partial'); sys.exit(3)")
    assert result.status is ExecutionStatus.ERROR
    assert result.returncode == 3
    assert result.stdout == "partial\n"


def test_wall_clock_timeout(executor, task):
    limits = Limits(wall_s=2, cpu_s=20, memory_mb=1024, tmpfs_mb=64)
    result = run(executor, task, "import time\nprint('started', flush=True)\nwhile True: time.sleep(0.1)", limits)
    assert result.status is ExecutionStatus.TIMEOUT
    assert result.stdout == "started\n"
    assert "wall-clock" in result.error


def test_submission_written_before_timeout_is_kept(executor, task):
    limits = Limits(wall_s=2, cpu_s=20, memory_mb=1024, tmpfs_mb=64)
    code = "import time\nopen('submission.csv', 'w').write('id,target\\n3,1\\n')\ntime.sleep(60)"
    result = run(executor, task, code, limits)
    assert result.status is ExecutionStatus.TIMEOUT
    if result.enforced["memory_cgroup"] or executor.name == "bwrap":
        assert result.submission_path is not None
        assert result.submission_path.read_text() == "id,target\n3,1\n"
    result.cleanup()


def test_memory_limit(executor, task):
    limits = Limits(wall_s=20, cpu_s=20, memory_mb=512, tmpfs_mb=64)
    result = run(executor, task, "blob = bytearray(2 << 30)\nprint('allocated')", limits)
    assert result.status in (ExecutionStatus.MEMORY, ExecutionStatus.ERROR)
    assert result.status is ExecutionStatus.MEMORY or "MemoryError" in result.stderr
    assert "allocated" not in result.stdout


def test_work_dir_size_is_bounded(executor, task):
    limits = Limits(wall_s=20, memory_mb=1024, tmpfs_mb=8, file_mb=4)
    code = """
    written = 0
    for i in range(4):
        try:
            with open(f"part{i}.bin", "wb") as f:
                f.write(b"x" * (3 << 20))
            written += 3
        except OSError:
            pass
    print(written)
    """
    result = run(executor, task, code, limits)
    if result.enforced["workdir_tmpfs"]:
        assert result.ok, result
        assert int(result.stdout) <= 8
    else:
        assert result.status is ExecutionStatus.ERROR, result
        assert "work dir" in result.error


def test_public_data_is_readable(executor, task):
    result = run(executor, task, "import pandas as pd\nprint(pd.read_csv('data/train.csv').shape)")
    assert result.ok, result
    assert result.stdout == "(2, 3)\n"


def test_work_dir_is_fresh_and_writable(executor, task):
    first = run(executor, task, "open('leftover.txt', 'w').write('x')")
    assert first.ok, first
    second = run(executor, task, "import os\nprint(sorted(os.listdir('.')))")
    assert second.ok, second
    assert second.stdout == "['data', 'solution.py']\n"


def test_limits_argument_overrides_task_limits(executor, tmp_path):
    task = make_task(tmp_path / "task", Limits(wall_s=1, tmpfs_mb=64))
    result = run(executor, task, "import time\ntime.sleep(2)\nprint('done')", SMALL)
    assert result.ok, result
    assert result.stdout == "done\n"


def test_output_is_bounded_and_keeps_the_tail(executor, task):
    result = run(executor, task, "import sys\nsys.stdout.write('x' * 1_000_000)\nprint('END')")
    assert result.ok, result
    assert result.stdout_truncated
    assert len(result.stdout.encode()) <= SMALL.output_bytes
    assert result.stdout.endswith("xEND\n")


def test_environment_is_rebuilt(executor, task, monkeypatch):
    monkeypatch.setenv("WMRL_TEST_SECRET", "s3cr3t-value")
    result = run(executor, task, "import json, os\nprint(json.dumps(dict(os.environ)))")
    assert result.ok, result
    env = json.loads(result.stdout)
    assert "WMRL_TEST_SECRET" not in env
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert env["PYTHONHASHSEED"] == "0"
    assert env["MPLBACKEND"] == "Agg"
    pinned = arithmetic_env()
    assert {name: env[name] for name in pinned} == pinned


def test_the_arithmetic_is_the_pinned_one(executor, task):
    """numpy's and scipy's OpenBLAS load AVX2 kernels and numpy dispatches no further than x86-64-v3,
    in the warm zygote too (it imported them before any run)."""
    code = """
    import json, numpy, scipy.linalg
    from numpy._core._multiarray_umath import __cpu_features__
    from threadpoolctl import threadpool_info
    kernels = [pool["architecture"] for pool in threadpool_info() if pool["internal_api"] == "openblas"]
    print(json.dumps({"kernels": kernels, "v3": __cpu_features__["X86_V3"], "v4": __cpu_features__["X86_V4"]}))
    """
    result = run(executor, task, code)
    assert result.ok, result
    seen = json.loads(result.stdout)
    assert len(seen["kernels"]) == 2  # numpy's and scipy's own copies
    if arithmetic() == NATIVE:
        pytest.skip("this host cannot run x86-64-v3 code: the libraries choose their own")
    assert seen == {"kernels": ["Haswell", "Haswell"], "v3": True, "v4": False}


def test_agent_cannot_import_the_project(executor, task):
    code = """
    for name in ("wmrl_envs", "torch", "gymnasium", "yaml"):
        try:
            __import__(name)
            print("IMPORTED", name)
        except ImportError:
            print("missing", name)
    """
    result = run(executor, task, code)
    assert result.ok, result
    assert "IMPORTED" not in result.stdout
    assert result.stdout.count("missing") == 4


def test_runtime_packages_are_importable(executor, task):
    code = """
    import numpy, pandas, scipy, sklearn
    from sklearn.linear_model import LogisticRegression
    LogisticRegression().fit([[0.0], [1.0]], [0, 1])
    print("ok", numpy.__version__, sklearn.__version__)
    """
    result = run(executor, task, code)
    assert result.ok, result
    assert result.stdout.startswith("ok ")


def test_joblib_processes_work(executor, task):
    code = """
    from joblib import Parallel, delayed
    print(sum(Parallel(n_jobs=2)(delayed(abs)(-i) for i in range(10))))
    """
    result = run(executor, task, code)
    assert result.ok, result
    assert result.stdout == "45\n"


def test_missing_public_dir_is_infra_error(executor, task):
    task.public_dir.rename(task.root / "gone")
    result = run(executor, task, "print('hello')")
    assert result.status is ExecutionStatus.INFRA_ERROR
    assert not result.ok
    assert "public_dir" in result.error
    assert result.returncode is None


def test_pool_preserves_order_and_overlaps(executor, task):
    code = """
    import json, time
    start = time.time()
    time.sleep(1.5)
    print(json.dumps({{"i": {i}, "start": start, "end": time.time()}}))
    """
    items = [(textwrap.dedent(code.format(i=i)), task) for i in range(4)]
    with ExecutorPool(executor, workers=2) as pool:
        results = pool.run_batch(items)
    assert all(r.ok for r in results), results
    spans = [json.loads(r.stdout) for r in results]
    assert [s["i"] for s in spans] == [0, 1, 2, 3]
    # Some pair of runs was in flight at the same time.
    assert any(a["start"] < b["end"] and b["start"] < a["end"] for a in spans for b in spans if a is not b)


def test_pool_submit_returns_future(executor, task):
    with ExecutorPool(executor, workers=1) as pool:
        future = pool.submit("print(6 * 7)", task)
        assert future.result().stdout == "42\n"


# -- executor-independent -------------------------------------------------------------------


def test_unknown_names_raise_and_list_the_real_executors():
    for name in ("podman", "nope"):
        with pytest.raises(SandboxUnavailableError, match="bwrap.*docker"):
            make_executor(name)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_the_default_is_warm_where_the_host_allows_it_and_cold_bwrap_elsewhere(monkeypatch, caplog):
    from wmrl_envs.sandbox import DEFAULT_EXECUTOR, auto, warm

    assert DEFAULT_EXECUTOR == "auto"
    try:
        warm.WarmExecutor()
        expected = "warm"
    except SandboxUnavailableError:
        expected = "bwrap"
    assert make_executor().name == expected
    # A host where the warm sandbox cannot run (here: not root) gets the cold one, with one warning saying why.
    monkeypatch.setattr(warm.os, "geteuid", lambda: 1000)
    auto._warn_cold_once.cache_clear()  # the warning is said once per reason and process
    with caplog.at_level("WARNING", logger="wmrl_envs.sandbox"):
        assert make_executor("auto").name == "bwrap"
    assert "warm executor needs root" in caplog.text
    with pytest.raises(SandboxUnavailableError, match="needs root"):
        make_executor("warm")  # asked for by name, it never falls back


def test_missing_docker_cli_says_how_to_install(monkeypatch):
    from wmrl_envs.sandbox import docker_executor

    monkeypatch.setattr(docker_executor.shutil, "which", lambda _: None)
    with pytest.raises(SandboxUnavailableError, match="apt-get install docker.io"):
        make_executor("docker")


def test_docker_mount_options_quote_paths_as_the_cli_parses_them():
    from wmrl_envs.sandbox.docker_executor import _mount_option

    quoted = _mount_option(type="bind", source="/a,b", target="/c", readonly=True)
    assert quoted == 'type=bind,"source=/a,b",target=/c,readonly'
    assert _mount_option(type="tmpfs", target="/t", tmpfs_size=4096) == "type=tmpfs,target=/t,tmpfs-size=4096"


def test_the_docker_skeleton_is_deterministic():
    from wmrl_envs.sandbox.docker_executor import skeleton_tar

    assert skeleton_tar() == skeleton_tar()


def test_missing_bwrap_says_how_to_install(monkeypatch):
    from wmrl_envs.sandbox import bwrap

    monkeypatch.setattr(bwrap.shutil, "which", lambda _: None)
    with pytest.raises(SandboxUnavailableError, match="apt-get install bubblewrap"):
        bwrap.BwrapExecutor()


def test_result_defaults_and_cleanup_without_submission():
    result = ExecutionResult(status=ExecutionStatus.INFRA_ERROR, error="x")
    assert not result.ok
    result.cleanup()
    assert result.submission_path is None
